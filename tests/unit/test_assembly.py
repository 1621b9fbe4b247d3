"""EpisodesUnderWay, what EpisodeCollector assembles episodes with: unfinished steps kept for the
next rollout, each episode whole through growth and wrap-around (EpisodeCollector against TorchRL's
Collector: tests/integration/test_acting_and_learning.py)."""

import torch
from tensordict import TensorDict

from trajrl.base.keys import TRAJ_KEY
from trajrl.collect.assembly import EpisodesUnderWay


def steps_of(ids, done, t) -> TensorDict:
    return TensorDict(
        {
            TRAJ_KEY: torch.as_tensor(ids),
            ("next", "done"): torch.as_tensor(done).unsqueeze(-1),
            "t": torch.as_tensor(t),
        },
        [len(ids)],
    )


def test_episodes_under_way_keeps_unfinished_steps_for_the_next_rollout():
    under_way = EpisodesUnderWay()
    # env 1's episode 8 has one step waiting from an earlier rollout
    assert under_way.add(steps_of([8], [False], [-1])).shape == (0,)
    # two environments, 3 steps each: env 0 finishes episode 7 at its second step and
    # starts 9; env 1 continues episode 8 without an end
    episodes = under_way.add(steps_of([7, 7, 9, 8, 8, 8], [False, True, False, False, False, False], range(6)))
    assert episodes["t"].tolist() == [0, 1]
    assert len(under_way) == 5
    under_way.drop(torch.tensor([9]))  # a partial reset abandons episode 9
    episodes = under_way.add(steps_of([8, 10], [True, True], [6, 7]))
    assert episodes[TRAJ_KEY].tolist() == [8, 8, 8, 8, 8, 10] and episodes["t"].tolist() == [-1, 3, 4, 5, 6, 7]
    assert len(under_way) == 0


def test_episodes_under_way_gives_each_episode_whole_through_growth_and_wrap_around():
    """Rollouts of 6 environments whose episodes last 1 to 150 steps, against each
    trajectory's steps gathered one by one: the ring grows and wraps many times."""
    gen = torch.Generator().manual_seed(0)
    width, steps, rollouts = 6, 7, 400
    ids = torch.arange(width)
    left = torch.randint(1, 150, (width,), generator=gen)
    next_id, t = width, 0
    under_way, reference, written, expected = EpisodesUnderWay(min_capacity=16), {}, [], []
    capacities = set()
    for _ in range(rollouts):
        rows = []
        for env in range(width):  # an environment's steps are consecutive within a rollout
            for _ in range(steps):
                left[env] -= 1
                done = bool(left[env] == 0)
                rows.append((int(ids[env]), done, t))
                reference.setdefault(int(ids[env]), []).append(t)
                t += 1
                if done:
                    ids[env], next_id = next_id, next_id + 1
                    left[env] = int(torch.randint(1, 150, (), generator=gen))
        ended = sorted({i for i, d, _ in rows if d})
        expected += [s for i in ended for s in reference.pop(i)]
        episodes = under_way.add(steps_of(*zip(*rows)))
        written += episodes["t"].tolist()
        capacities.add(under_way.capacity)
    assert written == expected and len(written) > 10_000
    assert len(under_way) == sum(len(v) for v in reference.values())
    assert len(capacities) >= 2 and under_way.count > 2 * max(capacities)  # it grew, and it wrapped
