"""Each guard against a TorchRL trap, next to the trap it guards (shown without the guard)."""
import os
import signal
import time

import pytest
import torch

import trajrl
from trajrl.data.audit import audit_storage
from trajrl.factory.collector import CollectorWatch


@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")
def first_error(watch: CollectorWatch, timeout: float):
    """The watch's error, waiting up to ``timeout`` seconds for one."""
    deadline = time.monotonic() + timeout
    while watch.error() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    return watch.error()


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
        finally:
            watch.close()
        assert error is not None and "worker 1 died" in str(error) and "-9" in str(error)


def test_padded_writes_with_clashing_ids_merge_episodes_unless_ids_are_renewed():
    from test_data import episodes, padded_buffer, zero_padded
    from trajrl.data.padded import PaddedToFlat

    first, second = zero_padded(episodes([3, 5], first_id=0)), zero_padded(episodes([4, 2], first_id=1))
    guarded = padded_buffer()
    unguarded = padded_buffer()
    unguarded._transform[0].storage = None  # PaddedToFlat without the storage: no id check
    assert isinstance(unguarded._transform[0], PaddedToFlat)
    for buffer in (guarded, unguarded):
        buffer.extend(first)
        buffer.extend(second)
    assert not any(audit_storage(guarded[:], full=False).values())
    # without fresh ids, the second write's episode 1 continues the stored episode 1: two episodes stitched
    assert audit_storage(unguarded[:], full=False)["done_inside_episode"] == 1
    assert torch.equal(guarded[:]["observation"], unguarded[:]["observation"])
