"""Files a user keeps (checkpoints, an exported agent) replaced whole or not at all: written to a
temporary file beside the final one, flushed to the disk, then renamed over it; a write that fails
(a full disk, a file size limit) or is interrupted (Ctrl-C, SIGTERM) leaves the file before as it was
and no temporary file behind."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path


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
