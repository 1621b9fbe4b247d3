"""When a loop evaluates, writes a metrics row and saves a checkpoint (each every so many
frames), and when its run is over (``total_frames``, or ``loop.time_limit_s``)."""

from __future__ import annotations

import time
from typing import NamedTuple

from trajrl.configuration.settings import LoopSettings


def next_multiple(frames: int, every: int) -> int | None:
    """The first multiple of ``every`` above ``frames`` (None: ``every`` is 0, never)."""
    return (frames // every + 1) * every if every > 0 else None


class Every:
    """A cadence in frames: ``due(frames)`` is true once per multiple of ``every`` passed."""

    def __init__(self, every: int, start_frames: int):
        self.every, self.next = every, next_multiple(start_frames, every)

    def due(self, frames: int) -> bool:
        if self.next is None or frames < self.next:
            return False
        self.next = next_multiple(frames, self.every)
        return True


class Due(NamedTuple):
    """What is due at some frames."""

    evaluate: bool
    log: bool
    checkpoint: bool


class Cadence:
    """``due(frames)``: whether to evaluate (``loop.eval_every_frames``, only with an
    evaluation), log (``loop.log_every_frames``) and save (``loop.checkpoint_every_frames``)
    now; ``over(frames)``: whether the run has reached ``total_frames`` or ``loop.time_limit_s``
    (counted from when the cadence was made)."""

    def __init__(self, settings: LoopSettings, total_frames: int, start_frames: int, evaluates: bool):
        self.total_frames, self.time_limit_s = total_frames, settings.time_limit_s
        self.started = time.monotonic()
        self.evaluate = Every(settings.eval_every_frames if evaluates else 0, start_frames)
        self.log = Every(settings.log_every_frames, start_frames)
        self.checkpoint = Every(settings.checkpoint_every_frames, start_frames)

    def due(self, frames: int) -> Due:
        return Due(self.evaluate.due(frames), self.log.due(frames), self.checkpoint.due(frames))

    def over(self, frames: int) -> bool:
        limit = self.time_limit_s
        return frames >= self.total_frames or (limit is not None and time.monotonic() - self.started >= limit)
