"""What a run prints while it trains.

On a terminal: one status line redrawn in place (a bar, frames, frames/s, the
recent training return), with each metrics row printed above it. Anywhere else
(CI logs, files, pipes): only the metrics rows, one plain line each, so a log
reads top to bottom without control characters.
"""
from __future__ import annotations

import shutil
import sys
import time
from typing import TextIO


class Progress:
    def __init__(self, total_frames: int, stream: TextIO | None = None, live: bool | None = None,
                 min_interval_s: float = 0.25):
        self.total = max(1, int(total_frames))
        self.stream = stream if stream is not None else sys.stdout
        self.live = self.stream.isatty() if live is None else live
        self.min_interval_s = min_interval_s
        self._last_draw = 0.0
        self._status = ""
        self._start = time.monotonic()

    def row(self, text: str) -> None:
        """A line that stays (a metrics row, a message)."""
        if self.live and self._status:
            self.stream.write("\r\x1b[2K")
        self.stream.write(text + "\n")
        if self.live and self._status:
            self.stream.write(self._status)
        self.stream.flush()

    def status(self, frames: int, recent_return: float | None = None) -> None:
        """Redraw the status line (terminal only; at most every ``min_interval_s``)."""
        now = time.monotonic()
        if not self.live or now - self._last_draw < self.min_interval_s:
            return
        self._last_draw = now
        self._status = self.status_text(frames, recent_return, now - self._start)
        self.stream.write("\r\x1b[2K" + self._status)
        self.stream.flush()

    def status_text(self, frames: int, recent_return: float | None, elapsed: float) -> str:
        done = min(1.0, frames / self.total)
        fps = frames / max(elapsed, 1e-9)
        eta = (self.total - frames) / fps if 0 < fps and frames < self.total else 0.0
        tail = f" {frames:,}/{self.total:,} frames | {fps:,.0f} fps | eta {eta:4.0f} s"
        if recent_return is not None:
            tail += f" | return {recent_return:.1f}"
        width = max(10, min(40, shutil.get_terminal_size((100, 20)).columns - len(tail) - 8))
        filled = int(done * width)
        return f"{done:4.0%} [{'#' * filled}{'.' * (width - filled)}]{tail}"

    def close(self) -> None:
        """Leave the terminal on a fresh line."""
        if self.live and self._status:
            self.stream.write("\r\x1b[2K")
            self.stream.flush()
            self._status = ""
