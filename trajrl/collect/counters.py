"""What the collector's environments did, wherever they run, and the gate that holds
them: a memory-mapped table every environment writes its running totals into
(``WorkerCounters``), written by a transform on each environment (``CountSteps``)."""

from __future__ import annotations

import multiprocessing
import os
import tempfile
import time
from collections.abc import Callable

import numpy as np
import torch
from tensordict import MemoryMappedTensor, TensorDictBase
from torchrl.envs.transforms import Transform

from trajrl.base.keys import FAULT_KEY
from trajrl.collect.faults import FaultLog


class WorkerCounters:
    """What the collector's environments did, wherever they run: per slot (one
    collector environment, or a vector of them summed), frames stepped, episodes
    ended, the summed return of the ended ones, the episodes under way, the actions
    that were not the greedy one (a Q-learning policy's exploration, where it writes
    ``action_value``), and the environment restarts (``trajrl.collect.faults``) with
    the frames of the episodes they dropped (begun = ended + under way + restarts).

    Each environment writes its own running totals into its row of one
    memory-mapped tensor (writes, not increments, so processes never race).
    Memory-mapped because it must stay shared however the collector ships the
    environment factory to its workers (a ``share_memory_()`` tensor arrived in
    them as a copy). Against what was stored it closes the accounting: at the end
    the difference is what was still in flight.
    """

    FRAMES, ENDED, RETURN_SUM, UNDER_WAY, NOT_GREEDY, ENV_RESTARTS, FRAMES_LOST = range(7)

    def __init__(self, slots: int):
        self._dir = tempfile.TemporaryDirectory(prefix="trajrl-counters-")
        self.dir = self._dir.name  # the run's scratch files: these counters, the fault log, write journals
        self.counts = MemoryMappedTensor.from_tensor(
            torch.zeros(slots, 7, dtype=torch.float64), filename=f"{self._dir.name}/counters.memmap"
        )
        self.fault_log = FaultLog(f"{self._dir.name}/faults.jsonl")  # each restart, with its cause
        # Kept by the learner: the totals of collectors replaced after a worker died, how
        # many were, and the frames their workers had in flight.
        self.retired = torch.zeros(slots, 7, dtype=torch.float64)
        self.worker_restarts, self.frames_lost_to_restarts, self.episodes_lost_to_restarts = 0, 0, 0
        # The gate: while it is closed (1), every environment waits before its next step.
        self.gate = MemoryMappedTensor.from_tensor(
            torch.zeros(1, dtype=torch.int8), filename=f"{self._dir.name}/gate.memmap"
        )

    def close_gate(self) -> None:
        """Hold every environment at its next step (takes effect within one step; no
        message to the workers, nothing to wait for)."""
        self.gate[0] = 1

    def open_gate(self) -> None:
        self.gate[0] = 0

    @property
    def frames(self) -> int:
        """Frames stepped by all the environments."""
        return int(self.snapshot()[:, self.FRAMES].sum())

    def snapshot(self) -> torch.Tensor:
        """A copy of the ``[slots, columns]`` totals (the column names above), those of
        collectors that were replaced included."""
        return self.counts.clone() + self.retired

    def set_aside(self) -> None:
        """A collector was shut down on purpose (``deterministic=true``'s renewal at a checkpoint): keep its
        environments' totals, their episodes under way counted begun and never stored (in flight)."""
        self.retired += self.counts.clone()
        self.counts.zero_()

    def retire(self, frames_stored: int, episodes_stored: int) -> int:
        """A collector's workers have all stopped (a new collector replaces them): keep
        their totals, and return the frames they stepped that were neither stored
        (``frames_stored`` of theirs were) nor counted lost already: those of the
        episodes under way or not yet handed over when they stopped, lost in flight.
        The episodes they ended that were not stored (``episodes_stored`` were) are
        counted lost too."""
        now = self.counts.clone()
        lost = int(now[:, self.FRAMES].sum() - now[:, self.FRAMES_LOST].sum()) - frames_stored
        self.episodes_lost_to_restarts += int(now[:, self.ENDED].sum()) - episodes_stored
        now[:, self.UNDER_WAY] = 0  # those episodes are lost, not under way
        self.retired += now
        self.counts.zero_()
        self.worker_restarts += 1
        self.frames_lost_to_restarts += lost
        return lost


def parent_alive() -> Callable[[], bool]:
    """Whether the process that started this one (the learner) is still there: its
    multiprocessing sentinel where it has one (under ``forkserver`` this process's own
    parent is the fork server, not the learner), else whether the parent process id is
    still the one found now (loky's processes, or a process multiprocessing did not start)."""
    started_by = multiprocessing.parent_process()
    if started_by is not None and started_by.sentinel is not None:
        return started_by.is_alive
    parent = started_by.pid if started_by is not None else os.getppid()  # not os.getppid(): it may have died already
    return lambda: os.getppid() == parent


class CountSteps(Transform):
    """Writes this collector slot's running totals into ``counts[slot]`` (see
    ``WorkerCounters``), summed over the environments of a vector: the frame count
    at every step, the rest only where an episode ends (this runs on every step).
    While the gate is closed it waits before handing the step back, unless the
    process that made the gate has died (then nobody would open it)."""

    def __init__(self, counts: torch.Tensor, slot: int, gate: torch.Tensor | None = None, faulted_stored: bool = False):
        super().__init__()
        self.counts, self.slot, self.gate = counts, slot, gate
        self.faulted_stored = faulted_stored  # fixed frames: an episode a fault cut is stored, not lost
        self.frames, self.ended, self.return_sum, self.under_way, self.not_greedy = 0, 0, 0.0, 0, 0
        self.restarts, self.frames_lost = 0, 0
        self._parent_alive: Callable[[], bool] | None = None
        self._row = self._gate = None

    def __getstate__(self) -> dict:
        """A copy pickled into a worker makes its own views of the shared files."""
        return {**super().__getstate__(), "_row": None, "_gate": None, "_parent_alive": None}

    def _wait_at_gate(self) -> None:
        if self._parent_alive is None:  # the process that started this one (the learner), wherever it runs
            self._parent_alive = parent_alive()
        while self._gate[0] and self._parent_alive():
            time.sleep(0.001)

    def _step(self, tensordict: TensorDictBase, next_tensordict: TensorDictBase) -> TensorDictBase:
        return self.count_step(tensordict, next_tensordict)

    def count_step(self, tensordict: TensorDictBase, next_tensordict: TensorDictBase) -> TensorDictBase:
        """Count one step of the environments (``next_tensordict``: what it led to), as the
        transform's ``_step``; the lean stepping path calls it with each step it takes."""
        if self._row is None:  # numpy views of the shared files, made where the environment runs
            self._row = self.counts.numpy()[self.slot]
            self._gate = self.gate.numpy() if self.gate is not None else np.zeros(1, dtype=np.int8)
        if self._gate[0]:
            self._wait_at_gate()
        row = self._row
        width = max(1, next_tensordict.numel())
        self.frames += width
        row[WorkerCounters.FRAMES] = self.frames
        done = next_tensordict.get("done")
        ended = int(done.sum()) if width > 1 else int(done.item())
        if ended:
            fault = next_tensordict.get(FAULT_KEY, None)
            if fault is not None and fault.any():  # the environment was rebuilt: its episode is dropped
                fault = fault.reshape(done.shape)
                self.restarts += int(fault.sum())
                if not self.faulted_stored:
                    self.frames_lost += int(next_tensordict.get("step_count")[fault].sum())
                row[WorkerCounters.ENV_RESTARTS], row[WorkerCounters.FRAMES_LOST] = self.restarts, self.frames_lost
                done = done & ~fault
            finished = int(done.sum())
            if finished:
                self.ended += finished
                self.return_sum += float(next_tensordict.get("episode_reward")[done].sum())
                row[WorkerCounters.ENDED], row[WorkerCounters.RETURN_SUM] = self.ended, self.return_sum
        if width - ended != self.under_way:  # episodes with at least one step and no end yet
            self.under_way = width - ended
            row[WorkerCounters.UNDER_WAY] = self.under_way
        values = tensordict.get("action_value", None)
        if values is not None:
            not_greedy = values.argmax(-1) != tensordict.get("action").reshape(values.shape[:-1])
            if not_greedy.any():
                self.not_greedy += int(not_greedy.sum())
                row[WorkerCounters.NOT_GREEDY] = self.not_greedy
        return next_tensordict
