"""KnownLengths-v0: episodes of lengths the test chooses (``env.import_module=known_envs``)."""

import gymnasium as gym
import numpy as np


class KnownLengths(gym.Env):
    """Reward 1 per step; episode k (counted per environment) lasts lengths[k % len(lengths)] steps."""

    observation_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def __init__(self, lengths=(5,)):
        self.lengths, self.finished, self.t = list(lengths), 0, 0

    def _obs(self):
        return np.array([self.t / 10.0, 0.0], dtype=np.float32)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return self._obs(), {}

    def step(self, action):
        self.t += 1
        terminated = self.t >= self.lengths[self.finished % len(self.lengths)]
        if terminated:
            self.finished += 1
        return self._obs(), 1.0, terminated, False, {}


gym.register("KnownLengths-v0", entry_point=KnownLengths)
