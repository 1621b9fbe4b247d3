"""CartPole without velocities whose observation also carries the previous action (one-hot;
zeros at reset), registered as PACartPoleNoVel-v1: an `env.import_module` for the tuning
runs of notebook/learning/tuning.md:

    PYTHONPATH=scripts python scripts/bench_learning.py --presets r2d2_cartpole_novel --out <dir> \
        env.id=PACartPoleNoVel-v1 env.import_module=previous_action_env
"""

import gymnasium as gym
import numpy as np

import trajrl.envs.gym_envs

trajrl.envs.gym_envs.register()  # trajrl's environment ids (idempotent)


class PreviousAction(gym.Wrapper):
    def __init__(self, env):
        super().__init__(env)
        self.n = env.action_space.n
        box = env.observation_space
        self.observation_space = gym.spaces.Box(
            np.concatenate([box.low, np.zeros(self.n)]).astype(np.float32),
            np.concatenate([box.high, np.ones(self.n)]).astype(np.float32),
        )

    def reset(self, **kwargs):
        obs, info = self.env.reset(**kwargs)
        return np.concatenate([obs, np.zeros(self.n, np.float32)]).astype(np.float32), info

    def step(self, action):
        obs, r, term, trunc, info = self.env.step(action)
        onehot = np.eye(self.n, dtype=np.float32)[int(action)]
        return np.concatenate([obs, onehot]).astype(np.float32), r, term, trunc, info


def make(**kwargs):
    return PreviousAction(gym.make("trajrl/CartPoleNoVel-v1", **kwargs))


if "PACartPoleNoVel-v1" not in gym.registry:
    gym.register("PACartPoleNoVel-v1", entry_point=make, max_episode_steps=None, disable_env_checker=True)
