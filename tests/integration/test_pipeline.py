"""Every collector x sampler pair, built through the Python API on real TorchRL objects:
the buffer holds complete episodes and every sample stays inside one episode.

Episodes end by termination and by a 20-step time limit; the storage wraps around and
is written over whole (each of its cells twice); slices are shorter (12) and longer (16)
than many episodes (longer than the 20-step limit is refused as a configuration error).
The four slice samplers x five collectors audit 20 x 160 batches x 32 slices = 102,400
slices, with 0 violations allowed (each collector with the default sampler and each
sampler with the default collector by default; every pair with -m slow)."""

import math
import time

import pytest
from helpers import collector_sampler_pairs, wait_for_frames

import trajrl
from trajrl.configuration.settings import LOCAL_COLLECTORS
from trajrl.replay.audit import audit_batch, audit_storage

SAMPLERS = {  # name -> overrides
    "slice": ["sampler=slice", "sampler.slice_len=12"],
    "slice_by_episode": ["sampler=slice", "sampler.slice_len=16", "sampler.weighting=episode"],
    "slice_without_replacement": ["sampler=slice_without_replacement", "sampler.slice_len=16"],
    "prioritized_slice": ["sampler=prioritized_slice", "sampler.slice_len=12"],
    "episode": ["sampler=episode"],
    "random": ["sampler=random"],
}
CAPACITY = 600
FRAMES = 2 * CAPACITY  # the storage wraps around: what it holds was all written after its first pass
MAX_STEPS = 20  # short enough that the episodes in a wrapped storage always include truncated ones
TIME_LIMIT = f"+env.kwargs.max_episode_steps={MAX_STEPS}"


def no_violations(counts):
    return {name: n for name, n in counts.items() if n}


@pytest.mark.parametrize("collector, sampler", collector_sampler_pairs(LOCAL_COLLECTORS, SAMPLERS))
def test_collector_writes_complete_episodes_and_samples_stay_inside_them(collector, sampler):
    cfg = trajrl.compose(
        [
            f"collector={collector}",
            "debug=smoke",
            f"storage.capacity={CAPACITY}",
            TIME_LIMIT,
            "sampler.slices_per_batch=32" if "slice" in sampler else "seed=0",
            *SAMPLERS[sampler],
        ]
    )
    with trajrl.build(cfg) as pipe:
        assert pipe.buffer is pipe.sequences.buffer
        pipe.collector.start()
        try:
            wait_for_frames(pipe, CAPACITY // 2)
            for _ in range(10):  # sampling while the collector writes
                assert no_violations(audit_batch(pipe.sequences.sample())) == {}
            wait_for_frames(pipe, FRAMES)
        finally:
            pipe.collector.async_shutdown()
        # Frame accounting: stepped = stored + in flight, and what was in flight fits
        # in what the collectors hold (a rollout chunk and trajs_per_batch episodes each).
        in_flight = pipe.counters.frames - pipe.buffer.write_count
        workers, trajs = cfg.collector.num_workers, cfg.trajs_per_batch
        assert 0 <= in_flight <= workers * (cfg.collector.frames_per_batch + trajs * MAX_STEPS)
        assert len(pipe.buffer) == CAPACITY
        stored = pipe.buffer[:]
        assert no_violations(audit_storage(stored, full=True)) == {}
        ends = stored["next", "done"]
        assert (stored["next", "terminated"] & ends).any() and (stored["next", "truncated"] & ends).any()
        for _ in range(150):
            batch = pipe.sequences.sample()
            assert no_violations(audit_batch(batch)) == {}
            if "slice" in sampler:  # [slices_per_batch, slice_len], short episodes padded; without
                # replacement, the last batch of a pass over the episodes may hold fewer slices
                assert batch.shape[1] == cfg.sampler.slice_len
                assert batch.shape[0] == 32 or (sampler == "slice_without_replacement" and batch.shape[0] < 32)
            elif sampler == "episode":  # whole episodes: the last valid step of each row ends it
                last = batch.get(("collector", "mask")).sum(-1) - 1
                assert batch["next", "done"].squeeze(-1).gather(1, last.unsqueeze(-1)).all()
        stats = pipe.algo.update(batch)
        pipe.sequences.update_priority(batch)
        assert all(math.isfinite(v) for v in stats.values()) and stats["learn_frac"] > 0


# async (one worker) and multi_sync push through the same shared-memory scheme into the same
# worker collector as multi_async (trajrl/factory/collector.py: _workers): in the slow run
@pytest.mark.parametrize(
    "collector",
    [
        pytest.param(kind, marks=pytest.mark.slow) if kind in ("async", "multi_sync") else kind
        for kind in LOCAL_COLLECTORS
    ],
)
def test_weights_and_epsilon_pushed_by_the_loop_reach_the_collector(collector):
    """After a push, new steps are acted by the learner's network with its epsilon."""
    import torch
    from tensordict import TensorDict

    cfg = trajrl.compose([f"collector={collector}", "debug=smoke", "algo=r2d2", "storage.capacity=4000"])
    with trajrl.build(cfg) as pipe:
        pipe.collector.start()
        try:
            wait_for_frames(pipe, 300)
            with torch.no_grad():  # a network that always prefers action 1, acting greedily
                pipe.algo.qnet.head.weight.zero_()
                pipe.algo.qnet.head.bias.copy_(torch.tensor([0.0, 1.0]))
                pipe.exploration.eps.fill_(0.0)
            pipe.acting.pull()  # the loop's push: the learner's weights into the acting copy, then to the collector
            pipe.collector.update_policy_weights_(TensorDict.from_module(pipe.policy))
            pushed_at = pipe.buffer.write_count
            wait_for_frames(pipe, pushed_at + 800)
        finally:
            pipe.collector.async_shutdown()
        written = pipe.buffer.write_count
        recent = pipe.buffer.storage[torch.arange(written - 300, written) % 4000]
        assert (recent["action"] == 1).float().mean() == 1.0


VECTORS = {  # name -> (collector, vectorization)
    **{kind: (kind, "sync") for kind in LOCAL_COLLECTORS},
    "sync_over_async_vector": ("sync", "async"),
}
# async and multi_sync run the same worker collector as multi_async: in the slow run
SLOW_VECTORS = ("async", "multi_sync", "sync_over_async_vector")


@pytest.mark.parametrize(
    "case", [pytest.param(case, marks=pytest.mark.slow) if case in SLOW_VECTORS else case for case in VECTORS]
)
def test_vector_envs_store_each_environments_episodes_whole(case):
    """env.num_envs=3 with every collector kind: the storage wraps, holds only complete
    episodes whose steps chain (no step of one environment inside another's episode),
    and the frame counters close against what was stored."""
    collector, vectorization = VECTORS[case]
    cfg = trajrl.compose(
        [
            f"collector={collector}",
            "debug=smoke",
            f"storage.capacity={CAPACITY}",
            TIME_LIMIT,
            "env.num_envs=3",
            f"env.vectorization={vectorization}",
            "sampler.slice_len=12",
        ]
    )
    with trajrl.build(cfg) as pipe:
        pipe.collector.start()
        try:
            wait_for_frames(pipe, FRAMES)
            for _ in range(20):
                assert no_violations(audit_batch(pipe.sequences.sample())) == {}
        finally:
            pipe.collector.async_shutdown()
        stored = pipe.buffer[:]
        assert no_violations(audit_storage(stored, full=True)) == {}
        slots = pipe.counters.snapshot()
        per_slot = slots[:, 0]
        assert (per_slot > 0).all(), "every environment stepped"
        if collector != "async_batched":  # one vector of 3 per slot: its frames come 3 at a time
            assert (per_slot % 3 == 0).all()
        else:  # 3 single environments per worker
            assert slots.shape[0] == 3 * cfg.collector.num_workers
        in_flight = pipe.counters.frames - pipe.buffer.write_count
        assert 0 <= in_flight <= slots.shape[0] * 3 * (cfg.collector.frames_per_batch + cfg.trajs_per_batch * MAX_STEPS)


@pytest.mark.parametrize("collector", ["sync", "multi_async"])
def test_closed_gate_holds_every_environment_and_opening_it_resumes(collector):
    """The loop pauses collection by closing the counters' gate: environments stop at
    their next step (no frame counted while it is closed), and go on when it opens."""
    cfg = trajrl.compose([f"collector={collector}", "debug=smoke", "env.num_envs=2"])
    with trajrl.build(cfg) as pipe:
        pipe.collector.start()
        try:
            wait_for_frames(pipe, 200)
            pipe.counters.close_gate()
            time.sleep(0.5)  # each environment finishes the step it is in
            held = pipe.counters.frames
            time.sleep(1.0)
            assert pipe.counters.frames == held
            pipe.counters.open_gate()
            deadline = time.monotonic() + 30
            while pipe.counters.frames == held:
                assert time.monotonic() < deadline, "collection did not resume"
                time.sleep(0.05)
        finally:
            pipe.counters.open_gate()
            pipe.collector.async_shutdown()


def test_each_environment_explores_with_its_own_epsilon():
    """algo.eps_spread=7 over 2 workers x 2 environments, epsilon 0.4: environment i of 4 explores
    with 0.4^(1 + 7 i / 3) (0.4, 0.047, 0.0056, 0.0007), so half of those steps (2 actions) are not
    the greedy one: about 11 % of the first worker's steps and 0.2 % of the second's. The same
    run without the spread: 20 % of each."""

    from trajrl.collect.counters import WorkerCounters as C

    rates = {}
    for spread in (7, 0):
        cfg = trajrl.compose(
            [
                "collector=multi_async",
                "debug=smoke",
                "algo=r2d2",
                "env.num_envs=2",
                "algo.eps_start=0.4",
                "algo.eps_end=0.4",
                f"algo.eps_spread={spread}",
                "storage.capacity=4000",
            ]
        )
        with trajrl.build(cfg) as pipe:
            pipe.collector.start()
            try:
                wait_for_frames(pipe, 2000)
            finally:
                pipe.collector.async_shutdown()
            counts = pipe.counters.snapshot()
            rates[spread] = (counts[:, C.NOT_GREEDY] / counts[:, C.FRAMES]).tolist()
            assert "worker" not in pipe.buffer[:].keys()  # the slot is read, not stored
    (first, second), plain = rates[7], rates[0]
    assert 0.08 < first < 0.15 and second < 0.01, rates
    assert all(0.16 < rate < 0.24 for rate in plain), rates
