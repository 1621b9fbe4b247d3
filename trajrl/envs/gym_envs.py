"""The environments: partially observable ones trajrl registers with gymnasium, and
the checks of an environment setting (gymnasium only: no torch is loaded)."""

from __future__ import annotations

import contextlib
import difflib
import functools
import importlib
import operator
import os
import warnings
from collections import OrderedDict
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import numpy as np

from trajrl.base.errors import ConfigError, EnvironmentFailed
from trajrl.base.signals import raise_after
from trajrl.envs import tasks
from trajrl.envs.spaces import (
    CONTINUOUS,
    DISCRETE,
    GOAL_KEYS,
    MULTI_BINARY,
    MULTI_DISCRETE,
    GoalLayout,
    Part,
    action_kind,
    action_parts,
    action_size,
    flat_observations,
    goal_layout,
    is_image,
    parts_of,
)


class HideObservation(gym.ObservationWrapper):
    """Keep only some entries of a flat Box observation (the rest are hidden)."""

    def __init__(self, env: gym.Env, keep: list[int]):
        super().__init__(env)
        self.keep = np.asarray(keep)
        box = env.observation_space
        self.observation_space = gym.spaces.Box(box.low[self.keep], box.high[self.keep], dtype=box.dtype)

    def observation(self, observation: np.ndarray) -> np.ndarray:
        return observation[self.keep]


def make_cartpole_novel(**kwargs) -> gym.Env:
    """CartPole-v1 observing cart position and pole angle only (velocities hidden)."""
    return HideObservation(gym.make("CartPole-v1", **kwargs), keep=[0, 2])


def make_pendulum_novel(**kwargs) -> gym.Env:
    """Pendulum-v1 observing cos and sin of the angle only (angular velocity hidden)."""
    return HideObservation(gym.make("Pendulum-v1", **kwargs), keep=[0, 1])


class CueMemory(gym.Env):
    """A task that only memory solves: one of ``cues`` cues is shown at the first step
    only; ``length - 1`` steps later, at the last step, the action must name it.

    Observations: the cue one-hot at step 0 (zeros after it) and a bit set at the last
    step (when to answer). Reward at the last step only: +1 for the right answer, -1
    otherwise (0 in expectation for a policy without memory). With ``continuous``, two
    cues and one action in [-1, 1]: the answer is its sign, the reward ``cue * action``.
    """

    metadata = {"render_modes": []}

    def __init__(self, length: int = 60, cues: int = 2, continuous: bool = False):
        if length < 2 or cues < 2 or (continuous and cues != 2):
            raise ValueError(
                f"CueMemory needs length >= 2 and cues >= 2 (exactly 2 when continuous); "
                f"got length={length}, cues={cues}, continuous={continuous}"
            )
        self.length, self.cues, self.continuous = length, cues, continuous
        self.observation_space = gym.spaces.Box(0.0, 1.0, (cues + 1,), dtype=np.float32)
        self.action_space = (
            gym.spaces.Box(-1.0, 1.0, (1,), dtype=np.float32) if continuous else gym.spaces.Discrete(cues)
        )
        self.cue, self.t = 0, 0

    def _observation(self) -> np.ndarray:
        obs = np.zeros(self.cues + 1, dtype=np.float32)
        if self.t == 0:
            obs[self.cue] = 1.0
        obs[-1] = float(self.t == self.length - 1)
        return obs

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        self.cue, self.t = int(self.np_random.integers(self.cues)), 0
        return self._observation(), {}

    def step(self, action):
        last = self.t == self.length - 1
        reward = 0.0
        if last and self.continuous:
            reward = float(np.clip(np.asarray(action, dtype=np.float32).reshape(-1)[0], -1, 1)) * (
                1 if self.cue else -1
            )
        elif last:
            reward = 1.0 if int(action) == self.cue else -1.0
        self.t += 1
        return self._observation(), reward, last, False, {}


class BitFlipping(gym.Env):
    """The bit-flipping task of Hindsight Experience Replay (Andrychowicz et al., 2017),
    in gymnasium's goal convention: ``n`` bits start at random, the goal is ``n`` other
    random bits; an action flips one bit (actions ``0 .. n-1``) or, action ``n``, leaves
    them as they are. Reward 0 at each step that leaves the bits at the goal, -1
    otherwise (``compute_reward``); an episode lasts ``n`` steps (truncated, never
    terminated: a relabelled goal changes rewards only, never where episodes end);
    ``info["is_success"]``: the bits are at the goal.

    Observations: a ``Dict`` of ``observation`` and ``achieved_goal`` (both the bits) and
    ``desired_goal``. ``goal_first_step_only``: the goal is shown at the first step only
    (zeros after it): a policy must remember it.
    """

    metadata = {"render_modes": []}

    def __init__(self, n: int = 15, goal_first_step_only: bool = False):
        if n < 1:
            raise ValueError(f"BitFlipping needs n >= 1 bits, got n={n}")
        self.n, self.goal_first_step_only = n, goal_first_step_only
        bits = gym.spaces.MultiBinary(n)
        self.observation_space = gym.spaces.Dict(observation=bits, achieved_goal=bits, desired_goal=bits)
        self.action_space = gym.spaces.Discrete(n + 1)
        self.bits = self.goal = np.zeros(n, dtype=np.int8)
        self.t = 0

    def _observation(self) -> dict[str, np.ndarray]:
        shown = self.goal if self.t == 0 or not self.goal_first_step_only else np.zeros_like(self.goal)
        return {"observation": self.bits.copy(), "achieved_goal": self.bits.copy(), "desired_goal": shown.copy()}

    def compute_reward(self, achieved_goal, desired_goal, info) -> np.ndarray:
        """0 where the achieved goal is the desired one, -1 elsewhere (batched: ``[..., n]``)."""
        return np.where((np.asarray(achieved_goal) != np.asarray(desired_goal)).any(-1), -1.0, 0.0).astype(np.float32)

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        self.bits = self.np_random.integers(0, 2, self.n).astype(np.int8)
        self.goal = self.np_random.integers(0, 2, self.n).astype(np.int8)
        self.t = 0
        return self._observation(), {"is_success": np.float32((self.bits == self.goal).all())}

    def step(self, action):
        action = int(action)
        if action < self.n:
            self.bits[action] ^= 1
        self.t += 1
        reward = float(self.compute_reward(self.bits, self.goal, None))
        return self._observation(), reward, False, self.t >= self.n, {"is_success": np.float32(reward == 0.0)}


class PointReach(gym.Env):
    """A continuous goal task: a point in the square ``[-1, 1]^2`` moved by actions in
    ``[-1, 1]^2`` scaled by ``speed``; the goal another random point. Reward 0 at each step
    that ends within ``radius`` of the goal, -1 otherwise (``compute_reward``); an episode
    lasts ``length`` steps (truncated, never terminated); ``info["is_success"]``: within
    ``radius`` of the goal. Observations: ``observation`` and ``achieved_goal`` (both the
    point), ``desired_goal``."""

    metadata = {"render_modes": []}

    def __init__(self, length: int = 25, speed: float = 0.15, radius: float = 0.1):
        if length < 1 or speed <= 0 or radius <= 0:
            raise ValueError(
                f"PointReach needs length >= 1, speed > 0 and radius > 0; got length={length}, "
                f"speed={speed}, radius={radius}"
            )
        self.length, self.speed, self.radius = length, speed, radius
        square = gym.spaces.Box(-1.0, 1.0, (2,), dtype=np.float32)
        self.observation_space = gym.spaces.Dict(observation=square, achieved_goal=square, desired_goal=square)
        self.action_space = gym.spaces.Box(-1.0, 1.0, (2,), dtype=np.float32)
        self.point = self.goal = np.zeros(2, dtype=np.float32)
        self.t = 0

    def _observation(self) -> dict[str, np.ndarray]:
        return {"observation": self.point.copy(), "achieved_goal": self.point.copy(), "desired_goal": self.goal.copy()}

    def compute_reward(self, achieved_goal, desired_goal, info) -> np.ndarray:
        """0 within ``radius`` of the goal, -1 elsewhere (batched: ``[..., 2]``)."""
        distance = np.linalg.norm(np.asarray(achieved_goal) - np.asarray(desired_goal), axis=-1)
        return np.where(distance < self.radius, 0.0, -1.0).astype(np.float32)

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        self.point = self.np_random.uniform(-1, 1, 2).astype(np.float32)
        self.goal = self.np_random.uniform(-1, 1, 2).astype(np.float32)
        self.t = 0
        return self._observation(), {"is_success": np.float32(self.compute_reward(self.point, self.goal, None) == 0)}

    def step(self, action):
        move = np.clip(np.asarray(action, dtype=np.float32).reshape(2), -1, 1) * self.speed
        self.point = np.clip(self.point + move, -1, 1).astype(np.float32)
        self.t += 1
        reward = float(self.compute_reward(self.point, self.goal, None))
        return self._observation(), reward, False, self.t >= self.length, {"is_success": np.float32(reward == 0.0)}


class ExtraInputs(gym.Wrapper):
    """Observes, beside the observation, the time since its episode began (``time_scales``: ``tanh(t / s)``
    for each scale ``s`` after ``t`` steps, so 0 at the first step and bounded in [0, 1)), the action
    taken at the step before (``action``: gymnasium's flat form of it, one-hot for discrete actions)
    and its reward (``reward``), both zero at an episode's first step: a ``Dict`` with them added in
    that order (the observation's own keys kept), as POPGym's wrapper and Ni et al.'s recurrent agents
    take the previous action and reward, and as Pardo et al. (2018, "Time Limits in Reinforcement
    Learning") give an agent its episode's time."""

    def __init__(self, env: gym.Env, action: bool = True, reward: bool = False, time_scales: tuple[float, ...] = ()):
        super().__init__(env)
        self.action, self.reward = action, reward
        self.time_scales = np.asarray(time_scales, np.float64)
        self.t = 0
        space = env.observation_space
        # In the observation's own key order, the added keys last: its parts keep their place in the flat form.
        parts = OrderedDict(space.spaces if isinstance(space, gym.spaces.Dict) else {"observation": space})
        for key, setting, wanted in (
            ("time", "env.observe_time", len(time_scales)),
            ("previous_action", "env.previous_action", action),
            ("previous_reward", "env.previous_reward", reward),
        ):
            if wanted and key in parts:
                raise ConfigError(
                    setting, True, f"would add the key {key!r}, which the environment's Dict observation has already"
                )
        if len(time_scales):
            parts["time"] = gym.spaces.Box(0, 1, (len(time_scales),), np.float32)
        taken = gym.spaces.flatten_space(env.action_space)
        if action:
            parts["previous_action"] = gym.spaces.Box(
                taken.low.astype(np.float32), taken.high.astype(np.float32), dtype=np.float32
            )
        if reward:
            parts["previous_reward"] = gym.spaces.Box(-np.inf, np.inf, (1,), dtype=np.float32)
        self.observation_space = gym.spaces.Dict(parts)
        self.wraps_dict = isinstance(space, gym.spaces.Dict)

    def _observe(self, obs: Any, action: Any, reward: float) -> dict:
        out = OrderedDict(obs) if self.wraps_dict else OrderedDict(observation=obs)
        if len(self.time_scales):
            out["time"] = np.tanh(self.t / self.time_scales).astype(np.float32)
        if self.action:
            box = self.observation_space["previous_action"]
            out["previous_action"] = (
                np.zeros(box.shape, np.float32)
                if action is None
                else np.clip(gym.spaces.flatten(self.env.action_space, action).astype(np.float32), box.low, box.high)
            )
        if self.reward:
            out["previous_reward"] = np.array([reward], np.float32)
        return out

    def reset(self, **kwargs):
        obs, info = self.env.reset(**kwargs)
        self.t = 0
        return self._observe(obs, None, 0.0), info

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        self.t += 1
        return self._observe(obs, action, float(reward)), reward, terminated, truncated, info


def with_extras(
    env: gym.Env, action: bool = False, reward: bool = False, time_scales: tuple[float, ...] = ()
) -> gym.Env:
    """``env`` observing its episode's time, its previous action and its previous reward where asked
    (``env.observe_time``, ``env.previous_action``, ``env.previous_reward``), as it is otherwise."""
    return ExtraInputs(env, action, reward, tuple(time_scales)) if action or reward or len(time_scales) else env


def register() -> None:
    """Register trajrl's environment ids (idempotent)."""
    for env_id, entry_point, kwargs in (
        ("trajrl/CartPoleNoVel-v1", make_cartpole_novel, {}),
        ("trajrl/PendulumNoVel-v1", make_pendulum_novel, {}),
        ("trajrl/CueMemory-v0", CueMemory, {}),
        ("trajrl/BitFlipping-v0", BitFlipping, {}),
        ("trajrl/PointReach-v0", PointReach, {}),
        ("trajrl/PointMassNoVel-v0", tasks.PointMassNoVel, {}),
        ("trajrl/RepeatPrevious-v0", tasks.RepeatPrevious, {}),
        ("trajrl/RepeatPreviousHard-v0", tasks.RepeatPrevious, {"symbols": 8, "delay": 4}),  # the suite's recall task
        ("trajrl/RepeatPreviousPair-v0", tasks.RepeatPreviousPair, {}),
        ("trajrl/RecallSequence-v0", tasks.RecallSequence, {}),
        ("trajrl/RepeatFirst-v0", tasks.RepeatFirst, {}),
        ("trajrl/RunningSum-v0", tasks.RunningSum, {}),
    ):
        if env_id not in gym.registry:
            gym.register(env_id, entry_point=entry_point, kwargs=kwargs, disable_env_checker=True)


register()


def registering_module(env_id: str, import_module: str | None) -> str | None:
    """The module a process imports before ``gymnasium.make(env_id)``: the run's ``env.import_module``, or,
    for trajrl's own ids, this one (it imports gymnasium and numpy, not torch)."""
    return import_module or (__name__ if env_id.startswith("trajrl/") else None)


def make_refused_in_one_line(env_id: str, kwargs: dict[str, Any]) -> gym.Env:
    """``gymnasium.make(env_id, **kwargs)``; what the environment refuses as it is made is a ``ConfigError``
    naming the setting: an unknown keyword or a value it refuses (``env.kwargs``), a package it needs that
    is not installed (``env.id``, with gymnasium's own line: what to install)."""
    try:
        return gym.make(env_id, **kwargs)
    except (TypeError, ValueError) as err:
        raise ConfigError("env.kwargs", kwargs, f"{env_id} refuses them: {str(err).split(' was raised')[0]}") from None
    except gym.error.DependencyNotInstalled as err:
        raise ConfigError("env.id", env_id, f"needs a package that is not installed: {err}") from None


def import_env_module(module: str | None) -> None:
    """Import the user's module that registers third-party ids or memory cores (``env.import_module``)."""
    if module:
        try:
            importlib.import_module(module)
        except ImportError as err:
            raise ConfigError(
                "env.import_module", module, f"cannot be imported ({err}); install it or fix the name"
            ) from None


def check_env_id(env_id: str, module: str | None) -> None:
    """Refuse an id gymnasium does not know, listing close ones."""
    import_env_module(module)
    if env_id not in gym.registry:
        close = difflib.get_close_matches(env_id, list(gym.registry), n=5, cutoff=0.5)
        hint = f"did you mean {', '.join(close)}?" if close else "no close match"
        raise ConfigError(
            "env.id",
            env_id,
            f"is not a registered gymnasium id ({hint}); for a third-party package set env.import_module=<package>",
        )


@contextlib.contextmanager
def stepping(env_id: str, doing: str, timeout_s: float | None = None) -> Iterator[None]:
    """Turn an exception the environment raises while ``doing`` into one that names it;
    with ``timeout_s`` (``loop.stall_timeout_s``), a call that has not returned by then also fails."""

    def stuck() -> EnvironmentFailed:
        return EnvironmentFailed(
            f"the environment env.id={env_id} did not answer for {timeout_s:g} s while {doing} "
            f"(loop.stall_timeout_s={timeout_s:g}): it is stuck, or slower than that; "
            "raise loop.stall_timeout_s if it is only slow"
        )

    try:
        with raise_after(timeout_s, stuck) if timeout_s else contextlib.nullcontext():
            yield
    except EnvironmentFailed:
        raise
    except Exception as err:
        raise EnvironmentFailed(
            f"the environment env.id={env_id} raised while {doing}: {type(err).__name__}: {err}"
        ) from err


def make_gym(
    env_id: str,
    kwargs: dict[str, Any],
    import_module: str | None = None,
    previous_action: bool = False,
    previous_reward: bool = False,
    reward_scale: float = 1.0,
    time_scales: tuple[float, ...] = (),
) -> gym.Env:
    """One gymnasium environment observing one flat vector (``trajrl.envs.spaces``), its rewards
    multiplied by ``reward_scale`` (``env.reward_scale``), with its episode's time, its previous
    action and its previous reward where asked (``with_extras``); picklable by reference: async
    vector envs make theirs in subprocesses, where trajrl's ids and the user's module must be registered."""
    import_env_module(import_module)
    env = gym.make(env_id, **kwargs)
    if reward_scale != 1:
        env = gym.wrappers.TransformReward(env, functools.partial(operator.mul, float(reward_scale)))
    return flat_observations(with_extras(env, previous_action, previous_reward, time_scales))


def gym_options(env_cfg: Any, timeout_s: float | None = None) -> dict[str, Any]:
    """``env.previous_action``, ``env.previous_reward``, ``env.reward_scale`` and the scales of the
    episode's time (``env.time_scales`` where ``env.observe_time``, else none) as ``make_gym``'s
    keyword arguments. ``timeout_s``: ``ends_by_clock``'s, where ``env.observe_time`` is still auto."""
    observe_time = env_cfg.get("observe_time", False)
    observe_time = ends_by_clock(env_cfg, timeout_s) if observe_time == "auto" else bool(observe_time)
    return {
        "previous_action": bool(env_cfg.get("previous_action", False)),
        "previous_reward": bool(env_cfg.get("previous_reward", False)),
        "reward_scale": float(env_cfg.get("reward_scale", 1.0)),
        "time_scales": tuple(float(s) for s in env_cfg.get("time_scales", ())) if observe_time else (),
    }


#: ``env.observe_time=auto``: the random steps played to tell whether a task's episodes end by a clock.
CLOCK_PROBE_STEPS = 1_000


def ends_by_clock(env_cfg: Any, timeout_s: float | None = None) -> bool:
    """Whether ``env_cfg``'s episodes end by a clock that is part of the task (``env.observe_time=auto``
    observes it there): under uniformly random actions (``CLOCK_PROBE_STEPS`` steps, seed 0) at least
    two episodes end, each terminated at one same length. An episode cut by a time limit (truncated)
    says no: its targets bootstrap at the cut, and the agent needs no clock (Pardo et al., 2018).
    ``timeout_s`` (``loop.stall_timeout_s``): an environment call that has not returned by then fails; an
    environment that raises meanwhile says no (its faults are the collectors' to handle, as configured)."""
    import json

    kwargs = json.dumps(dict(env_cfg.kwargs or {}), sort_keys=True, default=str)
    return _ends_by_clock(str(env_cfg.id), kwargs, env_cfg.get("import_module"), timeout_s)


@functools.lru_cache(maxsize=32)
def _ends_by_clock(env_id: str, kwargs_json: str, import_module: str | None, timeout_s: float | None) -> bool:
    import json

    import_env_module(import_module)
    env = gym.make(env_id, **json.loads(kwargs_json))
    lengths: list[int] = []
    t = 0
    try:
        env.action_space.seed(0)
        with stepping(env_id, f"trajrl played {CLOCK_PROBE_STEPS:,} random steps for env.observe_time=auto", timeout_s):
            try:
                env.reset(seed=0)
                for _ in range(CLOCK_PROBE_STEPS):
                    _, _, terminated, truncated, _ = env.step(env.action_space.sample())
                    t += 1
                    if truncated and not terminated:
                        return False
                    if terminated:
                        lengths.append(t)
                        t = 0
                        env.reset()
            except EnvironmentFailed:  # stuck past timeout_s: the run ends
                raise
            except Exception:  # an environment that raises at times tells no clock; its faults are collection's
                return False
    finally:
        env.close()
    return len(lengths) >= 2 and len(set(lengths)) == 1


def make_vector(make: Callable[[], gym.Env], num_envs: int, vectorization: str = "sync") -> gym.vector.VectorEnv:
    """``num_envs`` environments made by ``make`` (picklable: async vector envs call it
    in subprocesses), stepped together by gymnasium, each reset in the step that
    ends its episode (same-step autoreset: the episode's last observation stays in
    the step's results, the next episode's first one arrives with them)."""
    fns = [make] * num_envs
    if vectorization != "sync":
        worker_errors_said_once()
    vector_class = gym.vector.SyncVectorEnv if vectorization == "sync" else gym.vector.AsyncVectorEnv
    return vector_class(fns, autoreset_mode=gym.vector.AutoresetMode.SAME_STEP)


def worker_errors_said_once() -> None:
    """An async vector env's worker that raises: gymnasium logs its traceback as warnings (red ``ERROR:``
    lines) before raising the error again in the process that steps it, where trajrl says it in its one
    line; those warnings are not shown (with ``TRAJRL_FULL_ERROR=1``, the CLI's ``HYDRA_FULL_ERROR=1``, they are)."""
    if os.environ.get("TRAJRL_FULL_ERROR") == "1":
        return
    warnings.filterwarnings(
        "ignore", message=r"\x1b\[31mERROR: ", category=UserWarning, module=r"gymnasium\.vector\.async_vector_env"
    )


@dataclass(frozen=True)
class EnvSpaces:
    observations: int  # size of the flat observation (trajrl.envs.spaces)
    parts: tuple[Part, ...]  # what each stretch of it is
    actions: int  # number of discrete actions, size of a continuous or MultiBinary action, or the
    # categories of a MultiDiscrete one altogether (trajrl.envs.spaces.action_size)
    action_kind: str | None  # DISCRETE, CONTINUOUS, MULTI_DISCRETE or MULTI_BINARY (None: a space of no kind)
    step_limit: int  # most steps an episode can last (gymnasium's TimeLimit; 1000 when it has none)
    goal: GoalLayout | None = None  # a goal environment's goals in the flat observation (trajrl.envs.spaces)
    goal_problem: str = ""  # why it is not a goal environment hindsight can relabel ("" when it is)
    action_parts: tuple[int, ...] = ()  # a MultiDiscrete action: the categories of each part
    bounded: bool = True  # a continuous action's every dimension has finite bounds
    action_space: str = ""  # the gymnasium space, in words
    observation_itemsize: int = 4  # bytes of each number of the flat observation (1: one uint8 image, else float32)


def env_spaces(env_cfg: Any, timeout_s: float | None = None) -> EnvSpaces:
    """The sizes and step limit of ``env_cfg``'s environment, from one made instance
    (once per environment setting and process); refuses an unknown id, an observation
    with no flat form (an action space of no kind trajrl knows: ``action_kind`` None; the algorithm's
    refusal is the configuration's). ``timeout_s``: ``gym_options``'."""
    import json

    kwargs = json.dumps(dict(env_cfg.kwargs or {}), sort_keys=True, default=str)
    key = str(env_cfg.id), kwargs, env_cfg.get("import_module")
    previous = bool(env_cfg.get("previous_action", False)), bool(env_cfg.get("previous_reward", False))
    spaces = _env_spaces(*key, *previous)  # an unknown id, bad kwargs, actions refused: before any random step
    time_scales = gym_options(env_cfg, timeout_s)["time_scales"]
    return _env_spaces(*key, *previous, time_scales) if time_scales else spaces


@functools.lru_cache(maxsize=32)
def _env_spaces(
    env_id: str,
    kwargs_json: str,
    import_module: str | None,
    previous_action: bool = False,
    previous_reward: bool = False,
    time_scales: tuple[float, ...] = (),
) -> EnvSpaces:
    import json

    kwargs = json.loads(kwargs_json)
    check_env_id(env_id, import_module)
    env = make_refused_in_one_line(env_id, kwargs)
    try:
        obs_space, act_space = env.observation_space, env.action_space
        kind = action_kind(act_space)
        if kind is not None:  # the previous action's flat form needs a space gymnasium flattens
            env = with_extras(env, previous_action, previous_reward, time_scales)
            obs_space = env.observation_space
        try:
            parts = parts_of(obs_space)
        except ValueError as err:
            raise ConfigError("env.id", env_id, f"observes {err}") from None
        limit = env.spec.max_episode_steps if env.spec and env.spec.max_episode_steps else 1000
        goal, problem = goal_layout(obs_space), goal_problem(env)
        return EnvSpaces(
            gym.spaces.flatdim(obs_space),
            parts,
            0 if kind is None else action_size(act_space),
            kind,
            int(limit),
            goal,
            problem,
            action_parts(act_space),
            kind != CONTINUOUS or bool(np.isfinite(act_space.low).all() and np.isfinite(act_space.high).all()),
            str(act_space),
            1 if is_image(obs_space) else 4,  # what flat_observations keeps
        )
    finally:
        env.close()


def goal_problem(env: gym.Env) -> str:
    """Why hindsight cannot relabel ``env``'s episodes ("" when it can): it must observe a
    ``Dict`` with ``GOAL_KEYS`` and compute rewards for batches of goals
    (``compute_reward(achieved [n, g], desired [n, g], info)`` -> ``[n]``)."""
    space = env.observation_space
    keys = sorted(space.spaces) if isinstance(space, gym.spaces.Dict) else None
    if keys is None or not set(GOAL_KEYS) <= set(keys):
        return (
            f"observes {keys if keys is not None else type(space).__name__}, not a Dict with keys "
            f"{', '.join(GOAL_KEYS)} (gymnasium's goal convention)"
        )
    compute = getattr(env.unwrapped, "compute_reward", None)
    if not callable(compute):
        return "has no compute_reward(achieved_goal, desired_goal, info) to recompute rewards for a new goal"
    goals = np.stack([gym.spaces.flatten(space["achieved_goal"], space["achieved_goal"].sample()) for _ in range(2)])
    try:
        rewards = np.asarray(compute(goals, goals[::-1], {}))
    except Exception as err:  # noqa: BLE001 (any error of the user's function is the answer)
        return f"its compute_reward fails on a batch of 2 goals ({type(err).__name__}: {err})"
    if rewards.shape != (2,):
        return f"its compute_reward gives shape {rewards.shape} for a batch of 2 goals, not (2,)"
    return ""


#: How each kind of actions reads in a message.
ACTION_SPACES = {
    DISCRETE: "Discrete",
    CONTINUOUS: "continuous (a 1-D Box)",
    MULTI_DISCRETE: "MultiDiscrete (1-D)",
    MULTI_BINARY: "MultiBinary (1-D)",
}
