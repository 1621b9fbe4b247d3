"""Files a user keeps (checkpoints, an exported agent) replaced whole or not at all: written to a
temporary file beside the final one, flushed to the disk, then renamed over it; a write that fails
(a full disk, a file size limit) or is interrupted (Ctrl-C, SIGTERM) leaves the file before as it was
and no temporary file behind."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

from trajrl.base.errors import RunDirTaken


@contextlib.contextmanager
def replaced_whole(path: str | Path, keep_suffix: bool = False) -> Iterator[Path]:
    """The temporary path to write ``path``'s new contents to (``<name>.tmp``; ``keep_suffix``:
    ``<stem>.tmp<suffix>``, for writers that read the suffix); once the block ends, it is synced to the
    disk and renamed to ``path``. Whatever the block raises, the temporary file is removed and ``path``
    left untouched."""
    path = Path(path)
    tmp = path.with_name(f"{path.stem}.tmp{path.suffix}" if keep_suffix else f"{path.name}.tmp")
    try:
        yield tmp
        with open(tmp, "rb") as written:
            os.fsync(written.fileno())  # on the disk before the name points at it
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    with contextlib.suppress(OSError):  # the rename itself on the disk (not every filesystem syncs a directory)
        directory = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(directory)
        finally:
            os.close(directory)


#: Run directories this process holds (``held_by_this_run``), with how many times.
_HELD: dict[Path, tuple[int, int]] = {}


@contextlib.contextmanager
def held_by_this_run(run_dir: str | Path) -> Iterator[None]:
    """``run_dir`` written by this process alone while the block runs: an exclusive lock on its
    ``.lock`` file (released by the kernel when the process ends, however it ends). Another process
    holding it already: ``RunDirTaken``, before anything is written. Nested holds in one process are one."""
    import fcntl

    run_dir = Path(run_dir).resolve()
    if run_dir in _HELD:
        fd, count = _HELD[run_dir]
        _HELD[run_dir] = fd, count + 1
    else:
        run_dir.mkdir(parents=True, exist_ok=True)
        fd = os.open(run_dir / ".lock", os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "?"
            os.close(fd)
            raise RunDirTaken(run_dir, holder) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        _HELD[run_dir] = fd, 1
    try:
        yield
    finally:
        fd, count = _HELD.pop(run_dir)
        if count > 1:
            _HELD[run_dir] = fd, count - 1
        else:
            os.close(fd)  # the lock goes with it
