"""Partially observable environments trajrl registers with gymnasium."""
from __future__ import annotations

import gymnasium as gym
import numpy as np


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
