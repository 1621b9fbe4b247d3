"""A user's environment against what it declares, before trajrl trains on it (gymnasium only: no
torch is loaded): its first steps under random actions, each observation against its
``observation_space`` (shape, a dtype trajrl can cast to the declared one, finite values) and each
reward finite. gymnasium's passive checker (which ``gymnasium.make`` wraps every environment in)
only warns, once; here the first misbehaviour is named with its step and what would work.

``first_steps`` plays them and reports what it saw (``trajrl check-env`` prints it);
``check_first_steps`` is the config check (``trajrl.configuration.checks``): a ``ConfigError`` on ``env.id``.
``CheckedSteps`` checks every step of a collector's environment the same way while a run trains.
"""

from __future__ import annotations

import functools
import json
import math
import statistics
import warnings
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym
import numpy as np

from trajrl.base.errors import BadStep, ConfigError, EnvironmentFailed
from trajrl.envs.gym_envs import stepping

FLOAT32_MAX = float(np.finfo(np.float32).max)

#: Random steps the config check plays (``trajrl check-env --steps`` plays more).
CHECKED_STEPS = 100


@dataclass
class FirstSteps:
    """What ``steps`` random steps of an environment showed."""

    steps: int = 0  # steps taken (fewer than asked when a problem stopped them)
    lengths: list[int] = field(default_factory=list)  # of the episodes that ended, in steps
    returns: list[float] = field(default_factory=list)  # of the episodes that ended
    rewards: tuple[float, float] = (float("inf"), float("-inf"))  # the smallest and the largest
    problem: str = ""  # the first misbehaviour ("" when none)
    notes: list[str] = field(default_factory=list)  # what trajrl does about what it saw (casts)

    def episodes(self) -> str:
        """The episodes in words (for ``trajrl check-env``)."""
        if not self.lengths:
            return f"no episode ended within {self.steps:,} steps"
        return (
            f"{len(self.lengths)} episode{'s' * (len(self.lengths) > 1)} ended, "
            f"lengths {min(self.lengths)} .. {max(self.lengths)} "
            f"(median {statistics.median(self.lengths):g}), returns {min(self.returns):.4g} .. "
            f"{max(self.returns):.4g} (mean {statistics.fmean(self.returns):.4g})"
        )


def first_steps(
    env_id: str, kwargs: dict[str, Any], steps: int, seed: int = 0, timeout_s: float | None = None
) -> FirstSteps:
    """Reset ``env_id`` (seeded) and play ``steps`` uniformly random actions, resetting at each
    episode's end; stop at the first observation or reward that misbehaves (``problem``). The
    environment is made as ``gymnasium.make`` makes it, without trajrl's wrappers (its
    ``import_module`` already imported). A call that raises ends the steps there, with a note
    (collectors rebuild an environment that raises: ``collector.max_restarts``); one that does not
    return within ``timeout_s`` raises ``EnvironmentFailed`` naming it."""
    seen = FirstSteps()
    doing = f"trajrl played its first {steps:,} random steps"
    with warnings.catch_warnings():  # gymnasium's passive checker warns; what it warns of is said here, as errors
        warnings.simplefilter("ignore")
        env = gym.make(env_id, **kwargs)
        problem, where = "", "reset of episode 1"
        try:
            env.action_space.seed(seed)
            with stepping(env_id, doing, timeout_s):
                obs, _ = env.reset(seed=seed)
            episode, t, total, ended, where = 1, 0, 0.0, False, "reset of episode 1"
            while not (problem := an_observation_problem(env.observation_space, obs)):
                note_cast(seen, env.observation_space, obs)
                if ended:  # its last observation is checked: the next episode
                    seen.lengths.append(t)
                    seen.returns.append(total)
                    episode, t, total, ended, where = episode + 1, 0, 0.0, False, f"reset of episode {episode + 1}"
                    with stepping(env_id, doing, timeout_s):
                        obs, _ = env.reset()
                    continue
                if seen.steps >= steps:
                    break
                with stepping(env_id, doing, timeout_s):
                    obs, reward, terminated, truncated, _ = env.step(env.action_space.sample())
                seen.steps, t, where = seen.steps + 1, t + 1, f"step {t + 1} of episode {episode}"
                if problem := reward_problem(reward):
                    break
                total, ended = total + float(reward), terminated or truncated
                seen.rewards = (min(seen.rewards[0], float(reward)), max(seen.rewards[1], float(reward)))
        except EnvironmentFailed as failed:
            if failed.__cause__ is None:  # it did not answer within timeout_s
                raise
            cause = failed.__cause__
            seen.notes.append(
                f"it raised after {seen.steps:,} random steps ({type(cause).__name__}: {cause}): the check stops "
                "there; a run's collectors rebuild an environment that raises (collector.max_restarts)"
            )
        finally:
            env.close()
    if problem:
        seen.problem = f"its {where} returned {problem}"
    return seen


def reward_problem(reward: Any) -> str:
    """What is wrong with ``reward`` ("" when nothing): not a number, not finite, or beyond float32's
    range (what a reward is stored in: it would become an infinity)."""
    try:
        value = float(reward)
    except (TypeError, ValueError):
        return f"a reward of {reward!r:.50}, not a number"
    if not np.isfinite(value):
        return f"a reward of {value}"
    if abs(value) > FLOAT32_MAX:
        return f"a reward of {value:g}, beyond float32's range ({FLOAT32_MAX:.3g}), which trajrl stores rewards in"
    return ""


def note_cast(seen: FirstSteps, space: gym.Space, obs: Any) -> None:
    """A note, once, that ``obs`` of a Box comes in another (castable) dtype than declared."""
    if isinstance(space, gym.spaces.Box) and isinstance(obs, np.ndarray) and obs.dtype != space.dtype:
        note = f"observations come as {obs.dtype}, declared {np.dtype(space.dtype).name}: trajrl casts them"
        if note not in seen.notes:
            seen.notes.append(note)


def an_observation_problem(space: gym.Space, obs: Any) -> str:
    """``observation_problem`` as a phrase: "an observation of shape (5,) ..." ("" when nothing)."""
    problem = observation_problem(space, obs)
    return f"an observation {problem}" if problem else ""


def observation_problem(space: gym.Space, obs: Any, key: str = "") -> str:
    """What is wrong with ``obs`` as an observation of ``space`` ("" when nothing): another shape,
    a dtype that cannot be cast to the declared one (a float64 observation of a float32 space can:
    trajrl casts it), a value that is not finite, a missing key; ``key``: where in a Dict or Tuple."""
    at = f" at {key}" if key else ""
    if isinstance(space, gym.spaces.Dict):
        if not isinstance(obs, dict):
            return f"of type {type(obs).__name__}{at} where the space declares a Dict of {sorted(space.spaces)}"
        missing = sorted(set(space.spaces) - set(obs))
        if missing:
            return f"without the keys {missing}{at} its Dict space declares"
        return next((p for k, s in space.spaces.items() if (p := observation_problem(s, obs[k], f"{key}[{k!r}]"))), "")
    if isinstance(space, gym.spaces.Tuple):
        if not isinstance(obs, (tuple, list)) or len(obs) != len(space.spaces):
            return f"of type {type(obs).__name__}{at} where the space declares a Tuple of {len(space.spaces)}"
        return next((p for i, s in enumerate(space.spaces) if (p := observation_problem(s, obs[i], f"{key}[{i}]"))), "")
    if not isinstance(space, (gym.spaces.Box, gym.spaces.Discrete, gym.spaces.MultiDiscrete, gym.spaces.MultiBinary)):
        return ""  # a space trajrl refuses by its kind (trajrl.envs.spaces.parts_of), not by what it returns
    return array_problem(space, obs, at)


def array_problem(space: gym.Space, obs: Any, at: str) -> str:
    """``observation_problem`` for a space of one array (Box, Discrete, MultiDiscrete, MultiBinary)."""
    try:
        array = np.asarray(obs)
    except Exception:  # noqa: BLE001 (anything numpy cannot read is the answer)
        array = np.asarray(None, dtype=object)
    declared = f"{space.shape} {np.dtype(space.dtype).name}"
    if array.dtype.kind not in "biuf":
        return f"of dtype {array.dtype}{at}, not numbers ({obs!r:.50}); the space declares {declared}"
    if array.shape != space.shape:
        return f"of shape {array.shape}{at}; the space declares {declared}"
    if not np.can_cast(array.dtype, space.dtype, casting="same_kind"):
        return f"of dtype {array.dtype}{at}, which trajrl cannot cast to the declared {declared}"
    if not isinstance(space, gym.spaces.Box) and not space.contains(array.astype(space.dtype)):
        return f"{array.tolist()}{at}, outside its space {space}"
    if array.dtype.kind == "f" and not np.isfinite(array).all():
        bad = array.reshape(-1)[~np.isfinite(array.reshape(-1))][0]
        index = int(np.flatnonzero(~np.isfinite(array.reshape(-1)))[0])
        return f"holding {bad} (entry {index}){at}"
    return ""


def check_first_steps(
    env_cfg: Any,
    steps: int = CHECKED_STEPS,
    seed: int = 0,
    timeout_s: float | None = None,
    refuse: bool = True,
    in_check_env: bool = False,
) -> FirstSteps:
    """What ``steps`` random steps of ``env_cfg``'s environment showed (``first_steps``; played once per
    environment setting and process); ``ConfigError`` on ``env.id`` naming the first step whose
    observation or reward misbehaves (unless not ``refuse``: ``collector.bad_steps=drop`` drops such
    episodes; ``in_check_env``: without the advice to run ``trajrl check-env``), ``EnvironmentFailed``
    where a call raises or outlasts ``timeout_s``."""
    kwargs = json.dumps(dict(env_cfg.kwargs or {}), sort_keys=True, default=str)
    seen = _first_steps(str(env_cfg.id), kwargs, steps, seed, timeout_s)
    if seen.problem and refuse:
        raise ConfigError(
            "env.id",
            str(env_cfg.id),
            f"{seen.problem} (random actions, reset seed {seed}); trajrl takes finite rewards and finite "
            "observations of the declared shape and dtype: fix the environment or its declared space"
            + ("" if in_check_env else " (trajrl check-env <overrides> plays more steps and says what it sees)")
            + "; collector.bad_steps=drop drops such episodes instead",
        )
    return seen


@functools.lru_cache(maxsize=32)
def _first_steps(env_id: str, kwargs_json: str, steps: int, seed: int, timeout_s: float | None) -> FirstSteps:
    return first_steps(env_id, json.loads(kwargs_json), steps, seed, timeout_s)


class CheckedSteps(gym.Wrapper):
    """A collector's environment whose every observation (reset's too) and reward is checked as
    ``first_steps`` checks them: the first that misbehaves raises ``BadStep`` naming the environment,
    the step of its episode, how many steps it had taken, and what it returned."""

    def __init__(self, env: gym.Env, env_id: str):
        super().__init__(env)
        self.env_id, self.t, self.steps = env_id, 0, 0
        space = self.observation_space  # a float Box: what passes is told on the fast path (``problem``)
        floats = isinstance(space, gym.spaces.Box) and np.dtype(space.dtype).kind == "f"
        self.box = (space.shape, np.dtype(space.dtype)) if floats else None

    def problem(self, obs: Any, reward: Any = 0.0) -> str:
        """What is wrong with a step's ``obs`` and ``reward`` ("" when nothing)."""
        if (
            self.box is not None
            and type(obs) is np.ndarray
            and obs.shape == self.box[0]
            and obs.dtype == self.box[1]
            and type(reward) in (float, int, np.float32, np.float64)
            and abs(reward) <= FLOAT32_MAX  # NaN is not
            and math.isfinite(obs.sum())  # a sum that overflows goes the slow, exact way
        ):
            return ""
        return reward_problem(reward) or an_observation_problem(self.observation_space, obs)

    def bad(self, where: str, problem: str) -> BadStep:
        what = f"env.id={self.env_id}: its {where} (step {self.steps:,} of the environment in all) returned {problem}"
        error = BadStep(
            f"{what}; trajrl stores finite rewards and finite observations of the declared shape and dtype: fix "
            "the environment, or collector.bad_steps=drop drops such episodes and counts them"
        )
        error.what = what
        return error

    def reset(self, **kwargs):
        obs, info = self.env.reset(**kwargs)
        self.t = 0
        if problem := self.problem(obs):
            raise self.bad("reset", problem)
        return obs, info

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        self.t, self.steps = self.t + 1, self.steps + 1
        if problem := self.problem(obs, reward):
            raise self.bad(f"step {self.t} of an episode", problem)
        return obs, reward, terminated, truncated, info
