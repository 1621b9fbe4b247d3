"""The recurrent state stored with every step, recomputed with the learner's current
network (``algo.refresh_states_every``): it is the state that network reaches from the
start of each stored episode, also across the storage's wrap-around."""

from functools import partial

import pytest
import torch
from helpers import wait_for_frames

import trajrl
from trajrl.algos.networks import states_along
from trajrl.base.keys import TRAJ_KEY
from trajrl.replay.episodes import find_runs, run_steps
from trajrl.replay.states import refresh_states


def stored(buffer):
    return buffer.storage[: len(buffer.storage)]


@pytest.mark.parametrize("algo, env, rnn", [("r2d2", "cartpole_novel", "lstm"), ("rsac", "pendulum_novel", "gru")])
def test_refreshed_states_are_the_ones_the_current_network_reaches_from_each_episode_start(algo, env, rnn):
    cfg = trajrl.compose(
        [
            f"algo={algo}",
            f"env={env}",
            f"algo.rnn={rnn}",
            "collector=sync",
            "debug=smoke",
            "storage.capacity=1500",
            "+env.kwargs.max_episode_steps=120",
            "sampler.state_every=null",
        ]
    )  # every step's state stored, as refreshing needs
    with trajrl.build(cfg) as pipe:
        pipe.collector.start()
        wait_for_frames(pipe, 2500)  # the storage has wrapped around
        pipe.collector.async_shutdown()
        net = pipe.algo.qnet if algo == "r2d2" else pipe.algo.actor  # whose state the policy stores
        keys, along = net.state_keys, partial(states_along, net.encoder, net.rnn)
        acted = stored(pipe.buffer).select(*keys).clone()
        # The acting network is the learner's: refreshing reproduces what the policy stored.
        assert refresh_states(pipe.buffer, keys, along) == len(pipe.buffer.storage)
        for key in keys:
            torch.testing.assert_close(stored(pipe.buffer).get(key), acted.get(key), rtol=0, atol=1e-5)
        with torch.no_grad():  # the network learns: the stored states no longer are its own
            for p in net.parameters():
                p.add_(0.05 * torch.randn_like(p))
        refresh_states(pipe.buffer, keys, along)
        steps = stored(pipe.buffer)
        starts, lengths = find_runs(steps.get(TRAJ_KEY))
        assert starts.numel() > 5 and (starts + lengths > len(pipe.buffer.storage)).any()  # one run wraps around
        for start, length in zip(starts.tolist(), lengths.tolist()):
            _, _, index = run_steps(torch.tensor([start]), torch.tensor([length]), len(pipe.buffer.storage))
            run = steps[index]
            # Brute force: one step at a time from the state at the run's first step.
            state = tuple(run.get(key)[0].unsqueeze(1) for key in keys)
            for t in range(length):
                for key, s in zip(keys, state):
                    torch.testing.assert_close(run.get(key)[t], s[:, 0], rtol=1e-4, atol=1e-5)
                _, after = net.rnn(
                    net.encoder(run.get("observation")[t].view(1, 1, -1)), state if rnn == "lstm" else state[0]
                )
                state = after if rnn == "lstm" else (after,)
        assert (acted.get(keys[0]) - steps.get(keys[0])).abs().max() > 1e-3
        starts_of_episodes = steps.get("is_init").reshape(-1)
        assert steps.get(keys[0])[starts_of_episodes].abs().max() == 0  # zero where an episode starts


def test_a_run_refreshes_its_stored_states_on_the_configured_cadence(tmp_path):
    cfg = trajrl.compose(
        [
            "collector=multi_async",
            "debug=smoke",
            "algo.refresh_states_every=20",
            "total_frames=3000",
            "loop.log_every_frames=1000",
        ]
    )
    final = trajrl.train(cfg, run_dir=tmp_path / "run")
    assert final["buffer/state_refreshes"] == final["train/updates"] // 20 > 0


def test_a_kept_state_is_lost_only_to_the_step_that_takes_its_slot():
    from trajrl.replay.states import SparseStates

    kept = SparseStates({"h": (1, 2)}, capacity=20, every=5)
    state = lambda v: {"h": torch.full((1, 1, 2), float(v))}  # noqa: E731
    kept.write(torch.tensor([13]), torch.tensor([10]), state(13))  # the last lap's step 10, at position 13
    assert kept.has_state(torch.tensor([13]), torch.tensor([10])).item()
    assert not kept.has_state(torch.tensor([13]), torch.tensor([7])).item()  # not at a multiple of 5
    assert kept.has_state(torch.tensor([4]), torch.tensor([0])).item()  # an episode's first step: zero
    kept.write(torch.tensor([11]), torch.tensor([5]), state(11))  # this lap's step 5 takes slot 2
    assert not kept.has_state(torch.tensor([13]), torch.tensor([10])).item()
    assert kept.read(torch.tensor([11, 4]), torch.tensor([5, 0]))["h"][:, 0].tolist() == [[11.0, 11.0], [0.0, 0.0]]


# sync: the same EpisodeCollector writing in the learner's process: in the slow run
@pytest.mark.parametrize("collector", [pytest.param("sync", marks=pytest.mark.slow), "multi_async"])
def test_with_state_every_slices_start_only_where_the_state_is_kept_and_from_the_acting_policys_state(collector):
    """``sampler.state_every=7``: the storage holds no state; each sampled slice starts at
    a multiple of 7 steps into its episode, from the state the acting policy had there
    (what its network, unchanged, reaches from the episode's first step), also after the
    storage wrapped around and when worker processes wrote the steps."""
    every = 7
    cfg = trajrl.compose(
        [
            f"collector={collector}",
            "debug=smoke",
            "algo=r2d2",
            "storage.capacity=1500",
            "+env.kwargs.max_episode_steps=120",
            f"sampler.state_every={every}",
        ]
    )
    with trajrl.build(cfg) as pipe:
        pipe.collector.start()
        wait_for_frames(pipe, 2500)  # the storage has wrapped around
        pipe.collector.async_shutdown()
        net = pipe.algo.qnet
        steps = stored(pipe.buffer)
        assert not any(key in steps.keys() for key in net.state_keys)  # kept apart, every 7 steps
        checked = mid_episode = 0
        for _ in range(10):
            batch = pipe.sequences.sample()
            first = batch[:, 0]
            assert (first.get("step_count").reshape(-1) % every == 0).all()
            for row in range(batch.shape[0]):
                ids = steps.get(TRAJ_KEY).reshape(-1)
                episode = (ids == first.get(TRAJ_KEY).reshape(-1)[row]).nonzero().squeeze(-1)
                at = int(first.get("step_count").reshape(-1)[row])
                if steps.get("step_count").reshape(-1)[episode].min() != 0:
                    continue  # its first steps were overwritten: nothing to recompute from
                order = steps.get("step_count").reshape(-1)[episode].argsort()
                obs = steps.get("observation")[episode[order]][:at]
                state = tuple(torch.zeros(1, 1, net.rnn.hidden_size) for _ in net.state_keys)
                if at > 0:
                    with torch.no_grad():
                        _, state = net.rnn(net.encoder(obs.unsqueeze(0)), state)
                for key, s in zip(net.state_keys, state):
                    torch.testing.assert_close(batch.get(key)[row, 0], s[:, 0], rtol=1e-4, atol=1e-5)
                checked += 1
                mid_episode += at > 0
        assert checked > 100 and mid_episode > 20, (checked, mid_episode)


def test_the_kept_states_are_saved_with_the_buffer_and_a_buffer_that_keeps_them_otherwise_is_refused():
    from trajrl.base.errors import CheckpointError

    def pipeline(every):
        return trajrl.build(
            trajrl.compose(["collector=sync", "debug=smoke", "storage.capacity=1500", f"sampler.state_every={every}"])
        )

    with pipeline(7) as pipe:
        pipe.collector.start()
        wait_for_frames(pipe, 1000)
        pipe.collector.async_shutdown()
        saved = pipe.buffer.state_dict()
        kept = pipe.buffer._writer.states
    assert int((kept.owner >= 0).sum()) > 10
    with pipeline(7) as again:
        again.buffer.load_state_dict(saved)
        assert again.buffer._writer.states.owner.equal(kept.owner)
        for key, table in kept.states.items():
            assert again.buffer._writer.states.states[key].equal(table)
    for every in ("null", 5):
        with pipeline(every) as other, pytest.raises(CheckpointError, match="sampler.state_every=7"):
            other.buffer.load_state_dict(saved)
