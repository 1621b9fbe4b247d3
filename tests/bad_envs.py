"""Environments that fail as simulators do (``env.import_module=bad_envs``): Exploding-v0,
Hanging-v0 and FailsInTheLearner-v0 (``Faulty``), Flaky-v0 and Wide-v0. (Environments that
return what they should not: ``misbehaving_envs``.)"""

import multiprocessing
import os
import time

import gymnasium as gym
import numpy as np
from gymnasium.envs.classic_control import CartPoleEnv

from trajrl.envs.env_check import CHECKED_STEPS

_learner_steps = 0  # FailsInTheLearner-v0's: over every instance of the learner's process


class Faulty(CartPoleEnv):
    """CartPole that, after ``after`` steps, raises (Exploding-v0) or stops answering,
    as a simulator can (Hanging-v0); ``learner_only``: only in the learner's process, after
    ``after`` steps of all its instances (the config check's first steps, then its evaluation),
    never in a collector worker's (FailsInTheLearner-v0)."""

    def __init__(self, after=1000, hang=False, learner_only=False, **kwargs):
        super().__init__(**kwargs)
        self.after, self.hang, self.learner_only, self.steps_taken = after, hang, learner_only, 0

    def step(self, action):
        global _learner_steps
        self.steps_taken += 1
        if self.learner_only and not multiprocessing.parent_process():
            _learner_steps += 1
        taken = _learner_steps if self.learner_only else self.steps_taken
        if taken > self.after and not (self.learner_only and multiprocessing.parent_process()):
            if self.hang:
                time.sleep(3600)
            raise RuntimeError(f"boom: the environment failed after {self.after} steps")
        return super().step(action)


_steps = 0


class Flaky(CartPoleEnv):
    """CartPole whose step raises at every ``every``-th step of its process (counted
    over every instance: rebuilt ones too), writing a line to ``log`` each time."""

    def __init__(self, every=300, log=None, **kwargs):
        super().__init__(**kwargs)
        self.every, self.log = every, log

    def step(self, action):
        global _steps
        _steps += 1
        if _steps % self.every == 0:
            if self.log:
                with open(self.log, "a") as f:
                    print(os.getpid(), file=f)
            raise RuntimeError(f"flaky: step {_steps} of process {os.getpid()}")
        return super().step(action)


class Wide(CartPoleEnv):
    """CartPole whose observation carries ``width`` more numbers (zeros): each write into
    the buffer is large enough to take a while."""

    def __init__(self, width=20_000, **kwargs):
        super().__init__(**kwargs)
        self.width = width
        high = np.concatenate([self.observation_space.high, np.ones(width, np.float32)])
        self.observation_space = gym.spaces.Box(-high, high, dtype=np.float32)

    def _wide(self, obs):
        return np.concatenate([obs, np.zeros(self.width, np.float32)])

    def reset(self, **kwargs):
        obs, info = super().reset(**kwargs)
        return self._wide(obs), info

    def step(self, action):
        obs, *rest = super().step(action)
        return (self._wide(obs), *rest)


gym.register("Exploding-v0", entry_point=Faulty, max_episode_steps=500)
gym.register("Flaky-v0", entry_point=Flaky, max_episode_steps=500)
gym.register("Wide-v0", entry_point=Wide, max_episode_steps=500)
gym.register("Hanging-v0", entry_point=Faulty, max_episode_steps=500, kwargs={"after": 3000, "hang": True})
gym.register(  # after the steps the config check plays (in the learner's process, in an instance of its own)
    "FailsInTheLearner-v0",
    entry_point=Faulty,
    max_episode_steps=500,
    kwargs={"after": CHECKED_STEPS, "learner_only": True},
)
