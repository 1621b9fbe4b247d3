"""SIGINT (Ctrl-C) and SIGTERM end a run cleanly: the signal becomes an exception in
the main thread, the loops shut their collectors down and save a checkpoint on the
way out, and the CLI reports it in one line.

A signal that arrives inside ``critical()`` (a gradient update and its weight push,
a checkpoint being written) is raised when the block ends, so the learner that is
saved is never half-updated."""

from __future__ import annotations

import contextlib
import signal
import threading
import time
from collections.abc import Callable, Iterator

from trajrl.base.errors import RunInterrupted


def stacks_on_sigusr1() -> None:
    """``kill -USR1 <pid>`` prints every thread's stack to stderr (the learner's and each
    collector worker's: a run that seems stuck says where it waits) and the run goes on."""
    import faulthandler
    import sys

    if hasattr(signal, "SIGUSR1") and threading.current_thread() is threading.main_thread():
        faulthandler.register(signal.SIGUSR1, file=sys.stderr, all_threads=True, chain=False)


class _State:
    deferring = 0  # depth of critical() blocks the main thread is in
    pending: int | None = None  # a signal received meanwhile


@contextlib.contextmanager
def critical() -> Iterator[None]:
    """A block no signal interrupts: one received inside is raised at its end."""
    _State.deferring += 1
    try:
        yield
    finally:
        _State.deferring -= 1
    if _State.deferring == 0 and _State.pending is not None:
        signum, _State.pending = _State.pending, None
        raise RunInterrupted(signum)


@contextlib.contextmanager
def interrupts_raise() -> Iterator[None]:
    """Within the block, SIGINT and SIGTERM raise ``RunInterrupted`` (once: a second
    signal acts as it would without trajrl). A signal ignored by the parent (e.g. a
    background job's SIGINT) stays ignored. Only the main thread can do this."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    watched = [s for s, handler in previous.items() if handler is not signal.SIG_IGN]

    def handler(signum, frame):
        for s in watched:
            signal.signal(s, signal.default_int_handler if s == signal.SIGINT else signal.SIG_DFL)
        if _State.deferring:
            _State.pending = signum
            return
        raise RunInterrupted(signum)

    for s in watched:
        signal.signal(s, handler)
    try:
        yield
    finally:
        _State.pending = None
        for s in watched:
            signal.signal(s, previous[s])


@contextlib.contextmanager
def raise_after(
    seconds: float,
    error: Callable[[], BaseException],
    check: Callable[[], BaseException | None] | None = None,
    every: float = 1.0,
) -> Iterator[None]:
    """Within the block, raise ``error()`` once ``seconds`` have passed (SIGALRM: it
    also interrupts a wait inside a blocking call), and, with ``check``, raise what it
    returns as soon as it returns something (it is asked every ``every`` seconds).
    Only the main thread can do this; elsewhere the block runs without a limit.

    A timer already running (an enclosing ``raise_after``, or pytest-timeout's) is
    kept: if it is due first, its handler runs when it is due, and whatever it had
    left is set again when the block ends."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.getsignal(signal.SIGALRM)
    outer_left = signal.getitimer(signal.ITIMER_REAL)[0]
    started, outer_fired = time.monotonic(), False

    def next_alarm() -> float:
        """Seconds to the next thing due: the outer timer, the limit, or a check."""
        elapsed = time.monotonic() - started
        due = [seconds - elapsed]
        if outer_left > 0 and not outer_fired:
            due.append(outer_left - elapsed)
        if check is not None:
            due.append(every)
        return max(min(due), 1e-3)

    def handler(signum, frame):
        nonlocal outer_fired
        elapsed = time.monotonic() - started
        if outer_left > 0 and not outer_fired and elapsed >= outer_left - 1e-3 and callable(previous):
            outer_fired = True
            previous(signum, frame)
        elif elapsed >= seconds - 1e-3:
            raise error()
        found = check() if check is not None else None
        if found is not None:
            raise found
        signal.setitimer(signal.ITIMER_REAL, next_alarm())

    signal.signal(signal.SIGALRM, handler)
    signal.setitimer(signal.ITIMER_REAL, next_alarm())
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        left = outer_left - (time.monotonic() - started)
        if outer_left > 0 and not outer_fired:
            signal.setitimer(signal.ITIMER_REAL, max(left, 1e-3))
