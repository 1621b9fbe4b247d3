"""trajrl's CartPole without velocities (``trajrl/CartPoleNoVel-v1``) in gymnasium alone: the same
id and the same observations, for the tests that deploy an exported agent in a process where trajrl
is not imported (``import novel_envs`` registers it)."""

import gymnasium as gym
import numpy as np


class Positions(gym.ObservationWrapper):
    """CartPole observing the cart's position and the pole's angle only."""

    def __init__(self, env: gym.Env):
        super().__init__(env)
        box = env.observation_space
        self.observation_space = gym.spaces.Box(box.low[[0, 2]], box.high[[0, 2]], dtype=box.dtype)

    def observation(self, observation: np.ndarray) -> np.ndarray:
        return observation[[0, 2]]


def cartpole_novel(**kwargs) -> gym.Env:
    return Positions(gym.make("CartPole-v1", **kwargs))


if "trajrl/CartPoleNoVel-v1" not in gym.registry:
    gym.register("trajrl/CartPoleNoVel-v1", entry_point=cartpole_novel, disable_env_checker=True)
