"""EpisodeCollector writes exactly what TorchRL's Collector writes: the same episodes,
in the same order and the same writes, from the same rollouts."""

import pytest
import torch
from tensordict import TensorDict
from torchrl.collectors import Collector
from torchrl.data import LazyTensorStorage, TensorDictReplayBuffer

import trajrl
from trajrl.collect.assembly import EpisodeCollector, EpisodesUnderWay
from trajrl.collect.env import env_factory
from trajrl.keys import TRAJ_KEY
from trajrl.replay.audit import audit_storage


def collect(collector_class, env_fn, policy, num_envs: int, rollouts: int):
    """Run ``rollouts`` rollouts into a fresh buffer; return it and the size of each write."""
    torch.manual_seed(0)
    buffer = TensorDictReplayBuffer(storage=LazyTensorStorage(100_000))
    writes = []
    extend = buffer.extend
    buffer.extend = lambda data: writes.append(data.shape[0]) or extend(data)
    collector = collector_class(
        env_fn, policy, frames_per_batch=16 * num_envs, total_frames=-1, trajs_per_batch=4, replay_buffer=buffer
    )
    collector.set_seed(0)
    collector.reset()  # the first observation from the seeded environments too
    for i, _ in enumerate(collector):
        if i + 1 == rollouts:
            break
    collector.shutdown()
    return buffer, writes


@pytest.mark.parametrize("num_envs", [1, 5])
def test_episode_collector_writes_what_torchrl_writes(num_envs):
    cfg = trajrl.compose(
        [
            "debug=smoke",
            "algo=r2d2",
            "collector=sync",
            "+env.kwargs.max_episode_steps=30",
            "sampler.slice_len=20",
            "algo.eps_start=0.5",
        ]
    )
    with trajrl.build(cfg) as pipe:
        policy, primer = pipe.policy, pipe.env_fn.args[3]
    env_fn = env_factory(cfg.env, primer=primer, num_envs=num_envs)
    theirs, their_writes = collect(Collector, env_fn, policy, num_envs, rollouts=60)
    ours, our_writes = collect(EpisodeCollector, env_fn, policy, num_envs, rollouts=60)
    assert our_writes == their_writes and len(our_writes) > 10
    assert ours.write_count == theirs.write_count > 200
    stored_theirs, stored_ours = theirs[:], ours[:]
    assert set(stored_ours.keys(True, True)) == set(stored_theirs.keys(True, True))
    for key in stored_theirs.keys(True, True):
        assert torch.equal(stored_ours.get(key), stored_theirs.get(key)), key
    assert not any(audit_storage(stored_ours, full=False).values())
    ends = stored_ours["next", "truncated"] & stored_ours["next", "done"]
    assert ends.any() and (stored_ours["next", "terminated"] & stored_ours["next", "done"]).any()


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
