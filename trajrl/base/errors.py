"""Every error trajrl raises on purpose, in one module that imports nothing of trajrl.

The CLI turns each into one line and an exit code: ``ConfigError`` and
``CheckpointError`` (exit 2: fix the command), ``CollectorFailed``,
``EnvironmentFailed`` (``BadStep`` is one) and ``LearnerFailed`` (exit 1: the run failed),
``RunInterrupted`` (128 + the signal). ``log_fault`` writes the line a worker process leaves in
the run's fault log for the learner to end the run with.
"""

from __future__ import annotations

import json
import signal
from typing import Any


def log_fault(path: str, **entry: Any) -> None:
    """Append ``entry`` to a run's fault log (read by ``trajrl.collect.faults.FaultLog``): one JSON
    line, written whole (a line this short is), from whichever process saw the fault. Its keys:
    ``what`` (env, bad_step, refused, ...), ``slot`` (the collector environment, or None),
    ``cause`` (one line), ``gave_up`` (true: the run ends with it), and what the writer adds."""
    with open(path, "a") as f:
        f.write(json.dumps(entry) + "\n")


class ConfigError(ValueError):
    """A setting that cannot work: names the setting, the value (or, where only Hydra
    knows the value, the config file that set it) and what would work."""

    def __init__(self, setting: str, value: Any, fix: str, source: str | None = None):
        self.setting, self.value, self.fix = setting, value, fix
        shown = "null" if value is None else repr(value)  # as a user writes it on the command line
        super().__init__(f"{setting} (set in {source}): {fix}" if source else f"{setting}={shown}: {fix}")


class RunDirTaken(ConfigError):
    """Another trajrl process is writing into the run directory."""

    def __init__(self, run_dir: object, holder: str):
        super().__init__(
            "hydra.run.dir",
            str(run_dir),
            f"another trajrl run (pid {holder}) is writing into this directory; give this run another "
            "(hydra.run.dir=<dir>), or wait for that one to end",
        )


class CheckpointError(ValueError):
    """A checkpoint that cannot be read: says which file and why."""


class CollectorFailed(RuntimeError):
    """The collector's background work died, or wrote nothing for too long."""


class CollectorStalled(CollectorFailed):
    """The collector gave nothing for ``loop.stall_timeout_s``: its workers are stuck."""


class EnvironmentFailed(RuntimeError):
    """The environment raised (or hung) while trajrl stepped it in the learner's process."""


class BadStep(EnvironmentFailed):
    """A collector's environment returned a reward or an observation trajrl cannot store (not
    finite, or not what its space declares): ends the run, or drops the episode where
    ``collector.bad_steps=drop``."""


class LearnerFailed(RuntimeError):
    """The learner cannot go on: a loss, a gradient or a weight that is not finite."""


class NonFiniteUpdate(LearnerFailed):
    """A learner's loss or gradient that is not finite: the step it would have taken is not taken
    (no weight becomes non-finite); the loop names the update and the batch's episodes."""

    def __init__(self, loss: str, value: float, grad_norm: float):
        self.loss, self.value, self.grad_norm = loss, value, grad_norm
        super().__init__(f"the {loss} is {value:.6g} and its gradient's norm {grad_norm:.6g}")


class NoReplayBuffer(AttributeError):
    """``pipe.buffer`` of an on-policy pipeline, which keeps no replay buffer: says how its batches
    reach the learner."""


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
