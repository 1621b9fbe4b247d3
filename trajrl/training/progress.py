"""What a run prints while it trains (tqdm).

On a terminal: a live status line (a bar, frames, frames/s, time left, the recent
training return), with each metrics row printed above it. Anywhere else (CI logs,
files, pipes): only the metrics rows, one plain line each, so a log reads top to
bottom without control characters.
"""

from __future__ import annotations

import sys
from typing import TextIO

from tqdm import tqdm


class Progress:
    def __init__(
        self, total_frames: int, stream: TextIO | None = None, live: bool | None = None, min_interval_s: float = 0.25
    ):
        self.stream = stream if stream is not None else sys.stdout
        live = self.stream.isatty() if live is None else live
        self.bar = tqdm(
            total=max(1, int(total_frames)),
            unit="frame",
            file=self.stream,
            disable=not live,
            mininterval=min_interval_s,
            dynamic_ncols=True,
            leave=False,
        )

    def row(self, text: str) -> None:
        """A line that stays (a metrics row, a message), above the status line."""
        if self.bar.disable:
            self.stream.write(text + "\n")
            self.stream.flush()
        else:
            self.bar.write(text, file=self.stream)

    def status(self, frames: int, recent_return: float | None = None) -> None:
        """Move the status line to ``frames`` (terminal only; tqdm redraws at most every ``min_interval_s``)."""
        if self.bar.disable:
            return
        if recent_return is not None:
            self.bar.set_postfix_str(f"return {recent_return:.1f}", refresh=False)
        self.bar.update(min(frames, self.bar.total) - self.bar.n)

    def close(self) -> None:
        """Clear the status line (the terminal is left on a fresh line)."""
        self.bar.close()
