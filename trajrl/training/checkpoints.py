"""A run's checkpoints as a loop saves them: ``checkpoints/latest.pt`` (every
``loop.checkpoint_every_frames``, at the end, and when interrupted) and ``best.pt`` (at a new
best evaluation), each written whole before a signal is let through (``trajrl.signals``)."""

from __future__ import annotations

from collections.abc import Callable

from trajrl.checkpoint import LoopState
from trajrl.signals import critical


class Checkpoints:
    """``save(state)`` and ``save_best(state)``, through ``latest`` and ``best`` (a
    ``trajrl.checkpoint.Checkpointer`` and its ``best``; None: not saved)."""

    def __init__(
        self, latest: Callable[[LoopState], object] | None = None, best: Callable[[LoopState], object] | None = None
    ):
        self.latest, self.best = latest, best

    def save(self, state: LoopState) -> None:
        """``latest.pt``: the run as it is now (collection paused or over)."""
        if self.latest is not None:
            with critical():
                self.latest(state)

    def save_best(self, state: LoopState) -> None:
        """``best.pt``: the agent as it is now, just evaluated at its best."""
        if self.best is not None:
            with critical():
                self.best(state)
