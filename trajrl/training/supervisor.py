"""The collector, as a loop sees it: started, its weights pushed, paused while the learner
catches up, replaced after a failure (up to ``collector.max_restarts``, with what it had in
flight counted lost), its failures and stalls reported with their cause, shut down on
every way out."""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Iterator

import torch
from tensordict import TensorDict, TensorDictBase
from torchrl.collectors import AsyncBatchedCollector, BaseCollector, MultiCollector

from trajrl.algos.networks import CpuCopies, PolicyVersion
from trajrl.base.errors import CollectorFailed, CollectorStalled, RunInterrupted
from trajrl.base.signals import raise_after
from trajrl.collect.counters import WorkerCounters
from trajrl.collect.faults import RestartLimit
from trajrl.collect.ray_actors import RayEpisodes
from trajrl.collect.watch import (
    CollectorWatch,
    close_collector,
    collection_failed,
    death_behind,
    end_workers,
    shutdown_args,
    stalled,
)
from trajrl.replay.writer import redo_unfinished_writes

log = logging.getLogger("trajrl")


def pauses(collector: BaseCollector) -> bool:
    """Whether ``collector.pause()`` pauses it: TorchRL's multi-process and batched
    collectors and trajrl's Ray one do; TorchRL's single-process ``Collector`` does not."""
    return isinstance(collector, (MultiCollector, AsyncBatchedCollector, RayEpisodes))


class CollectorSupervisor:
    """Runs a collector for a loop, and replaces it when it fails (watching it for
    failures from when the supervisor is made until ``running()`` ends).

    With ``buffer`` the collector writes into it in the background (``start()``, the
    off-policy loop): ``check(frames)`` says whether it failed or stalled. Without, the loop
    takes its batches (``next_batch()``, the episodic loop). ``restart(failure, handed_over)``
    starts a new collector (``new_collector``) with the current weights, or ends the run with
    ``failure`` past ``restart_limit``."""

    def __init__(
        self,
        collector: BaseCollector,
        policy: torch.nn.Module,
        stall_timeout_s: float,
        *,
        buffer=None,
        acting: CpuCopies | None = None,
        version: PolicyVersion | None = None,
        counters: WorkerCounters | None = None,
        new_collector: Callable[[int], BaseCollector] | None = None,
        restart_limit: RestartLimit | None = None,
        collector_at: Callable[[int], BaseCollector] | None = None,
    ):
        """``collector_at(frames)``: collection is ordered (``deterministic=true``): the collector is
        iterated in this thread, also where it writes into ``buffer`` (``collect()``: one rollout), and
        ``renew(frames)`` replaces it by ``collector_at(frames)``, seeded for that point of the run."""
        self.collector, self.buffer, self.stall_timeout_s = collector, buffer, stall_timeout_s
        self.collector_at = collector_at
        self.ordered = collector_at is not None
        self.weights = TensorDict.from_module(policy)  # live parameters and buffers (epsilon too)
        self.acting, self.version = acting, version
        self.counters, self.new_collector, self.restart_limit = counters, new_collector, restart_limit
        self.watch = CollectorWatch(collector, counters.fault_log if counters is not None else None)
        # The environments wait at the counters' gate (any collector whose environments
        # count their steps); otherwise at the collector's own pause, where it has one (it
        # waits for the workers to finish their rollouts). A collector the loop iterates
        # stops between batches by itself.
        self.can_pause = buffer is not None and not self.ordered and (counters is not None or pauses(collector))
        self.restarts = 0  # collectors started after a failure
        self.handed_over_before = (0, 0)  # frames and episodes handed over before this collector started
        self.batches: Iterator[TensorDictBase | None] = iter(())  # an iterated collector's
        self.last_frames, self.last_progress = -1, time.monotonic()  # a background collector's last write
        self.paused_s = 0.0  # how long collection waited for the learner

    # ------------------------------------------------------------ its life
    @contextlib.contextmanager
    def running(self, handed_over: tuple[int, int]) -> Iterator[None]:
        """The collector started (``handed_over``: the frames and episodes handed over before it),
        and shut down on every way out. An error that the collector's failure caused (a
        pause it broke) is reported as that failure."""
        try:
            self.start(handed_over)
            yield
        except BaseException as stop:
            failed = None if isinstance(stop, (CollectorFailed, RunInterrupted)) else self.watch.error()
            self.shut_down(stuck=isinstance(stop, CollectorStalled))
            if failed is not None:
                raise collection_failed(failed, stop) from stop
            raise
        finally:
            self.watch.close()
        self.shut_down()

    def start(self, handed_over: tuple[int, int]) -> None:
        """Start collecting (``handed_over``: the frames and episodes handed over before)."""
        self.handed_over_before = handed_over
        if self.buffer is not None and not self.ordered:
            self.collector.start()  # it writes into the buffer in the background
        else:
            self.batches = iter(self.collector)
        self.last_progress = time.monotonic()

    def shut_down(self, stuck: bool = False) -> None:
        """Stop the collector (``stuck``: it stalled, its workers are not waited for long). One
        writing into the buffer is stopped for good: a worker TorchRL had not stopped yet is
        ended, and a write it was in the middle of is redone whole (so that what the buffer
        holds is what is counted)."""
        if self.buffer is None or self.ordered:
            close_collector(self.collector, stuck)
            return
        with contextlib.suppress(Exception):
            self.collector.async_shutdown(**shutdown_args(self.collector, stuck))
        end_workers(self.collector)
        redo_unfinished_writes(self.buffer)

    def collect(self) -> None:
        """Ordered collection: one rollout of the collector, in this thread, its complete episodes
        written into the buffer before this returns."""
        self.next_batch()

    def renew(self, frames: int) -> None:
        """Ordered collection, at a checkpoint: a collector seeded for ``frames`` in place of this one
        (the episodes under way dropped, counted in flight), as a run resumed there starts with."""
        self.watch.close()
        close_collector(self.collector)
        if self.counters is not None:
            self.counters.set_aside()
        self.collector = self.collector_at(frames)
        self.watch = CollectorWatch(self.collector, self.counters.fault_log if self.counters is not None else None)
        self.batches = iter(self.collector)
        if self.acting is not None:  # the learner's weights, as a resumed run's policy starts with
            self.acting.pull()

    def push_weights(self) -> None:
        """The learner's weights (and a new version stamp) to the collector's policy."""
        if self.acting is not None:
            self.acting.pull()
        if self.version is not None:
            self.version.bump()
        self.collector.update_policy_weights_(self.weights)

    @property
    def policy_version(self) -> int | None:
        """The version of the weights pushed last (None: steps are not stamped)."""
        return int(self.version.version) if self.version is not None else None

    # ------------------------------------------------------------ noticing failures
    def check(self, frames: int) -> None:
        """Raise if the background collector failed, or if ``frames`` (stored so far) has
        not moved for ``loop.stall_timeout_s``."""
        if frames != self.last_frames:
            self.last_frames, self.last_progress = frames, time.monotonic()
        error = self.watch.error()
        if error is not None:
            raise collection_failed(error) from error
        if time.monotonic() - self.last_progress > self.stall_timeout_s:
            raise stalled(self.watch, self.stall_timeout_s, "no frame stored")

    def next_batch(self) -> TensorDictBase | None:
        """The iterated collector's next batch (None: it has stopped), within ``loop.stall_timeout_s``."""
        timeout = self.stall_timeout_s
        with raise_after(timeout, lambda: stalled(self.watch, timeout, "no batch of complete episodes")):
            try:
                return next(self.batches, None)
            except CollectorFailed:  # the stall limit
                raise
            except Exception as error:  # a worker, or the single-process collector's environment
                raise collection_failed(self.watch.fatal_fault() or death_behind(error, self.watch)) from error

    def waiting_on_buffer(self, what: str, learning: bool = False):
        """A block that waits for the buffer's write lock, which a worker killed while
        writing never releases: it ends as soon as a worker is found dead (not while
        ``learning``: an update is never cut in the middle), or after
        ``loop.stall_timeout_s``, naming the dead worker (or the stall, ``what``)."""
        timeout = self.stall_timeout_s

        def died() -> CollectorFailed | None:
            return collection_failed(self.watch.error()) if self.watch.dead_worker() is not None else None

        return raise_after(timeout, lambda: stalled(self.watch, timeout, what), check=None if learning else died)

    # ------------------------------------------------------------ pausing
    @contextlib.contextmanager
    def paused(self) -> Iterator[None]:
        """Collection waits meanwhile, where the collector can pause (a background one)."""
        if not self.can_pause:
            yield
            return
        t0 = time.monotonic()
        if self.counters is not None:
            self.counters.close_gate()
            try:
                yield
            finally:
                self.counters.open_gate()
        else:
            with self.collector.pause():
                yield
        self.paused_s += time.monotonic() - t0
        self.last_progress = time.monotonic()

    # ------------------------------------------------------------ restarts
    def restart(self, failure: CollectorFailed, handed_over: Callable[[], tuple[int, int]]) -> None:
        """A worker died (or the collector failed otherwise): shut the collector down,
        count what its workers had in flight as lost, and start a new one with the
        current weights. ``handed_over()``: the frames and episodes handed over so far,
        asked once the collector is shut down.
        Past ``collector.max_restarts`` for that worker (or without a way to make a
        new collector, or after an environment raised past its own limit) the run
        ends with ``failure``, as it does without restarts."""
        worker = self.watch.dead_worker()
        key = worker if worker is not None else "collector"
        restarts = self.count_restart(key, failure)
        cause = str(self.watch.error() or failure).splitlines()[0]
        self.watch.close()
        close_collector(self.collector)  # its other workers end too
        redone = (
            ", its unfinished write redone" if self.buffer is not None and redo_unfinished_writes(self.buffer) else ""
        )
        now = handed_over()
        lost = self.retire(now)
        if self.counters is not None:
            what = "worker" if worker is not None else "collector"
            cause_lost = f"{cause} ({lost:,} frames in flight lost{redone})"
            self.counters.fault_log.add(what=what, slot=key, time=time.time(), restarts=restarts, cause=cause_lost)
        log.warning(
            "%s; started a new collector (restart %d of %s within collector.restart_window_s), "
            "%d frames in flight lost%s",
            cause,
            restarts,
            "that worker" if worker is not None else "it",
            lost,
            redone,
        )
        self.restarts += 1
        self.collector = self.new_collector(self.restarts)
        self.watch = CollectorWatch(self.collector, self.counters.fault_log if self.counters is not None else None)
        self.start(now)
        self.push_weights()

    def count_restart(self, key: int | str, failure: CollectorFailed) -> int:
        """The restarts of ``key`` (a worker, or the collector) within the window, this one
        included; raises instead where this one is not allowed."""
        past = self.watch.fatal_fault()
        if past is not None:  # an environment raised past its own limit
            raise collection_failed(past)
        if self.new_collector is None or self.restart_limit is None:
            raise failure
        restarts = self.restart_limit.record(key)
        if not self.restart_limit.allows(restarts):
            raise failure
        return restarts

    def retire(self, handed_over: tuple[int, int]) -> int:
        """The frames the stopped collector's environments stepped but never handed over (its
        share: what was handed over since it started), counted lost; 0 without counters."""
        if self.counters is None:
            return 0
        (frames, episodes), (frames_before, episodes_before) = handed_over, self.handed_over_before
        return self.counters.retire(frames - frames_before, episodes - episodes_before)
