"""Test environments whose actions are of every kind gymnasium has: ``import action_envs``
registers them (the CLI imports it with ``env.import_module=action_envs``)."""

import gymnasium as gym
import numpy as np


class Match(gym.Env):
    """Each step shows a random target action (one-hot codes, or bits) and pays the share of the
    action's parts that match it: a random policy earns ``1 / categories`` a step (1/2 for bits),
    a policy that reads the target 1. Episodes last ``length`` steps. ``remember``: the target
    is shown one step before it is paid for (the observation is the next step's target), so
    only a policy with memory matches it."""

    def __init__(self, action_space: gym.Space, length: int = 10, remember: bool = False):
        self.action_space, self.length, self.remember = action_space, length, remember
        self.categories = (
            [int(n) for n in action_space.nvec]
            if isinstance(action_space, gym.spaces.MultiDiscrete)
            else [2] * int(action_space.n)
        )
        self.observation_space = gym.spaces.Box(0.0, 1.0, (sum(self.categories),), np.float32)

    def _target(self):
        return np.array([self.np_random.integers(n) for n in self.categories])

    def _obs(self, target):
        codes = [np.eye(n, dtype=np.float32)[t] for n, t in zip(self.categories, target)]
        return np.concatenate(codes)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t, self.target, self.shown = 0, self._target(), self._target()
        return self._obs(self.shown if self.remember else self.target), {}

    def step(self, action):
        reward = float(np.mean(np.asarray(action).reshape(-1).astype(np.int64) == self.target))
        self.t += 1
        self.target, self.shown = (self.shown, self._target()) if self.remember else (self._target(), None)
        obs = self._obs(self.shown if self.remember else self.target)
        return obs, reward, False, self.t >= self.length, {}


class Unsupported(Match):
    """Actions no algorithm takes (a Dict or a Tuple of them)."""

    def __init__(self, kind: str = "dict"):
        super().__init__(gym.spaces.MultiBinary(2))
        parts = {"move": gym.spaces.Discrete(3), "push": gym.spaces.Box(-1.0, 1.0, (1,), np.float32)}
        self.action_space = gym.spaces.Dict(parts) if kind == "dict" else gym.spaces.Tuple(parts.values())


gym.register(
    "MatchMultiDiscrete-v0",
    entry_point=Match,
    max_episode_steps=10,
    kwargs={"action_space": gym.spaces.MultiDiscrete([3, 4, 2])},
)
gym.register(
    "MatchMultiBinary-v0", entry_point=Match, max_episode_steps=10, kwargs={"action_space": gym.spaces.MultiBinary(4)}
)
gym.register("DictActions-v0", entry_point=Unsupported, max_episode_steps=10, kwargs={"kind": "dict"})
gym.register("TupleActions-v0", entry_point=Unsupported, max_episode_steps=10, kwargs={"kind": "tuple"})
