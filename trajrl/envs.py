"""The environments: partially observable ones trajrl registers with gymnasium, and
the checks of an environment setting (gymnasium only: no torch is loaded)."""
from __future__ import annotations

import contextlib
import difflib
import functools
import importlib
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any, Iterator

import gymnasium as gym
import numpy as np

from trajrl.errors import ConfigError, EnvironmentFailed
from trajrl.settings import ACTIONS
from trajrl.training.interrupts import raise_after


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


def register() -> None:
    """Register trajrl's environment ids (idempotent)."""
    for env_id, entry_point in (
        ("trajrl/CartPoleNoVel-v1", make_cartpole_novel),
        ("trajrl/PendulumNoVel-v1", make_pendulum_novel),
    ):
        if env_id not in gym.registry:
            gym.register(env_id, entry_point=entry_point, disable_env_checker=True)


register()


def import_env_module(module: str | None) -> None:
    """Import the user's module that registers third-party ids (``env.import_module``)."""
    if module:
        try:
            importlib.import_module(module)
        except ImportError as err:
            raise ConfigError("env.import_module", module, f"cannot be imported ({err}); install it or fix the name") from None


def check_env_id(env_id: str, module: str | None) -> None:
    """Refuse an id gymnasium does not know, listing close ones."""
    import_env_module(module)
    if env_id not in gym.registry:
        close = difflib.get_close_matches(env_id, list(gym.registry), n=5, cutoff=0.5)
        hint = f"did you mean {', '.join(close)}?" if close else "no close match"
        raise ConfigError(
            "env.id", env_id,
            f"is not a registered gymnasium id ({hint}); for a third-party package set env.import_module=<package>",
        )


@contextlib.contextmanager
def stepping(env_id: str, doing: str, timeout_s: float | None = None) -> Iterator[None]:
    """Turn an exception the environment raises while ``doing`` into one that names it;
    with ``timeout_s`` (``loop.stall_timeout_s``), a call that has not returned by then also fails."""
    def stuck() -> EnvironmentFailed:
        return EnvironmentFailed(f"the environment env.id={env_id} did not answer for {timeout_s:g} s while {doing} "
                                 f"(loop.stall_timeout_s={timeout_s:g}): it is stuck, or slower than that; "
                                 "raise loop.stall_timeout_s if it is only slow")

    try:
        with raise_after(timeout_s, stuck) if timeout_s else contextlib.nullcontext():
            yield
    except EnvironmentFailed:
        raise
    except Exception as err:
        raise EnvironmentFailed(f"the environment env.id={env_id} raised while {doing}: "
                                f"{type(err).__name__}: {err}") from err


#: How a vector of environments steps: all in this process, or one process each.
VECTORIZATION = ("sync", "async")


def make_gym(env_id: str, kwargs: dict[str, Any], import_module: str | None = None) -> gym.Env:
    """One gymnasium environment (picklable by reference: async vector envs make
    theirs in subprocesses, where trajrl's ids and the user's module must be registered)."""
    import_env_module(import_module)
    return gym.make(env_id, **kwargs)


def make_vector(env_id: str, kwargs: dict[str, Any], import_module: str | None, num_envs: int,
                vectorization: str = "sync") -> gym.vector.VectorEnv:
    """``num_envs`` copies stepped together by gymnasium, each reset in the step that
    ends its episode (same-step autoreset: the episode's last observation stays in
    the step's results, the next episode's first one arrives with them)."""
    fns = [functools.partial(make_gym, env_id, dict(kwargs), import_module)] * num_envs
    vector_class = gym.vector.SyncVectorEnv if vectorization == "sync" else gym.vector.AsyncVectorEnv
    return vector_class(fns, autoreset_mode=gym.vector.AutoresetMode.SAME_STEP)




@dataclass(frozen=True)
class EnvSpaces:
    observations: int   # size of the flat observation
    actions: int        # number of discrete actions, or size of the continuous action
    step_limit: int     # most steps an episode can last (gymnasium's TimeLimit; 1000 when it has none)


def env_spaces(env_cfg: Any, algo: str | None = None) -> EnvSpaces:
    """The sizes and step limit of ``env_cfg``'s environment, from one made instance
    (once per environment setting and process); refuses an unknown id, an observation
    that is not a flat Box, and actions ``algo`` cannot take."""
    import json

    kwargs = json.dumps(dict(env_cfg.kwargs or {}), sort_keys=True, default=str)
    return _env_spaces(str(env_cfg.id), kwargs, env_cfg.get("import_module"), algo)


@functools.lru_cache(maxsize=32)
def _env_spaces(env_id: str, kwargs_json: str, import_module: str | None, algo: str | None) -> EnvSpaces:
    import json

    env_cfg = SimpleNamespace(id=env_id, kwargs=json.loads(kwargs_json), import_module=import_module)
    check_env_id(env_cfg.id, import_module)
    try:
        env = gym.make(env_cfg.id, **dict(env_cfg.kwargs or {}))
    except TypeError as err:  # an unknown keyword of the environment
        raise ConfigError("env.kwargs", dict(env_cfg.kwargs or {}), f"{env_cfg.id} refuses them: {str(err).split(' was raised')[0]}") from None
    try:
        obs_space, act_space = env.observation_space, env.action_space
        discrete = isinstance(act_space, gym.spaces.Discrete)
        continuous = isinstance(act_space, gym.spaces.Box) and len(act_space.shape) == 1
        needs = ACTIONS.get(algo)
        if (needs == "discrete" and not discrete) or (needs == "continuous" and not continuous):
            other = "algo=rsac" if needs == "discrete" else "algo=r2d2 or algo=ppo"
            raise ConfigError("env.id", env_cfg.id,
                              f"algo={algo} needs {needs} actions; this one has {act_space} (try {other})")
        if not (isinstance(obs_space, gym.spaces.Box) and len(obs_space.shape) == 1):
            raise ConfigError("env.id", env_cfg.id, f"needs a flat Box observation; this one has {obs_space}")
        limit = env.spec.max_episode_steps if env.spec and env.spec.max_episode_steps else 1000
        size = int(act_space.n) if discrete else int(act_space.shape[0])
        return EnvSpaces(int(obs_space.shape[0]), size, int(limit))
    finally:
        env.close()
