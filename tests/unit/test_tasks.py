"""The travel suite's tasks (trajrl.envs.tasks): spaces, resets, steps, rewards; a scripted policy with
the memory each task asks for reaches the suite's threshold, one without it does not; and the
interval a confirmation run reports."""

import gymnasium as gym
import numpy as np
import pytest

import trajrl.envs.gym_envs  # noqa: F401  (registers the ids)
from trajrl.envs.tasks import (
    SUITE,
    PointMassNoVel,
    RecallSequence,
    RepeatFirst,
    RepeatPrevious,
    RepeatPreviousPair,
    RunningSum,
)
from trajrl.report.summary import wilson_interval


def mean_return(env: gym.Env, act, episodes: int = 100) -> float:
    """The mean return of ``act(observation, memory) -> action`` (``memory``: a dict it keeps per episode)."""
    returns = []
    for episode in range(episodes):
        obs, _ = env.reset(seed=episode)
        memory, total, done = {}, 0.0, False
        while not done:
            obs, reward, terminated, truncated, _ = env.step(act(obs, memory))
            total, done = total + reward, terminated or truncated
        returns.append(total)
    return float(np.mean(returns))


def random_return(env: gym.Env, episodes: int = 300) -> float:
    env.action_space.seed(0)
    return mean_return(env, lambda obs, memory: env.action_space.sample(), episodes)


#: The suite's tasks trajrl writes itself (cartpole_novel and pendulum_novel wrap gymnasium's).
OWN_TASKS = [
    "point_mass_novel",
    "repeat_previous_hard",
    "repeat_previous_pair",
    "recall_sequence",
    "repeat_first",
    "running_sum",
]


@pytest.mark.parametrize("name", OWN_TASKS)
def test_a_task_steps_within_its_spaces_and_ends_when_it_says(name):
    env = gym.make(SUITE[name].env_id)
    obs, _ = env.reset(seed=3)
    assert env.observation_space.contains(obs)
    again, _ = env.reset(seed=3)
    np.testing.assert_array_equal(obs, again)  # seeded
    env.action_space.seed(0)
    steps, done = 0, False
    while not done:
        obs, reward, terminated, truncated, _ = env.step(env.action_space.sample())
        assert env.observation_space.contains(obs) and np.isfinite(reward)
        steps, done = steps + 1, terminated or truncated
    assert steps == env.unwrapped.length


def test_repeat_previous_pays_for_the_symbol_seen_delay_steps_before():
    env = RepeatPrevious(length=6, symbols=3, delay=2)
    seen = [env.reset(seed=0)[0]]
    rewards = []
    for t in range(6):
        answer = seen[t - 2] if t >= 2 else 0
        obs, reward, terminated, _, _ = env.step(answer)
        seen.append(obs)
        rewards.append(reward)
    assert rewards[2:] == [0.25] * 4 and rewards[:2] == [0.0, 0.0] and terminated
    assert isinstance(env.observation_space, gym.spaces.Discrete)


def test_repeat_previous_pair_pays_half_for_each_part_seen_delay_steps_before():
    env = RepeatPreviousPair(length=5, symbols=3, delay=1)
    seen = [env.reset(seed=0)[0]]
    assert isinstance(env.action_space, gym.spaces.MultiDiscrete) and list(env.action_space.nvec) == [3, 3]
    rewards = []
    for t, wrong in enumerate([0, 0, 1, 2, 0]):  # a part made wrong (1: the first, 2: the second) or none
        answer = seen[t - 1].copy() if t >= 1 else np.zeros(2, np.int64)
        if wrong:
            answer[wrong - 1] = (answer[wrong - 1] + 1) % 3
        obs, reward, terminated, _, _ = env.step(answer)
        assert env.observation_space.contains(obs)
        seen.append(obs)
        rewards.append(reward)
    assert rewards == [0.0, 0.25, 0.125, 0.125, 0.25] and terminated  # 0.5 / 4 a part


def test_recall_sequence_asks_back_what_it_showed_last_first_and_pays_only_then():
    env = RecallSequence(count=3, symbols=5, rounds=2)
    obs, _ = env.reset(seed=4)
    rewards, shown = [], []
    for t in range(12):
        if t % 6 < 3:  # shown: the symbol, the flag 0
            assert obs[-1] == 0.0 and obs[:-1].sum() == 1.0
            shown.append(int(obs[:-1].argmax()))
            action = 0
        else:  # asked: the flag alone
            assert obs[-1] == 1.0 and obs[:-1].sum() == 0.0
            right = shown[-1 - (t % 6 - 3)]  # the last shown first
            action = right if t < 9 else (right + 1) % 5  # round 1 right, round 2 wrong
        obs, reward, terminated, _, _ = env.step(action)
        rewards.append(reward)
    assert terminated and env.length == 12
    assert rewards == [0.0] * 3 + [pytest.approx(1 / 6)] * 3 + [0.0] * 6
    forward = RecallSequence(count=2, symbols=3, rounds=1, reverse=False)
    first, _ = forward.reset(seed=0)
    second = forward.step(0)[0]
    forward.step(0)
    assert forward.step(int(first.argmax()))[1] == 0.5 and forward.step(int(second.argmax()))[1] == 0.5


def test_repeat_first_shows_the_first_symbol_once_and_pays_for_it_at_every_step():
    env = RepeatFirst(length=4, symbols=3)
    obs, _ = env.reset(seed=1)
    first = int(obs[:3].argmax())
    assert obs[-1] == 1.0
    total = 0.0
    for _ in range(4):
        obs, reward, _, _, _ = env.step(first)
        assert obs[-1] == 0.0 and obs[:3].sum() == 1.0
        total += reward
    assert total == pytest.approx(1.0)


def test_running_sum_pays_for_the_sign_of_the_sum_so_far():
    env = RunningSum(length=5)
    obs, _ = env.reset(seed=2)
    total, answers = float(obs[0]), 0.0
    for _ in range(5):
        obs, reward, _, _, _ = env.step(int(total >= 0))
        answers += reward
        total += float(obs[0])
    assert answers == pytest.approx(1.0)


def test_the_point_mass_shows_its_position_only_and_pays_minus_its_square():
    env = PointMassNoVel()
    obs, _ = env.reset(seed=0)
    assert obs.shape == (1,) and 0.5 <= abs(obs[0]) <= 1.0
    obs, reward, terminated, truncated, _ = env.step(np.array([1.0], np.float32))
    assert reward == pytest.approx(-0.1 * float(obs[0]) ** 2, rel=1e-5) and not (terminated or truncated)


def difference_controller(obs, memory):  # the velocity from two positions: one step of memory
    position = float(obs[0])
    velocity = (position - memory.get("position", position)) / PointMassNoVel.dt
    memory["position"] = position
    return np.clip([-10 * position - 6 * velocity], -1, 1).astype(np.float32)


def recall(delay):
    def act(obs, memory):
        memory.setdefault("seen", []).append(int(obs))
        return memory["seen"][-1 - delay] if len(memory["seen"]) > delay else 0

    return act


def recall_pair(delay):
    def act(obs, memory):
        memory.setdefault("seen", []).append(np.asarray(obs).copy())
        return memory["seen"][-1 - delay] if len(memory["seen"]) > delay else np.zeros(2, np.int64)

    return act


def reverse_recall(obs, memory):
    if obs[-1] == 0.0:  # shown: kept, a new round emptied first
        if memory.get("asking"):
            memory["shown"], memory["asking"] = [], False
        memory.setdefault("shown", []).append(int(obs[:-1].argmax()))
        return 0
    memory["asking"] = True
    return memory["shown"].pop()


def first(obs, memory):
    memory.setdefault("first", int(np.argmax(obs[:-1])))
    return memory["first"]


def count(obs, memory):
    memory["sum"] = memory.get("sum", 0) + int(obs[0])
    return int(memory["sum"] >= 0)


#: task -> (a policy with the memory it asks for, the best policy without memory we know)
SCRIPTED = {
    "point_mass_novel": (difference_controller, lambda obs, memory: np.clip(-20 * obs, -1, 1).astype(np.float32)),
    "repeat_previous_hard": (recall(4), lambda obs, memory: int(obs)),
    "repeat_previous_pair": (recall_pair(2), lambda obs, memory: np.asarray(obs)),
    "recall_sequence": (reverse_recall, lambda obs, memory: int(obs[:-1].argmax())),
    "repeat_first": (first, lambda obs, memory: int(np.argmax(obs[:-1]))),
    "running_sum": (count, lambda obs, memory: int(obs[0] > 0)),
}


@pytest.mark.parametrize("name", OWN_TASKS)
def test_memory_reaches_the_best_return_the_suite_names_and_no_memory_stays_below_the_threshold(name):
    task = SUITE[name]
    env = gym.make(task.env_id)
    with_memory, without = SCRIPTED[name]
    assert mean_return(env, with_memory) == pytest.approx(task.best, abs=0.01 * abs(task.best - task.random))
    assert mean_return(env, without) < task.threshold
    assert random_return(env) == pytest.approx(task.random, abs=0.05 * abs(task.threshold - task.random))
    assert task.normalised(task.random) == 0 and task.normalised(task.threshold) == pytest.approx(1)


def test_the_wilson_interval_of_seeds_that_succeed():
    """The 90 % interval of k seeds of 10 that succeed, as a confirmation run prints it (9/10: 0.65..0.98,
    docs/development.md); wider at 95 %; more successes than trials refused."""
    for successes, low, high in [(10, 0.79, 1.0), (9, 0.65, 0.98), (7, 0.44, 0.87), (0, 0.0, 0.21)]:
        assert wilson_interval(successes, 10) == pytest.approx((low, high), abs=0.005)
    low, high = wilson_interval(4, 5, confidence=0.95)
    assert low < wilson_interval(4, 5)[0] and high > wilson_interval(4, 5)[1]  # wider at 95 %
    with pytest.raises(ValueError, match="successes <= trials"):
        wilson_interval(6, 5)
