"""Environments that misbehave as users' own do (``env.import_module=misbehaving_envs``): a reward
or an observation that is not finite, an observation of another shape or dtype than declared,
actions whose bounds are infinite, and one whose optional dependency is missing
(``NeedsPhysics-v0``: gymnasium's ``DependencyNotInstalled``, as Box2D's environments raise it), and one
whose observations are large (``LargeObservations-v0``: a replay buffer of them outgrows a machine).
Each other one is CartPole (or, for the actions, a point on a line) with one thing wrong from step
``at`` of each episode on (``at=0``: from the reset), of every ``every``-th episode; with
``in_workers_only``, only in collector worker processes (the config check's steps pass); with
``in_collectors_only``, in collector threads too (``collector=async_batched``'s, gymnasium's async vectors')."""

import multiprocessing
import threading

import gymnasium as gym
import numpy as np
from gymnasium.envs.classic_control import CartPoleEnv


class Misbehaving(CartPoleEnv):
    """CartPole with one misbehaviour from step ``at`` of each episode on: ``nan_reward``, ``huge_reward``
    (``huge``, 1e36: finite, its episodes' sums too, and the losses overflow; 3e38: the sums do not),
    ``inf_observation``,
    ``wider_observation`` (one more number), ``float64_observation`` (declared float32: cast, not refused),
    ``text_observation`` (an array of strings, which nothing can cast)."""

    def __init__(
        self, wrong="nan_reward", at=3, in_workers_only=False, every=1, huge=1e36, in_collectors_only=False, **kwargs
    ):
        super().__init__(**kwargs)
        self.wrong, self.at, self.t, self.every, self.episodes, self.huge = wrong, at, 0, every, 0, huge
        self.misbehaving, self.in_collectors_only = wrong, in_collectors_only
        if in_workers_only and not multiprocessing.parent_process():  # behaves in the learner's process
            self.misbehaving = self.wrong = ""

    def _observed(self, obs):
        if self.t < self.at:
            return obs
        match self.wrong:
            case "inf_observation":
                return np.array([obs[0], np.inf, *obs[2:]], np.float32)
            case "wider_observation":
                return np.concatenate([obs, np.zeros(1, np.float32)])
            case "float64_observation":
                return obs.astype(np.float64)
            case "text_observation":
                return np.array([str(x) for x in obs])
        return obs

    def reset(self, **kwargs):
        obs, info = super().reset(**kwargs)
        self.t, self.episodes = 0, self.episodes + 1
        self.wrong = self.misbehaving if self.episodes % self.every == 0 else ""
        if self.in_collectors_only and in_the_learners_thread():  # the config check's steps, the learner's
            self.wrong = ""
        return self._observed(obs), info

    def step(self, action):
        self.t += 1
        obs, reward, terminated, truncated, info = super().step(action)
        if self.wrong == "nan_reward" and self.t >= self.at:
            reward = float("nan")
        if self.wrong == "huge_reward" and self.t >= self.at:  # finite, but the losses' squares are not
            reward = self.huge
        return self._observed(obs), reward, terminated, truncated, info


def in_the_learners_thread() -> bool:
    """Stepped by the learner's process in its main thread (not by a collector's thread or worker)."""
    return not multiprocessing.parent_process() and threading.current_thread() is threading.main_thread()


class UnboundedLine(gym.Env):
    """A point on a line pushed by a force the space declares ``Box(-inf, inf)``; each step pays
    minus its squared distance from the origin, 50 steps an episode."""

    def __init__(self):
        self.observation_space = gym.spaces.Box(-10.0, 10.0, (1,), np.float32)
        self.action_space = gym.spaces.Box(-np.inf, np.inf, (1,), np.float32)
        self.x, self.t = 0.0, 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.x, self.t = float(self.np_random.uniform(-1, 1)), 0
        return np.array([self.x], np.float32), {}

    def step(self, action):
        self.x = float(np.clip(self.x + 0.1 * np.clip(float(np.asarray(action).reshape(-1)[0]), -1, 1), -10, 10))
        self.t += 1
        return np.array([self.x], np.float32), -(self.x**2), False, self.t >= 50, {}


WRONG = ("nan_reward", "huge_reward", "inf_observation", "wider_observation", "float64_observation", "text_observation")
for wrong in WRONG:
    name = "".join(part.title() for part in wrong.split("_"))
    gym.register(f"{name}-v0", entry_point=Misbehaving, max_episode_steps=200, kwargs={"wrong": wrong})
gym.register("UnboundedLine-v0", entry_point=UnboundedLine, max_episode_steps=50)


def needs_physics(**kwargs) -> gym.Env:
    """An environment whose optional dependency is not installed, as gymnasium's Box2D ones say it."""
    raise gym.error.DependencyNotInstalled(
        'FakePhysics is not installed, you can install it by run `pip install "fakephysics"`'
    )


gym.register("NeedsPhysics-v0", entry_point=needs_physics)


class LargeObservations(CartPoleEnv):
    """CartPole seen as a ``(3, 128, 128)`` float32 picture (196,608 bytes an observation): its state in
    the first four numbers, zeros elsewhere. A replay buffer of many of its frames outgrows a machine."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.observation_space = gym.spaces.Box(0.0, 1.0, (3, 128, 128), np.float32)

    def _picture(self, state):
        picture = np.zeros(self.observation_space.shape, np.float32)
        picture.reshape(-1)[:4] = np.clip(np.asarray(state, np.float32) * 0.1 + 0.5, 0.0, 1.0)
        return picture

    def reset(self, **kwargs):
        obs, info = super().reset(**kwargs)
        return self._picture(obs), info

    def step(self, action):
        obs, reward, terminated, truncated, info = super().step(action)
        return self._picture(obs), reward, terminated, truncated, info


gym.register("LargeObservations-v0", entry_point=LargeObservations, max_episode_steps=200)
