"""``ClockCartPole-v0``: CartPole-v1 whose observation carries, as a fifth number, the
moment of the step (``time.monotonic()`` modulo 1,000 s, the same clock in every process
of this machine): ``scripts/bench_pipeline.py`` reads it from stored steps to measure
the delay from a step happening to it being sampleable."""

import time

import gymnasium as gym
import numpy as np
from gymnasium.envs.classic_control import CartPoleEnv

PERIOD_S = 1000.0


class ClockCartPole(CartPoleEnv):
    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        high = np.append(self.observation_space.high, PERIOD_S).astype(np.float32)
        self.observation_space = gym.spaces.Box(-high, high, dtype=np.float32)

    def _stamped(self, observation):
        return np.append(observation, time.monotonic() % PERIOD_S).astype(np.float32)

    def reset(self, **kwargs):
        observation, info = super().reset(**kwargs)
        return self._stamped(observation), info

    def step(self, action):
        observation, reward, terminated, truncated, info = super().step(action)
        return self._stamped(observation), reward, terminated, truncated, info


gym.register("ClockCartPole-v0", entry_point=ClockCartPole, max_episode_steps=500)
