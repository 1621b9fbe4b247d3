"""The first travel suite's recall task (RepeatPrevious-v0, until 2026-12-07) with a constant reward added at
every step (1/47, a right answer's reward), registered as RepeatPreviousOffset-v0: an `env.import_module` for
the diagnosis of notebook/learning/tuning.md (what the soft target's level gives the recall; the switch it turned off,
algo.soft_target, has since left trajrl: at today's commit the run keeps the soft target, faded off or not):

    PYTHONPATH=scripts python -m trajrl env=gym env.id=RepeatPreviousOffset-v0 \
        env.import_module=reward_offset_env total_frames=20000 seed=0 algo.soft_target_fade=null
"""

import gymnasium as gym

from trajrl.envs.tasks import RepeatPrevious


class RewardOffset(gym.Wrapper):
    """Every step's reward plus ``offset``."""

    def __init__(self, env: gym.Env, offset: float):
        super().__init__(env)
        self.offset = offset

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        return obs, reward + self.offset, terminated, truncated, info


def make(offset: float = 1 / 47) -> gym.Env:
    return RewardOffset(RepeatPrevious(), offset)


if "RepeatPreviousOffset-v0" not in gym.registry:
    gym.register("RepeatPreviousOffset-v0", entry_point=make, disable_env_checker=True)
