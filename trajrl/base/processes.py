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
import logging
import multiprocessing
import os
import signal
import socket
import sys
import threading
import time
from multiprocessing import connection, forkserver, resource_tracker
from typing import NoReturn

from trajrl.base import internals
from trajrl.base.signals import stacks_on_sigusr1


def workers_from_a_fork_server() -> None:
    """Collector workers are forked from a server process that has imported what they run
    (``start_fork_server``; started by multiprocessing, it imports ``trajrl.factory`` and
    ``trajrl.collect.forkserver``) rather than spawned, each importing torch and TorchRL anew
    (``scripts/bench_pipeline.py``, part ``startup``). Unless the start method is already set
    (TorchRL's own default is ``spawn``)."""
    if (
        multiprocessing.get_start_method(allow_none=True) is None
        and "forkserver" in multiprocessing.get_all_start_methods()
    ):  # not on Windows
        multiprocessing.set_start_method("forkserver")
        multiprocessing.set_forkserver_preload(["trajrl.factory", "trajrl.collect.forkserver"])


def start_fork_server() -> None:
    """Start the fork server now, as a fork of this process, where workers come from one: this
    process has imported what they run (``trajrl.factory``), which a server started as a new
    interpreter would import again (about 3.5 s of CPU, as much as the learner's own imports).
    Where this process already runs other threads (a sweep's later job), multiprocessing starts
    it as a new interpreter: a fork holds only the thread that forked, and the locks others held."""
    if multiprocessing.get_start_method(allow_none=True) != "forkserver":
        return
    if threading.active_count() > 1:
        forkserver.ensure_running()
    else:
        resource_tracker.ensure_running()  # before the fork: every worker is handed its pipe
        internals.use_fork_server(fork_a_fork_server)


def fork_a_fork_server() -> tuple[int, str, int]:
    """Fork this process into multiprocessing's fork server (``forkserver.main``, as a new
    interpreter would run it): its pid, the address it listens on, and the write end of the
    pipe whose end (every process that holds it gone) stops it."""
    for stream in (sys.stdout, sys.stderr):  # else what they buffer would be written again by a worker
        with contextlib.suppress(Exception):  # a closed pipe: nothing more can be said
            stream.flush()
    address = connection.arbitrary_address("AF_UNIX")
    with socket.socket(socket.AF_UNIX) as listener:
        listener.bind(address)
        os.chmod(address, 0o600)
        listener.listen()
        alive_r, alive_w = os.pipe()
        try:
            pid = os.fork()
        except OSError:  # no memory for it, or no process left: the pipe goes with it
            os.close(alive_r)
            os.close(alive_w)
            raise
        if pid == 0:
            serve_forks(listener.fileno(), alive_r)
        os.close(alive_r)
    return pid, address, alive_w


def serve_forks(listener: int, alive: int) -> NoReturn:
    """In the fork: what a new interpreter started as the fork server would hold, then its loop
    until ``alive``'s other end is closed. Only its two descriptors and the standard streams stay
    open (this process's run-directory lock and log file are not the server's, nor its workers');
    logging starts bare, and the signals this process handles get their defaults, but the stacks
    printed on SIGUSR1 (as ``trajrl.collect.forkserver`` sets them up in a new interpreter). It ends
    with ``os._exit``: the exit handlers of the process it was forked from are not its own."""
    try:
        for handler in logging.root.handlers[:]:
            logging.root.removeHandler(handler)
            handler.close()
        keep = sorted({0, 1, 2, listener, alive})
        for low, high in zip(keep, [*keep[1:], os.sysconf("SC_OPEN_MAX")]):
            if high > low + 1:  # an empty range would close every descriptor (close_range(low + 1, -1))
                os.closerange(low + 1, high)
        for signum in (signal.SIGTERM, signal.SIGHUP, signal.SIGALRM):
            signal.signal(signum, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        stacks_on_sigusr1()
        forkserver.main(listener, alive, preload=[])  # until every holder of the alive pipe has closed it
    except SystemExit:
        pass
    except BaseException as err:  # a request to come fails at its connect: this says why
        print(f"trajrl: the fork server ended: {type(err).__name__}: {err}", file=sys.stderr, flush=True)
    finally:
        os._exit(0)


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
