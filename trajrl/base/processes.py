"""The processes the CLI starts beside its own: collector workers forked from a fork server,
the fork server, and multiprocessing's resource tracker; how they start and how they end;
and how the CLI's own process ends (``exit_now``).

multiprocessing leaves its fork server and resource tracker running until the process that
started them has exited (each stops when the last holder of its pipe closes it), so without
``end_child_processes`` they would outlive ``python -m trajrl`` by a second or two: a script
that runs trajrl and then looks for stray processes, or starts the next job, would see them.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import signal
import sys
import threading
import time
from multiprocessing import forkserver
from typing import NoReturn

from trajrl.base import internals


def workers_from_a_fork_server() -> None:
    """Collector workers are forked from a server process that imported what they run once
    (``trajrl.factory``, ``trajrl.collect.forkserver``) rather than spawned, each importing torch and TorchRL
    anew: a smoke run with two workers takes about a fifth less CPU (``scripts/bench_pipeline.py``,
    part ``startup``). Unless the start method is already set (TorchRL's own default is ``spawn``)."""
    if (
        multiprocessing.get_start_method(allow_none=True) is None
        and "forkserver" in multiprocessing.get_all_start_methods()
    ):  # not on Windows
        multiprocessing.set_start_method("forkserver")
        multiprocessing.set_forkserver_preload(["trajrl.factory", "trajrl.collect.forkserver"])


def start_fork_server() -> None:
    """Start the fork server now, where workers come from one: it imports what they run
    while this process imports the learner (the two imports overlap on two cores)."""
    if multiprocessing.get_start_method(allow_none=True) == "forkserver":
        forkserver.ensure_running()


def end_child_processes(wait_s: float = 5.0) -> None:
    """End every process multiprocessing started for this one, and return once they have
    ended: collector workers still running (a failure may leave some), then the fork server,
    then the resource tracker (each of the two stops once no process holds its pipe open: it
    outlives the workers, which hold both). Each is killed if it has not ended within ``wait_s``."""
    workers = multiprocessing.active_children()  # also reaps the ones that have ended
    for worker in workers:
        worker.terminate()
    for worker in workers:
        worker.join(wait_s)
        if worker.exitcode is None:
            worker.kill()
            worker.join()
    # what multiprocessing does at exit, done now: semaphores still open are unlinked and their
    # names struck off the resource tracker's list before it stops (else it unlinks them, as leaked)
    internals.run_multiprocessing_finalizers()
    # the fork server holds nothing to clean up: ended at once, not after its ~1 s of tearing down torch
    internals.end_fork_server(lambda pid, pipe: close_and_wait(pid, pipe, wait_s, signal.SIGTERM))
    internals.end_resource_tracker(lambda pid, pipe: close_and_wait(pid, pipe, wait_s))


def close_and_wait(pid: int | None, pipe: int | None, wait_s: float, signum: int | None = None) -> None:
    """Close this process's end of ``pipe`` (the child stops when it reads its end) and send
    ``signum`` to the child ``pid`` if given, then wait for it to exit, killing it after ``wait_s``."""
    if pipe is not None:
        os.close(pipe)
    if pid is None:
        return
    if signum is not None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signum)
    deadline = time.monotonic() + wait_s
    try:
        while os.waitpid(pid, os.WNOHANG) == (0, 0):
            if time.monotonic() > deadline:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                return
            time.sleep(0.01)
    except ChildProcessError:  # already waited for
        pass


def exit_now(code: int) -> NoReturn:
    """End this process with exit ``code`` as the interpreter's own exit would, less its last
    step: wait for the threads that are not daemons, run the exit handlers (logging's, wandb's,
    multiprocessing's, ...: ``atexit``'s private runner, the one public way being the exit
    itself), flush stdout and stderr, then ``os._exit``. What is skipped, the modules torn
    down one by one, costs about 0.7 s of CPU with torch and TorchRL imported and holds
    nothing of a run's (every file is saved and closed by then)."""
    for thread in threading.enumerate():
        if thread is not threading.current_thread() and not thread.daemon:
            thread.join()
    internals.run_exit_handlers()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):  # a closed pipe: nothing more can be said
            stream.flush()
    os._exit(code)
