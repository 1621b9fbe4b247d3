"""The buffer's writer: fresh episode ids, and writes that a dead writer cannot leave half done.

Collector workers write complete episodes straight into a shared buffer, under its
write lock. ``EpisodeWriter`` is TorchRL's ``RoundRobinWriter`` with two additions,
both made under that lock in whichever process writes:

- every episode written gets a fresh trajectory id from one counter all writers
  share (and a checkpoint keeps), so no two stored episodes ever share an id:
  not those of two workers, of a collector started again, or of a resumed run;
- with a journal directory, each write is first saved there whole (a file renamed
  into place, so it is either complete or absent) and removed once written. A
  worker killed in the middle of a write leaves its journal behind, and the lock
  held: ``redo_unfinished_writes`` (run once every writer has stopped) releases the
  lock and writes the journal again, at the same positions, with the counts as they
  were before it (the writer's cursor and write count, and the storage's length,
  which TorchRL moves before it copies the steps in: counted twice, it would let a
  sampler read slots never written). The buffer then holds the whole write, exactly as if the worker
  had finished it: a reader never sees part of one.

The counts, locks and storage internals of TorchRL's this needs are read through
``trajrl.base.internals``.
"""

from __future__ import annotations

import multiprocessing as mp
import os
from multiprocessing.context import get_spawning_popen
from multiprocessing.sharedctypes import SynchronizedBase
from pathlib import Path

import torch
from tensordict import TensorDictBase
from torchrl.data import RoundRobinWriter

from trajrl.base import internals
from trajrl.base.errors import CheckpointError, RefusedBatch
from trajrl.base.keys import TRAJ_KEY
from trajrl.replay.states import SparseStates


class EpisodeWriter(RoundRobinWriter):
    """``RoundRobinWriter`` that numbers episodes afresh and journals its writes (see the module)."""

    def __init__(self, journal_dir: str | Path | None = None, states: SparseStates | None = None, **kwargs):
        super().__init__(**kwargs)
        self.journal_dir = str(journal_dir) if journal_dir is not None else None
        self.states = states  # the recurrent state kept every k steps only, apart from the storage
        self._next_id_value = mp.Value("q", 0, lock=False)  # only ever moved under the write lock
        self._keys_kept: dict | None = None  # each key the storage keeps, and its shape (``_layout``)

    # ------------------------------------------------------------ the shared id counter
    @property
    def next_id(self) -> int:
        """The id the next episode written gets."""
        return self._next_id_value.value

    @next_id.setter
    def next_id(self, value: int) -> None:
        self._next_id_value.value = value

    def __getstate__(self) -> dict:
        state = super().__getstate__()
        if get_spawning_popen() is None:  # not into a new process: the value, not the shared one
            state["next_id__context"] = state.pop("_next_id_value").value
        return state

    def __setstate__(self, state: dict) -> None:
        next_id = state.pop("next_id__context", None)
        super().__setstate__(state)
        if next_id is not None:
            self._next_id_value = mp.Value("q", next_id, lock=False)

    def state_dict(self) -> dict:
        kept = {"_states": self.states.state_dict()} if self.states is not None else {}
        return {**super().state_dict(), "_next_id": self.next_id, **kept}

    def load_state_dict(self, state_dict: dict) -> None:
        saved_every = state_dict.get("_states", {}).get("every")
        every = self.states.every if self.states is not None else None
        if saved_every != every:
            raise CheckpointError(
                f"the checkpoint's buffer keeps the recurrent state every {saved_every or 1} "
                f"step(s) and this run's every {every or 1}: resume with "
                f"sampler.state_every={saved_every if saved_every is not None else 'null'}"
            )
        super().load_state_dict(state_dict)
        if self.states is not None:
            self.states.load_state_dict(state_dict["_states"])
        if "_next_id" in state_dict:
            self.next_id = int(state_dict["_next_id"])
        elif len(self.storage):  # a checkpoint from before the counter: after its largest stored id
            self.next_id = int(self.storage[: len(self.storage)].get(TRAJ_KEY).max()) + 1

    # ------------------------------------------------------------ what was written
    @property
    def storage(self):
        """The storage this writer writes into (the buffer's)."""
        return internals.writer_storage(self)

    @property
    def lane_len(self) -> int:
        """Steps written before the oldest is overwritten (a flat storage is one lane)."""
        return self.storage.max_size

    @property
    def stored(self) -> int:
        """Steps the storage holds."""
        return len(self.storage)

    def behind(self, seen: int) -> int:
        """Steps written into the fullest lane since the count ``seen`` (``written_since``)."""
        return int(internals.writer_write_count(self)) - seen

    def written_since(self, seen: int | None) -> tuple[torch.Tensor, int]:
        """``(index, written)``: the storage index of the steps written since the count
        ``seen`` (None: since the start), the last ``lane_len`` at most, and the count
        now. Call it under the buffer's locks."""
        written = int(internals.writer_write_count(self))
        new = max(0, min(written - (seen or 0), self.lane_len))
        return torch.arange(written - new, written) % self.lane_len, written

    # ------------------------------------------------------------ writing
    def extend(self, data) -> torch.Tensor:
        data = self._prepare(data)
        if self.journal_dir is None:
            return self._write(data)
        path = journal_path(self.journal_dir, os.getpid())
        torch.save({**self._journal_counts(), "data": data}, f"{path}.tmp")
        os.replace(f"{path}.tmp", path)  # the journal is whole from here on
        try:
            index = self._write(data)
        except BaseException:  # undone: nothing for a recovery to write again
            os.remove(path)
            raise
        os.remove(path)
        return index

    def _prepare(self, data):
        """The write as it is journalled: checked against what the buffer keeps (nothing
        is written otherwise), each episode with a fresh id."""
        if isinstance(data, TensorDictBase):
            self._check_keys(data)
            if data.get(TRAJ_KEY, None) is not None:
                data = self._fresh_ids(data)
        return data

    def _check_keys(self, data: TensorDictBase) -> None:
        """``RefusedBatch`` for a batch that lacks a key the storage keeps with every step
        (TorchRL would leave the overwritten steps' values there), holds one of another
        shape, or brings some of the recurrent state's keys and not the others."""
        if self.states is not None:
            self.states.check(data)
            data = data.exclude(*self.states.keys)
        for key, expected in self._layout().items():
            value = data.get(key, None)
            if value is None:
                raise RefusedBatch(
                    f"the batch has no {key!r}, which the buffer keeps with every step (its first write had it): "
                    "write it with each step, or store this batch in a buffer of its own"
                )
            if value.shape[data.batch_dims :] != expected:
                raise RefusedBatch(
                    f"{key!r} has shape {tuple(value.shape[data.batch_dims :])} a step, the buffer keeps "
                    f"{tuple(expected)}"
                )

    def _layout(self) -> dict:
        """Each key the storage keeps with every step, and its shape a step (none before its first write)."""
        if self._keys_kept is None and self.storage.initialized:
            stored = internals.storage_contents(self.storage)
            self._keys_kept = {
                key: stored.get(key).shape[stored.batch_dims :]
                for key in stored.keys(include_nested=True, leaves_only=True)
                if key != "index"
            }
        return self._keys_kept or {}

    def _write(self, data) -> torch.Tensor:
        """Write ``data`` whole, or not at all: an error anywhere (the storage, the states
        table) puts the counts and every overwritten step back as they were."""
        before = self._journal_counts()
        position = torch.arange(before["cursor"], before["cursor"] + data.shape[0]) % self.storage.max_size
        overwritten = position[position < before["stored"]]
        saved_steps = self.storage[overwritten] if overwritten.numel() else None  # a copy (gathered)
        saved_states = self.states.saved(position) if self.states is not None else None
        try:
            if self.states is None:
                return RoundRobinWriter.extend(self, data)
            keys = self.states.keys
            index = RoundRobinWriter.extend(self, data.exclude(*keys))
            self.states.write(index.reshape(-1), data.get("step_count"), {key: data.get(key, None) for key in keys})
            return index
        except BaseException:
            self._restore_counts(before)
            if saved_steps is not None:
                self.storage.set(overwritten, saved_steps, set_cursor=False)
            if saved_states is not None:
                self.states.restore(saved_states)
            raise

    def _journal_counts(self) -> dict:
        """The counts as they are before a write: TorchRL's storage adds the write's length
        to its own before it copies the steps in, so a write redone over a half-done one
        must set it back."""
        return {
            "cursor": internals.writer_cursor(self),
            "write_count": internals.writer_write_count(self),
            "stored": internals.storage_length(self.storage),
        }

    def _restore_counts(self, entry: dict) -> None:
        internals.set_writer_counts(self, entry["cursor"], entry["write_count"])
        internals.set_storage_length(self.storage, entry["stored"])

    def redo(self, entry: dict) -> torch.Tensor:
        """Write a journal ``entry`` again, from the counts it saved (``redo_unfinished_writes``;
        under the buffer's locks). Returns the storage index written."""
        self._restore_counts(entry)
        return self._write(entry["data"])

    def _fresh_ids(self, data: TensorDictBase) -> TensorDictBase:
        """Each run of one id in ``data`` (one episode: written whole and contiguous) gets the next id."""
        ids = data.get(TRAJ_KEY)
        flat = ids.reshape(-1)
        if flat.numel() == 0:
            return data
        begins = torch.ones_like(flat, dtype=torch.bool)
        begins[1:] = flat[1:] != flat[:-1]
        first = self.next_id
        fresh = first + torch.cumsum(begins, 0) - 1
        self.next_id = first + int(begins.sum())
        data = data.clone(False)
        data.set(TRAJ_KEY, fresh.to(ids.dtype).reshape(ids.shape))
        return data


def counters_without_locks(buffer) -> None:
    """Give ``buffer``'s shared counters that move only under its write lock
    (``trajrl.base.internals.WRITE_LOCKED_COUNTERS``) no lock of their own (TorchRL makes each
    an ``mp.Value`` with one). A worker SIGKILLed while it moved one would leave that lock
    held, and every later read (the learner's ``write_count`` and ``len``, each loop turn)
    would wait on it for ever; the buffer's write lock already orders their writes."""
    for owner, name in internals.write_locked_counters(buffer):
        value = getattr(owner, name, None)
        if isinstance(value, SynchronizedBase):
            shared = value.get_obj()
            setattr(owner, name, mp.Value(type(shared), shared.value, lock=False))


def free_stuck_counters(*owners) -> None:
    """Replace each of ``owners``' shared counters whose lock nobody releases (its holder
    was killed) by a new one with the same value. Call it once every process that moves
    them has stopped; the next workers get the new ones."""
    for owner in owners:
        for name, value in list(vars(owner).items()):
            if not isinstance(value, SynchronizedBase):
                continue
            lock = value.get_lock()
            if lock.acquire(timeout=0.1):
                lock.release()
                continue
            shared = value.get_obj()
            setattr(owner, name, mp.Value(type(shared), shared.value))


def journal_path(journal_dir: str, pid: int) -> str:
    return os.path.join(journal_dir, f"write-{pid}.pt")


def redo_unfinished_writes(buffer) -> int:
    """Once every process that writes into ``buffer`` has stopped: free its write lock and
    its counters' (a process killed while writing never released them) and redo each
    write a process died in (its journal). Returns how many writes were redone."""
    lock = internals.write_lock(buffer)
    if not hasattr(lock, "acquire"):  # not shared with other processes: nothing to free, nothing journalled
        return 0
    if lock.acquire(timeout=1.0):  # free: whoever held it released it
        lock.release()
    else:  # held by a process that is gone
        lock.release()
    free_stuck_counters(buffer.writer, buffer.storage)
    writer = buffer.writer
    journal_dir = getattr(writer, "journal_dir", None)
    if journal_dir is None or not os.path.isdir(journal_dir):
        return 0
    redone = 0
    for name in sorted(os.listdir(journal_dir)):
        path = os.path.join(journal_dir, name)
        if not name.startswith("write-"):  # not a journal (the directory may hold other files)
            continue
        if name.endswith(".pt"):  # the write as it began: the counts before it, the data with its ids
            entry = torch.load(path, weights_only=False)
            with internals.replay_lock(buffer), lock:
                index = writer.redo(entry)
                buffer.sampler.extend(index)
            redone += 1
        os.remove(path)  # a .tmp: the worker died before its write began
    return redone
