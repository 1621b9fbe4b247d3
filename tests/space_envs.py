"""A cue task observed through each kind of gymnasium space (``Spaces-v0``, ``kind=...``),
for the tests of every observation space; importable by collector workers
(``env.import_module=space_envs``: the tests directory is on their path)."""

import gymnasium as gym
import numpy as np

S = gym.spaces


def observation_space(kind: str, length: int) -> gym.Space:
    return {
        "box2d": S.Box(-1.0, 1.0, (2, 3), np.float32),
        "float64": S.Box(-1.0, 1.0, (3,), np.float64),
        "image": S.Box(0, 255, (8, 8, 3), np.uint8),
        "image_chw": S.Box(0, 255, (1, 40, 40), np.uint8),
        "discrete": S.Discrete(3),
        "multi_discrete": S.MultiDiscrete([3, length + 1]),
        "multibinary": S.MultiBinary(3),
        "dict": S.Dict(
            {
                "camera": S.Box(0, 255, (40, 40, 1), np.uint8),
                "position": S.Box(-1.0, 1.0, (2,), np.float32),
                "cue": S.Discrete(3),
            }
        ),
        "tuple": S.Tuple((S.MultiBinary(2), S.Box(-1.0, 1.0, (1,), np.float32), S.Discrete(4, start=-1))),
    }[kind]


class Spaces(gym.Env):
    """A cue (0 or 1) shown at the first step only, to be named at the last of ``length``
    steps (reward +1 right, -1 wrong), observed through a space of ``kind``;
    ``actions``: discrete (2), continuous (its sign answers) or multi (MultiDiscrete: PPO only)."""

    metadata = {"render_modes": []}

    def __init__(self, kind: str = "box2d", actions: str = "discrete", length: int = 6):
        self.kind, self.length = kind, length
        self.observation_space = observation_space(kind, length)
        self.action_space = {
            "discrete": S.Discrete(2),
            "continuous": S.Box(-1.0, 1.0, (1,), np.float32),
            "multi": S.MultiDiscrete([2, 2]),
        }[actions]
        self.cue, self.t = 0, 0

    def _obs(self):
        code = self.cue + 1 if self.t == 0 else 0  # 0: nothing shown
        frac = self.t / self.length
        if self.kind == "box2d":
            return np.array([[code / 2, frac, 0], [0, 0, 1]], dtype=np.float32)
        if self.kind == "float64":
            return np.array([code / 2, frac, 0.5])
        if self.kind in ("image", "image_chw"):
            pixels = np.zeros(self.observation_space.shape, np.uint8)
            pixels.reshape(-1)[: code * 7] = 255
            return pixels
        if self.kind == "discrete":
            return code
        if self.kind == "multi_discrete":
            return np.array([code, self.t], dtype=np.int64)
        if self.kind == "multibinary":
            return np.array([code == 1, code == 2, self.t == self.length - 1], dtype=np.int8)
        if self.kind == "dict":
            camera = np.zeros((40, 40, 1), np.uint8)
            camera[: code * 10] = 255
            return {"camera": camera, "position": np.array([frac, 0.0], np.float32), "cue": code}
        return (np.array([code == 1, code == 2], np.int8), np.array([frac], np.float32), code - 1)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.cue, self.t = int(self.np_random.integers(2)), 0
        return self._obs(), {}

    def step(self, action):
        last = self.t == self.length - 1
        answer = int(np.asarray(action).reshape(-1)[0] > 0) if self.action_space.shape else int(action)
        reward = (1.0 if answer == self.cue else -1.0) if last else 0.0
        self.t += 1
        return self._obs(), reward, last, False, {}


KINDS = ("box2d", "float64", "image", "image_chw", "discrete", "multi_discrete", "multibinary", "dict", "tuple")
if "Spaces-v0" not in gym.registry:
    gym.register("Spaces-v0", entry_point=Spaces)


class BadGoal(gym.Env):
    """A goal environment hindsight cannot relabel: ``problem="no_reward"`` has no
    ``compute_reward``; ``"unbatched"`` computes one reward for a batch of goals."""

    metadata = {"render_modes": []}

    def __init__(self, problem: str = "no_reward"):
        bits = S.MultiBinary(3)
        self.observation_space = S.Dict(observation=bits, achieved_goal=bits, desired_goal=bits)
        self.action_space = S.Discrete(3)
        if problem == "unbatched":
            self.compute_reward = lambda achieved, desired, info: float(np.array_equal(achieved, desired)) - 1.0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        zeros = np.zeros(3, np.int8)
        return {"observation": zeros, "achieved_goal": zeros, "desired_goal": zeros}, {}

    def step(self, action):
        return self.reset()[0], -1.0, False, True, {}


if "BadGoal-v0" not in gym.registry:
    gym.register("BadGoal-v0", entry_point=BadGoal)
