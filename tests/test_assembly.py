"""EpisodeCollector writes exactly what TorchRL's Collector writes: the same episodes,
in the same order and the same writes, from the same rollouts."""
import pytest
import torch
from torchrl.collectors import Collector
from torchrl.data import LazyTensorStorage, TensorDictReplayBuffer

import trajrl
from trajrl.replay.audit import audit_storage
from trajrl.replay.episodes import TRAJ_KEY
from trajrl.collect.assembly import EpisodeCollector, complete_episodes
from trajrl.collect.env import env_factory


def collect(collector_class, env_fn, policy, num_envs: int, rollouts: int):
    """Run ``rollouts`` rollouts into a fresh buffer; return it and the size of each write."""
    torch.manual_seed(0)
    buffer = TensorDictReplayBuffer(storage=LazyTensorStorage(100_000))
    writes = []
    extend = buffer.extend
    buffer.extend = lambda data: writes.append(data.shape[0]) or extend(data)
    collector = collector_class(env_fn, policy, frames_per_batch=16 * num_envs, total_frames=-1,
                                trajs_per_batch=4, replay_buffer=buffer)
    collector.set_seed(0)
    collector.reset()  # the first observation from the seeded environments too
    for i, _ in enumerate(collector):
        if i + 1 == rollouts:
            break
    collector.shutdown()
    return buffer, writes


@pytest.mark.parametrize("num_envs", [1, 5])
def test_episode_collector_writes_what_torchrl_writes(num_envs):
    cfg = trajrl.compose(["debug=smoke", "collector=sync", "+env.kwargs.max_episode_steps=30", "sampler.slice_len=20", "algo.eps_start=0.5"])
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


def test_complete_episodes_keeps_unfinished_steps_for_the_next_rollout():
    from tensordict import TensorDict

    # two environments, 3 steps each: env 0 finishes episode 7 at its second step and
    # starts 9; env 1 continues episode 8 (begun earlier: one step waiting) without an end
    ids = torch.tensor([7, 7, 9, 8, 8, 8])
    done = torch.tensor([False, True, False, False, False, False])
    steps = TensorDict({TRAJ_KEY: ids, ("next", "done"): done.unsqueeze(-1), "t": torch.arange(6)}, [6])
    waiting = TensorDict({TRAJ_KEY: torch.tensor([8]), ("next", "done"): torch.tensor([[False]]),
                          "t": torch.tensor([-1])}, [1])
    episodes, unfinished = complete_episodes(torch.cat([waiting, steps]))
    assert episodes["t"].tolist() == [0, 1]
    assert unfinished[TRAJ_KEY].tolist() == [8, 8, 8, 8, 9] and unfinished["t"].tolist() == [-1, 3, 4, 5, 2]
