"""Environment factory: a picklable function that makes one TorchRL environment."""
from __future__ import annotations

import functools
import importlib
from typing import Any, Callable

import gymnasium as gym
from torchrl.envs import Compose, EnvBase, GymEnv, InitTracker, RewardSum, StepCounter, TransformedEnv

from trajrl.config import ConfigError


def import_env_module(module: str | None) -> None:
    """Import trajrl's own registrations and the user's module (third-party ids)."""
    import trajrl.envs  # noqa: F401  (registers trajrl/... ids)

    if module:
        try:
            importlib.import_module(module)
        except ImportError as err:
            raise ConfigError("env.import_module", module, f"cannot be imported ({err}); install it or fix the name") from None


def check_env_id(env_id: str, module: str | None) -> None:
    """Refuse an id gymnasium does not know, listing close ones."""
    import_env_module(module)
    if env_id not in gym.registry:
        import difflib

        close = difflib.get_close_matches(env_id, list(gym.registry), n=5, cutoff=0.5)
        hint = f"did you mean {', '.join(close)}?" if close else "no close match"
        raise ConfigError(
            "env.id", env_id,
            f"is not a registered gymnasium id ({hint}); for a third-party package set env.import_module=<package>",
        )


def make_env(env_id: str, kwargs: dict[str, Any], import_module: str | None = None, primer=None) -> EnvBase:
    """One environment with episode bookkeeping (and the recurrent-state primer, if given).

    ``InitTracker`` marks each episode's first step (``is_init``), which resets
    a recurrent policy's state; ``StepCounter`` and ``RewardSum`` give each step
    its position and the running return, so episode statistics can be read from
    stored steps.
    """
    import_env_module(import_module)
    env = GymEnv(env_id, categorical_action_encoding=True, **dict(kwargs))
    transforms = [InitTracker(), StepCounter(), RewardSum()]
    if primer is not None:
        transforms.append(primer.clone())
    return TransformedEnv(env, Compose(*transforms))


def env_factory(env_cfg, primer=None) -> Callable[[], EnvBase]:
    """A zero-argument, picklable environment factory (it crosses into worker processes)."""
    return functools.partial(
        make_env, str(env_cfg.id), dict(env_cfg.kwargs or {}), env_cfg.import_module, primer
    )
