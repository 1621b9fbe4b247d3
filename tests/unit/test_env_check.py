"""What an environment returns against what it declares (trajrl.envs.env_check): each way an observation
or a reward misbehaves, named; what trajrl casts, passed."""

import gymnasium as gym
import numpy as np
import pytest

from trajrl.base.errors import BadStep, EnvironmentFailed
from trajrl.envs.env_check import CheckedSteps, first_steps, observation_problem, reward_problem

BOX = gym.spaces.Box(-1.0, 1.0, (3,), np.float32)


@pytest.mark.parametrize(
    "space, obs, problem",
    [
        (BOX, np.zeros(3, np.float32), ""),
        (BOX, np.zeros(3, np.float64), ""),  # numpy's default: cast
        (BOX, [0, 1, 0], ""),  # a list of ints: cast
        (BOX, np.full(3, 5.0, np.float32), ""),  # outside the bounds: gymnasium only warns, and so does trajrl
        (BOX, np.zeros(4, np.float32), "of shape (4,); the space declares (3,) float32"),
        (BOX, np.array([0.0, np.nan, 0.0]), "holding nan (entry 1)"),
        (BOX, None, "of dtype object, not numbers (None); the space declares (3,) float32"),
        (
            gym.spaces.Box(0, 255, (2, 2, 3), np.uint8),
            np.zeros((2, 2, 3), np.float32),
            "of dtype float32, which trajrl cannot cast to the declared (2, 2, 3) uint8",
        ),
        (gym.spaces.Discrete(3), 2, ""),
        (gym.spaces.Discrete(3), 3, "3, outside its space Discrete(3)"),
        (gym.spaces.MultiBinary(2), np.array([0, 2]), "[0, 2], outside its space MultiBinary(2)"),
        (
            gym.spaces.Dict({"a": BOX, "b": gym.spaces.Discrete(2)}),
            {"a": np.zeros(3)},
            "without the keys ['b'] its Dict space declares",
        ),
        (
            gym.spaces.Dict({"a": BOX}),
            {"a": np.array([0.0, 0.0, np.inf])},
            "holding inf (entry 2) at ['a']",
        ),
        (
            gym.spaces.Tuple((BOX, BOX)),
            (np.zeros(3), np.zeros(2)),
            "of shape (2,) at [1]; the space declares (3,) float32",
        ),
        (gym.spaces.Tuple((BOX, BOX)), (np.zeros(3),), "of type tuple where the space declares a Tuple of 2"),
    ],
)
def test_an_observation_is_checked_against_its_declared_space(space, obs, problem):
    assert observation_problem(space, obs) == problem


def test_a_reward_must_be_a_finite_number():
    assert reward_problem(1) == reward_problem(np.float32(-0.5)) == reward_problem(np.array(2.0)) == ""
    assert reward_problem(float("inf")) == "a reward of inf"
    assert reward_problem(None) == "a reward of None, not a number"


def test_the_first_steps_stop_at_the_first_misbehaviour_and_count_the_episodes_before():
    import misbehaving_envs  # noqa: F401 (registers them)

    seen = first_steps("CartPole-v1", {}, steps=200, seed=0)
    assert seen.problem == "" and seen.steps == 200 and sum(seen.lengths) <= 200 and seen.rewards == (1.0, 1.0)
    seen = first_steps("NanReward-v0", {}, steps=200, seed=0)
    assert seen.problem == "its step 3 of episode 1 returned a reward of nan" and seen.steps == 3
    seen = first_steps("WiderObservation-v0", {"at": 0}, steps=200, seed=0)
    assert seen.problem.startswith("its reset of episode 1 returned an observation of shape (5,)")


def test_a_step_that_does_not_return_is_named_after_the_timeout():
    import bad_envs  # noqa: F401 (Hanging-v0)

    with pytest.raises(EnvironmentFailed, match=r"env.id=Hanging-v0 did not answer for 1 s while trajrl played"):
        first_steps("Hanging-v0", {"after": 2}, steps=10, timeout_s=1)


def test_a_step_that_raises_ends_the_steps_with_a_note_for_the_collectors_rebuild_it():
    import bad_envs  # noqa: F401 (Exploding-v0)

    seen = first_steps("Exploding-v0", {"after": 5}, steps=20)
    assert seen.problem == "" and seen.steps == 5
    assert seen.notes == [
        "it raised after 5 random steps (RuntimeError: boom: the environment failed after 5 steps): the check stops "
        "there; a run's collectors rebuild an environment that raises (collector.max_restarts)"
    ]


class Replays(gym.Env):
    """Returns the given observations and rewards, one a step (a Box of 3 float32)."""

    observation_space = BOX
    action_space = gym.spaces.Discrete(2)

    def __init__(self, steps):
        self.steps, self.t = steps, 0

    def reset(self, *, seed=None, options=None):
        self.t = 0
        return np.zeros(3, np.float32), {}

    def step(self, action):
        obs, reward = self.steps[self.t]
        self.t += 1
        return obs, reward, False, self.t == len(self.steps), {}


@pytest.mark.parametrize(
    "obs, reward, problem",
    [
        (np.zeros(3, np.float32), 1.0, ""),
        (np.full(3, 3e38, np.float32), np.float32(3e38), ""),  # its sum overflows: the exact check passes it
        (np.zeros(3, np.float64), 1, ""),  # cast, not refused
        (np.zeros(3, np.float32), float("nan"), "a reward of nan"),
        (np.zeros(3, np.float32), 1e300, "a reward of 1e+300, beyond float32's range"),
        (np.array([0, -np.inf, 0], np.float32), 0.0, "an observation holding -inf (entry 1)"),
        (np.zeros(4, np.float32), 0.0, "an observation of shape (4,); the space declares (3,) float32"),
    ],
)
def test_checked_steps_name_the_step_that_misbehaves_and_pass_the_others(obs, reward, problem):
    """Its fast path (float Box observations of the declared shape and dtype, finite) and the exact
    check behind it agree on what passes."""
    env = CheckedSteps(Replays([(np.zeros(3, np.float32), 0.0), (obs, reward)]), "Replays")
    env.reset()
    env.step(0)
    if not problem:
        assert env.step(0)[1] == reward
        return
    with pytest.raises(
        BadStep,
        match=r"env\.id=Replays: its step 2 of an episode \(step 2 of the environment in all\) "
        "returned " + problem.replace("(", r"\(").replace(")", r"\)").replace("+", r"\+"),
    ):
        env.step(0)
