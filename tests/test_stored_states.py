"""The recurrent state stored with every step, recomputed with the learner's current
network (``algo.refresh_states_every``): it is the state that network reaches from the
start of each stored episode, also across the storage's wrap-around."""
from functools import partial

import pytest
import torch

import trajrl
from trajrl.algos.networks import states_along
from trajrl.replay.episodes import TRAJ_KEY, find_runs, run_steps
from trajrl.replay.states import refresh_states
from helpers import wait_for_frames


def stored(buffer):
    return buffer.storage[:len(buffer.storage)]


@pytest.mark.parametrize("algo, env, rnn", [("r2d2", "cartpole_novel", "lstm"), ("rsac", "pendulum_novel", "gru")])
def test_refreshed_states_are_the_ones_the_current_network_reaches_from_each_episode_start(algo, env, rnn):
    cfg = trajrl.compose([f"algo={algo}", f"env={env}", f"algo.rnn={rnn}", "collector=sync", "debug=smoke",
                          "storage.capacity=1500", "+env.kwargs.max_episode_steps=120"])
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
                _, after = net.rnn(net.encoder(run.get("observation")[t].view(1, 1, -1)),
                                   state if rnn == "lstm" else state[0])
                state = after if rnn == "lstm" else (after,)
        assert (acted.get(keys[0]) - steps.get(keys[0])).abs().max() > 1e-3
        starts_of_episodes = steps.get("is_init").reshape(-1)
        assert steps.get(keys[0])[starts_of_episodes].abs().max() == 0  # zero where an episode starts


def test_a_run_refreshes_its_stored_states_on_the_configured_cadence(tmp_path):
    cfg = trajrl.compose(["collector=multi_async", "debug=smoke", "algo.refresh_states_every=20",
                          "total_frames=3000", "loop.log_every_frames=1000"])
    final = trajrl.train(cfg, run_dir=tmp_path / "run")
    assert final["buffer/state_refreshes"] == final["train/updates"] // 20 > 0
