"""The recurrent state stored with the steps: with every step, the state the acting network reaches
from the start of each stored episode, also across the storage's wrap-around; kept every k steps only
(``sampler.state_every``), where slices start, and saved with the buffer."""

import pytest
import torch
from helpers import wait_for_frames

import trajrl
from trajrl.base.keys import TRAJ_KEY
from trajrl.replay.episodes import find_runs, run_steps


def stored(buffer):
    return buffer.storage[: len(buffer.storage)]


@pytest.mark.parametrize("algo, env, rnn", [("r2d2", "cartpole_novel", "lstm"), ("rsac", "pendulum_novel", "gru")])
def test_each_stored_state_is_the_one_the_acting_network_reaches_from_its_episodes_start(algo, env, rnn):
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
    )  # every step's state stored
    with trajrl.build(cfg) as pipe:
        pipe.collector.start()
        wait_for_frames(pipe, 2500)  # the storage has wrapped around
        pipe.collector.async_shutdown()
        net = pipe.algo.qnet if algo == "r2d2" else pipe.algo.actor  # whose state the policy stores
        keys = net.state_keys
        steps = stored(pipe.buffer)
        starts, lengths = find_runs(steps.get(TRAJ_KEY))
        assert starts.numel() > 5 and (starts + lengths > len(pipe.buffer.storage)).any()  # one run wraps around
        for start, length in zip(starts.tolist(), lengths.tolist()):
            _, _, index = run_steps(torch.tensor([start]), torch.tensor([length]), len(pipe.buffer.storage))
            run = steps[index]
            # Brute force: one step at a time from the state at the run's first step (the acting
            # network is the learner's, unchanged: no update was made).
            state = tuple(run.get(key)[0].unsqueeze(1) for key in keys)
            with torch.no_grad():
                for t in range(length):
                    for key, s in zip(keys, state):
                        torch.testing.assert_close(run.get(key)[t], s[:, 0], rtol=1e-4, atol=1e-5)
                    _, after = net.rnn(
                        net.encoder(run.get("observation")[t].view(1, 1, -1)), state if rnn == "lstm" else state[0]
                    )
                    state = after if rnn == "lstm" else (after,)
        starts_of_episodes = steps.get("is_init").reshape(-1)
        assert steps.get(keys[0])[starts_of_episodes].abs().max() == 0  # zero where an episode starts
        assert steps.get(keys[0])[~starts_of_episodes].abs().max() > 0


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


# sync: the same EpisodeCollector writing in the learner's process: in the slow run; recurrent SAC-discrete
# with its LSTM and sampler.state_every=auto under multi_async: the default run
@pytest.mark.parametrize(
    "collector, algo",
    [pytest.param("sync", "r2d2", marks=pytest.mark.slow), ("multi_async", "r2d2"), ("multi_async", "rsac")],
)
def test_with_state_every_slices_start_only_where_the_state_is_kept_and_from_the_acting_policys_state(collector, algo):
    """``sampler.state_every`` (7 for the recurrent DQN; the default's ``auto`` for recurrent
    SAC-discrete: slice_len - burn_in): the storage holds no state; each sampled slice starts at
    a multiple of k steps into its episode, from the state the acting policy had there (what
    its network, unchanged, reaches from the episode's first step), also after the storage
    wrapped around and when worker processes wrote the steps."""
    from trajrl.configuration.compose import validate

    cfg = trajrl.compose(
        [
            f"collector={collector}",
            "debug=smoke",
            f"algo={algo}",
            "storage.capacity=1000",
            "+env.kwargs.max_episode_steps=120",
            *(["sampler.state_every=7"] if algo == "r2d2" else []),
        ]
    )
    every = validate(cfg).sampler.state_every
    assert every == (7 if algo == "r2d2" else cfg.sampler.slice_len - cfg.sampler.burn_in), every
    with trajrl.build(cfg) as pipe:
        pipe.collector.start()
        wait_for_frames(pipe, 1600)  # the storage has wrapped around
        pipe.collector.async_shutdown()
        net = pipe.algo.qnet if algo == "r2d2" else pipe.algo.actor  # whose state the policy stores
        steps = stored(pipe.buffer)
        assert not any(key in steps.keys() for key in net.state_keys)  # kept apart, every k steps
        checked = mid_episode = 0
        for _ in range(200):  # until enough slices start mid-episode (k=30: in the longer episodes only)
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
                    torch.testing.assert_close(
                        batch.get(key)[row, 0],
                        s[:, 0],
                        rtol=1e-4,
                        atol=1e-5,
                        msg=lambda m, key=key, at=at: (
                            f"{key} of a slice starting at step {at}, not the acting one's: {m}"
                        ),
                    )
                checked += 1
                mid_episode += at > 0
            if checked > 100 and mid_episode > 20:
                break
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
