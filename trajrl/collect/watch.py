"""Supervision of a started collector: noticing that it failed, and why, and shutting it down."""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import threading
import time

from torchrl.collectors import BaseCollector, MultiCollector

from trajrl.base import internals
from trajrl.base.errors import BadStep, CollectorFailed, CollectorStalled
from trajrl.collect.faults import FaultLog

STUCK_SHUTDOWN_S = 2.0  # a stalled collector's workers: TorchRL's shutdown timeout (its default otherwise)


def shutdown_args(collector: BaseCollector, stuck: bool) -> dict:
    """TorchRL's shutdown arguments: a collector whose workers are stuck (it stalled) gets
    ``STUCK_SHUTDOWN_S`` as its timeout (TorchRL waits 80 % of the timeout for the workers to
    stop by themselves, then terminates them; its default timeout is 10 s); the others get
    TorchRL's default."""
    return {"timeout": STUCK_SHUTDOWN_S} if stuck and isinstance(collector, MultiCollector) else {}


def close_collector(collector: BaseCollector, stuck: bool = False) -> None:
    """Shut a collector down, its weight-sync schemes included (``stuck``: it stalled).

    TorchRL leaves multi-process collectors' ``SharedMemWeightSyncScheme`` to its
    ``__del__``, which puts to a multiprocessing queue; run at interpreter exit,
    that put can wait forever on its feeder thread (a process that never exits).
    """
    try:
        collector.shutdown(**shutdown_args(collector, stuck))
    except Exception as err:  # already shut down, or a worker died: nothing left to release
        logging.getLogger("trajrl").debug("collector shutdown: %s", err)
    for scheme in internals.weight_sync_schemes(collector).values():
        scheme.shutdown()
    end_workers(collector)


def end_workers(collector: BaseCollector, wait_s: float = 5.0) -> None:
    """Make sure that a shut-down collector's worker processes have ended: TorchRL asks
    them to stop, and a worker in the middle of a rollout (or waiting on the buffer's
    lock, or stuck in its environment) may not have yet; those still running ``wait_s``
    after this call (one wait for them all, not one each) are killed."""
    procs = list(getattr(collector, "procs", None) or [])
    deadline = time.monotonic() + wait_s
    for proc in procs:
        with contextlib.suppress(ValueError):  # closed: it has ended
            proc.join(max(0.0, deadline - time.monotonic()))
    for proc in procs:
        with contextlib.suppress(ValueError):
            if proc.is_alive():
                proc.kill()
                proc.join(wait_s)


class CollectorWatch:
    """Notices that a started collector failed, and why.

    TorchRL's single-process collector runs in a thread whose exception is only
    printed (``async_shutdown`` does not re-raise it); this catches it through
    ``threading.excepthook`` while the watch is open. ``AsyncBatchedCollector``
    keeps its writer's error; a dead worker process shows in its exit code.
    """

    def __init__(self, collector: BaseCollector, faults: FaultLog | None = None):
        self.collector, self.faults = collector, faults
        self.thread_error: BaseException | None = None
        self._previous_hook = threading.excepthook
        threading.excepthook = self._hook

    def _hook(self, args) -> None:
        """The collector thread's exception is kept for the run to report in one line (with
        ``TRAJRL_FULL_ERROR=1``, the CLI's ``HYDRA_FULL_ERROR=1``, its traceback is printed too);
        another thread's goes to the hook there was."""
        if args.thread is internals.collector_thread(self.collector):
            self.thread_error = args.exc_value
            if os.environ.get("TRAJRL_FULL_ERROR") != "1":
                return
        self._previous_hook(args)

    def error(self) -> BaseException | None:
        """Why the collector failed (None: it has not), naming the environment that
        raised past ``collector.max_restarts`` if that is what ended it."""
        error = self._error()
        return (self.fatal_fault() or error) if error is not None else None

    def fatal_fault(self) -> CollectorFailed | None:
        """The fault log's first fault that ends the run (None: none did): an environment that raised
        past ``collector.max_restarts``, a bad step (``collector.bad_steps=stop``), or a worker's write
        the replay buffer refused."""
        gave_up = [entry for entry in self.faults.read() if entry.get("gave_up")] if self.faults else []
        if not gave_up:
            return None
        entry = gave_up[0]
        if entry["what"] == "bad_step":  # BadStep's own line says what would work
            cause = entry["cause"].removeprefix(f"{BadStep.__name__}: ")
            return CollectorFailed(f"collector environment {entry['slot']}{self.worker_of(entry['pid'])}: {cause}")
        if entry["what"] == "refused":  # a worker's write into the buffer (trajrl.replay.incoming.WholeEpisodes)
            worker = self.worker_of(entry["pid"]).strip(" ()") or "a collector worker"
            return CollectorFailed(f"{worker}'s write into the replay buffer was refused: {entry['cause']}")
        errors, window = entry["restarts"], entry["window_s"]
        limit = (
            f"its error {errors} within {window:g} s, past collector.max_restarts={errors - 1} "
            f"(collector.restart_window_s={window:g}): raise them to keep going through more faults"
            if errors > 1
            else "collector.max_restarts=0: the first error ends the run"
        )
        return CollectorFailed(f"collector environment {entry['slot']} raised {entry['cause']} ({limit})")

    def worker_of(self, pid: int) -> str:
        """`` (worker i)`` for the worker process ``pid`` ("" where no worker of this collector has it)."""
        for index, proc in enumerate(getattr(self.collector, "procs", None) or []):
            if proc.pid == pid:
                return f" (worker {index})"
        return ""

    def dead_worker(self) -> int | None:
        """The index of a worker process that has died (None: none has, or it has no workers)."""
        for index, proc in enumerate(getattr(self.collector, "procs", None) or []):
            try:
                if not proc.is_alive():
                    return index
            except ValueError:  # closed by TorchRL after a worker failed
                return index
        return None

    def first_death(self) -> CollectorFailed | None:
        """The worker whose death made TorchRL end the others (None: no worker has exited). TorchRL
        ends them with SIGTERM, so the one that died otherwise (another exit code) comes first."""
        dead = []
        for index, proc in enumerate(getattr(self.collector, "procs", None) or []):
            with contextlib.suppress(ValueError):  # closed: its exit code is gone
                if not proc.is_alive():
                    dead.append((proc.exitcode == -signal.SIGTERM, index, proc.exitcode))
        if not dead:
            return None
        _, index, code = min(dead)
        return CollectorFailed(f"collector worker {index} died (exit code {code})")

    def _error(self) -> BaseException | None:
        if self.thread_error is not None:
            return self.thread_error
        replay_error = internals.collector_replay_error(self.collector)
        if replay_error is not None:
            return replay_error
        thread = internals.collector_thread(self.collector)
        if thread is not None and not thread.is_alive() and not internals.collector_stopping(self.collector):
            return CollectorFailed("the collector's background thread stopped on its own")
        for index, proc in enumerate(getattr(self.collector, "procs", None) or []):
            try:
                alive = proc.is_alive()
            except ValueError:  # closed: TorchRL found a failed worker and shut them all down
                return CollectorFailed("collector workers shut down by TorchRL after one of them failed")
            if not alive:
                return CollectorFailed(f"collector worker {index} died (exit code {proc.exitcode})")
        return None

    def close(self) -> None:
        if threading.excepthook == self._hook:
            threading.excepthook = self._previous_hook


def collection_failed(error: BaseException, noticed: BaseException | None = None) -> CollectorFailed:
    """The run's error for a collector that failed with ``error`` (and its root cause);
    ``noticed``: what the loop ran into because of it (TorchRL's report, if any)."""
    root = error
    while root.__cause__ is not None:  # TorchRL wraps the real cause
        root = root.__cause__
    cause = f"{type(error).__name__}: {error}" + (f" <- {type(root).__name__}: {root}" if root is not error else "")
    if noticed is not None:
        cause += f" ({type(noticed).__name__}: {str(noticed).splitlines()[0] if str(noticed) else ''})"
    return CollectorFailed(f"collection failed: {cause}")


def death_behind(error: Exception, watch: CollectorWatch) -> BaseException:
    """``error``, or the worker death behind it where TorchRL lost that: on a dead worker it
    terminates the others and closes each 0.1 s later, which raises this ValueError in place
    of its own report where one is still exiting (a loaded machine)."""
    if isinstance(error, ValueError) and str(error).startswith("Cannot close a process while it is still running"):
        return watch.first_death() or error
    return error


def stalled(watch: CollectorWatch, timeout: float, what: str) -> CollectorFailed:
    """The error of a collector that gave nothing for ``timeout`` seconds, or, if a
    worker has died (e.g. holding the buffer's write lock), of that death. Made when
    the time is up, before anything is shut down (shutting down ends workers too)."""
    dropped = watch.faults.dropped_bad_steps() if watch.faults is not None else []
    stall = CollectorStalled(
        f"{what} for {timeout:g} s (loop.stall_timeout_s={timeout:g}): an environment is stuck, "
        "or slower than that; raise loop.stall_timeout_s if it is only slow"
        + (
            f" ({len(dropped):,} episodes were dropped for a bad step, collector.bad_steps=drop; the last: "
            f"{dropped[-1]['cause']})"
            if dropped
            else ""
        )
    )
    died = watch.error()
    return collection_failed(died, stall) if died is not None else stall
