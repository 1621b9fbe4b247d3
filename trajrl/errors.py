"""Every error trajrl raises on purpose, in one module that imports nothing of trajrl.

The CLI turns each into one line and an exit code: ``ConfigError`` and
``CheckpointError`` (exit 2: fix the command), ``CollectorFailed`` and
``EnvironmentFailed`` (exit 1: the run failed), ``RunInterrupted`` (128 + the signal).
"""

from __future__ import annotations

import signal
from typing import Any


class ConfigError(ValueError):
    """A setting that cannot work: names the setting, the value (or, where only Hydra
    knows the value, the config file that set it) and what would work."""

    def __init__(self, setting: str, value: Any, fix: str, source: str | None = None):
        self.setting, self.value, self.fix = setting, value, fix
        shown = "null" if value is None else repr(value)  # as a user writes it on the command line
        super().__init__(f"{setting} (set in {source}): {fix}" if source else f"{setting}={shown}: {fix}")


class CheckpointError(ValueError):
    """A checkpoint that cannot be read: says which file and why."""


class CollectorFailed(RuntimeError):
    """The collector's background work died, or wrote nothing for too long."""


class CollectorStalled(CollectorFailed):
    """The collector gave nothing for ``loop.stall_timeout_s``: its workers are stuck."""


class EnvironmentFailed(RuntimeError):
    """The environment raised (or hung) while trajrl stepped it in the learner's process."""


class RefusedBatch(ValueError):
    """A batch the replay buffer cannot store as it promises to (complete episodes, every
    step with what the buffer keeps of it): says what is missing; nothing was written."""


class MalformedMask(RefusedBatch):
    """A padded batch whose mask cannot describe episodes; nothing was written."""


class RunInterrupted(BaseException):
    """The run was asked to stop by a signal (a BaseException, like KeyboardInterrupt,
    so that no ``except Exception`` on the way out swallows it)."""

    def __init__(self, signum: int):
        self.signum = signum
        self.name = signal.Signals(signum).name
        super().__init__(f"interrupted by {self.name}")
