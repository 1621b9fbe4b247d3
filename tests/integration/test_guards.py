"""Each guard against a TorchRL trap, next to the trap it guards (shown without the guard)."""

import os
import signal
import time

import pytest
import torch
from tensordict import TensorDict

import trajrl
from trajrl.base.keys import TRAJ_KEY
from trajrl.collect.watch import CollectorWatch
from trajrl.replay.audit import audit_storage
from trajrl.replay.writer import redo_unfinished_writes


def first_error(watch: CollectorWatch, timeout: float):
    """The watch's error, waiting up to ``timeout`` seconds for one."""
    deadline = time.monotonic() + timeout
    while watch.error() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    return watch.error()


@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")
def test_a_collector_thread_exception_is_swallowed_by_torchrl_but_caught_by_the_watch(monkeypatch):
    cfg = trajrl.compose(["collector=sync", "debug=smoke"])
    with trajrl.build(cfg) as pipe:

        def explode(*args, **kwargs):
            raise RuntimeError("boom inside the collector thread")

        monkeypatch.setattr(pipe.collector, "rollout", explode)
        watch = CollectorWatch(pipe.collector)
        try:
            pipe.collector.start()
            error = first_error(watch, timeout=10)
        finally:
            watch.close()
        pipe.collector.async_shutdown()  # the trap: TorchRL itself raises nothing
        assert isinstance(error, RuntimeError) and "boom inside the collector thread" in str(error)


def test_a_killed_worker_is_noticed_at_once():
    cfg = trajrl.compose(["collector=multi_async", "debug=smoke"])
    with trajrl.build(cfg) as pipe:
        watch = CollectorWatch(pipe.collector)
        try:
            pipe.collector.start()
            while pipe.buffer.write_count < 200:
                time.sleep(0.05)
            assert watch.error() is None
            os.kill(pipe.collector.procs[1].pid, signal.SIGKILL)
            error = first_error(watch, timeout=5)
            # The write lock, if the kill came inside a write, freed (and that write redone), as the loop does.
            redo_unfinished_writes(pipe.buffer)
            # The trap: TorchRL itself tells the learner nothing. Weights still "push" and
            # the other worker keeps writing, so a loop without the watch trains on.
            written = pipe.buffer.write_count
            pipe.collector.update_policy_weights_(TensorDict.from_module(pipe.policy))
            wait_until(lambda: pipe.buffer.write_count > written + 50, timeout=10)
        finally:
            watch.close()
        assert error is not None and "worker 1 died" in str(error) and "-9" in str(error)


def wait_until(condition, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.05)


def test_episodes_in_flight_at_shutdown_are_dropped_by_torchrl_and_counted_by_trajrl():
    cfg = trajrl.compose(["collector=sync", "debug=smoke"])
    with trajrl.build(cfg) as pipe:
        pipe.collector.start()
        wait_until(lambda: pipe.buffer.write_count > 300, timeout=30)
        pipe.collector.async_shutdown()
        stored, stepped = pipe.buffer.write_count, pipe.counters.frames
        # The trap: write_count (TorchRL's only count) says nothing of the frames it dropped.
        assert stored == len(pipe.buffer)
        # The guard: every environment step is counted where it happens; the loop
        # reports the difference as buffer/frames_in_flight_dropped (tests/cli/test_cli.py).
        assert stepped > stored


@pytest.mark.parametrize("collector", ["sync", "multi_sync"])
def test_collector_reset_and_reset_at_each_iter_keep_episodes_whole_in_this_torchrl(collector):
    """Pins TorchRL 0.14.1: ``reset()`` no longer rebases trajectory ids, and
    ``reset_at_each_iter=True`` with ``trajs_per_batch`` drops, rather than stitches,
    the episode a reset cuts. trajrl calls neither; if an upgrade brings the traps
    back, this fails and the audit (below) names what broke."""
    cfg = trajrl.compose([f"collector={collector}", "debug=smoke", "storage.capacity=10000"])
    with trajrl.build(cfg) as pipe:
        batches = iter(pipe.collector)
        for _ in range(3):
            next(batches)
        pipe.collector.reset()
        batches = iter(pipe.collector)
        for _ in range(3):
            next(batches)
        counts = audit_storage(pipe.buffer[:], full=False)
        assert not any(counts.values()), counts
    from torchrl.collectors import Collector

    with trajrl.build(cfg) as pipe:
        resetting = Collector(
            pipe.env_fn,
            pipe.policy,
            frames_per_batch=50,
            total_frames=1500,
            trajs_per_batch=2,
            traj_format="cat",
            reset_at_each_iter=True,
            replay_buffer=pipe.buffer,
        )
        for _ in resetting:
            pass
        resetting.shutdown()
        counts = audit_storage(pipe.buffer[:], full=False)
        assert len(pipe.buffer) > 500 and not any(counts.values()), counts


def test_the_audit_names_an_episode_stitched_from_two():
    """What a per-batch reset used to do: two episodes under one id, the first cut
    (no done). TorchRL's SliceSampler would sample slices across the seam."""
    from helpers import episodes

    stitched = episodes([6, 5, 4])
    stitched[TRAJ_KEY][6:11] = 0
    stitched["next", "done"][5] = False
    counts = audit_storage(stitched, full=False)
    assert counts["steps_not_consecutive"] == 1 and counts["observation_not_chained"] == 1  # at the seam
    assert sum(counts.values()) == 2


def test_writes_with_clashing_ids_merge_episodes_unless_the_writer_renews_ids():
    from helpers import episodes, padded_buffer, zero_padded
    from torchrl.data import LazyTensorStorage, RoundRobinWriter, TensorDictReplayBuffer

    from trajrl.base.keys import MASK_KEY
    from trajrl.replay.writer import EpisodeWriter

    first, second = zero_padded(episodes([3, 5], first_id=0)), zero_padded(episodes([4, 2], first_id=1))
    guarded = padded_buffer()
    assert isinstance(guarded._writer, EpisodeWriter)
    unguarded = TensorDictReplayBuffer(storage=LazyTensorStorage(1000), writer=RoundRobinWriter(), batch_size=4)
    for batch in (first, second):
        guarded.extend(batch)
        unguarded.extend(batch[batch[MASK_KEY]].exclude(MASK_KEY))  # TorchRL's writer: ids stored as written
    assert not any(audit_storage(guarded[:], full=False).values())
    # without fresh ids, the second write's episode 1 continues the stored episode 1: two episodes stitched
    assert audit_storage(unguarded[:], full=False)["done_inside_episode"] == 1
    assert torch.equal(guarded[:]["observation"], unguarded[:]["observation"])
