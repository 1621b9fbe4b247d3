"""Episodes in a flat (1-D) replay storage, and a sampler that returns them whole."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import torch
from tensordict import TensorDictBase
from torchrl.data.replay_buffers.samplers import Sampler
from torchrl.data.replay_buffers.storages import Storage

from trajrl.base import internals
from trajrl.base.keys import MASK_KEY, TRAJ_KEY, VERSION_KEY


@contextlib.contextmanager
def buffer_locked(buffer) -> Iterator[None]:
    """No write into ``buffer`` meanwhile, from this process or a collector's worker:
    TorchRL's locks of ``extend`` (a shared buffer's write lock is a multiprocessing
    lock). Read what was written under it: ``write_count`` moves before the steps
    are in the storage."""
    locks = [internals.replay_lock(buffer), internals.write_lock(buffer)]
    with contextlib.ExitStack() as stack:
        for lock in locks:
            if lock is not None:
                stack.enter_context(lock)
        yield


def without_stale(episodes: TensorDictBase, version: int) -> tuple[TensorDictBase | None, int, int]:
    """Flat complete episodes less those with a step taken by weights older than
    ``version`` (an episode a weight push cut): ``(kept or None, episodes dropped,
    frames dropped)``."""
    ids = episodes.get(TRAJ_KEY).reshape(-1)
    stale_ids = ids[episodes.get(VERSION_KEY).reshape(-1) < version].unique()
    stale = torch.isin(ids, stale_ids)
    kept = episodes[~stale]
    return (kept if kept.shape[0] else None), stale_ids.numel(), int(stale.sum())


def find_runs(traj_ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``(starts, lengths)`` of runs of equal trajectory ids in a flat storage.

    Writes are whole episodes with unique ids, so a run at the storage's end that
    carries the id of the run at its start is one episode that wrapped around: the
    two are merged, and its steps are ``(start + t) % len(storage)``.
    """
    traj_ids = traj_ids.reshape(-1)
    size = traj_ids.numel()
    if size == 0:
        empty = torch.zeros(0, dtype=torch.long)
        return empty, empty
    change = torch.ones(size, dtype=torch.bool)
    change[1:] = traj_ids[1:] != traj_ids[:-1]
    starts = change.nonzero().squeeze(-1)
    lengths = torch.diff(starts, append=torch.tensor([size]))
    if starts.numel() > 1 and traj_ids[0] == traj_ids[-1]:
        lengths[-1] += lengths[0]
        starts, lengths = starts[1:], lengths[1:]
    return starts, lengths


def run_steps(starts: torch.Tensor, lengths: torch.Tensor, size: int) -> tuple[torch.Tensor, ...]:
    """Every step of runs laid out back to back: ``(run, offset, index)`` for run ``r``
    and ``offset`` in ``[0, lengths[r])``, at storage ``index = (starts[r] + offset) % size``."""
    run = torch.repeat_interleave(torch.arange(starts.numel()), lengths)
    offset = torch.arange(int(lengths.sum())) - torch.repeat_interleave(lengths.cumsum(0) - lengths, lengths)
    return run, offset, (starts[run] + offset) % size


def find_episodes(
    traj_ids: torch.Tensor, is_init: torch.Tensor, done: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Complete episodes in a flat storage: ``(starts, lengths)``.

    An episode is a run (``find_runs``) that begins with ``is_init`` and ends with
    ``done``; a run whose head was overwritten has no ``is_init`` and is left out.
    """
    is_init, done = is_init.reshape(-1), done.reshape(-1)
    starts, lengths = find_runs(traj_ids)
    size = done.numel()
    last = (starts + lengths - 1) % size
    complete = is_init[starts] & done[last]
    return starts[complete], lengths[complete]


class StatelessSampler(Sampler):
    """A sampler that keeps nothing between samples: nothing to save, load or empty."""

    def _empty(self) -> None:
        pass

    def state_dict(self) -> dict[str, Any]:
        return {}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        pass

    def dumps(self, path) -> None:
        pass

    def loads(self, path) -> None:
        pass


class EpisodeSampler(StatelessSampler):
    """Samples ``batch_size`` whole stored episodes, one after the other in a flat index.

    Each returned episode starts with ``is_init``, so ``as_sequences`` lays the
    sample out as ``[N, T]`` with an exact mask.
    """

    def __init__(self, traj_key: Any = TRAJ_KEY):
        self.traj_key = traj_key
        self.hindsight = None  # HindsightGoals (trajrl.replay.hindsight): substituted goals drawn with each sample

    def sample(self, storage: Storage, batch_size: int) -> tuple[torch.Tensor, dict]:
        stored = storage[:]
        starts, lengths = find_episodes(stored.get(self.traj_key), stored.get("is_init"), stored.get(("next", "done")))
        if starts.numel() == 0:
            raise RuntimeError("EpisodeSampler: the buffer holds no complete episode yet.")
        pick = torch.randint(starts.numel(), (batch_size,), generator=internals.sampler_rng(self))
        _, _, index = run_steps(starts[pick], lengths[pick], len(storage))
        if self.hindsight is None:
            return index, {}
        whole = torch.zeros_like(pick)  # each sample is its whole episode
        rng = internals.sampler_rng(self)
        return index, self.hindsight.draw(storage, starts[pick], lengths[pick], whole, lengths[pick], rng)


def as_sequences(sample: TensorDictBase, starts: torch.Tensor, horizon: int | None = None) -> TensorDictBase:
    """Lay a flat sample of consecutive sequences out as ``[N, T]`` with an exact mask.

    ``starts`` marks the first step of each sequence. Valid steps form a prefix of
    each row, ``("collector", "mask").sum(-1)`` is each sequence's length, and
    padding repeats the last valid step (so it holds real values, never used).
    ``T`` is ``horizon`` when given (slices: always ``slice_len``), else the longest sequence.
    """
    starts = starts.reshape(-1).bool().clone()
    starts[0] = True
    first = starts.nonzero().squeeze(-1)
    lengths = torch.diff(first, append=torch.tensor([starts.numel()]))
    if horizon is None:
        horizon = int(lengths.max())
    elif int(lengths.max()) > horizon:
        raise ValueError(f"a sequence of {int(lengths.max())} steps does not fit a horizon of {horizon}")
    steps = torch.arange(horizon).unsqueeze(0)
    index = first.unsqueeze(-1) + torch.minimum(steps, lengths.unsqueeze(-1) - 1)
    batch = sample[index]
    batch.set(MASK_KEY, steps < lengths.unsqueeze(-1))
    return batch
