"""Complete episodes out of a collector's rollouts, assembled with a few tensor
operations per rollout rather than a few per environment.

TorchRL's collectors with ``trajs_per_batch`` group each rollout's steps by
trajectory id one id at a time (a tensordict slice per environment and a ``cat``
per finished episode): over a vector of 256 environments that costs more than
stepping them. ``EpisodeCollector`` is TorchRL's ``Collector`` with that one step
replaced when it writes into a replay buffer: it writes the same episodes, in the
same order, in the same writes (tests/test_assembly.py compares the two buffers).
"""
from __future__ import annotations

import threading
from typing import Iterator

import torch
from tensordict import TensorDictBase
from torchrl.collectors import Collector

from trajrl.replay.episodes import TRAJ_KEY


def complete_episodes(pending: TensorDictBase) -> tuple[TensorDictBase, TensorDictBase]:
    """Split flat steps into ``(episodes, unfinished)``.

    ``pending`` holds steps of several trajectories, each trajectory's steps in
    time order (earlier rollouts' unfinished steps first). ``episodes``: the
    trajectories whose last step is done, each contiguous, by ascending id (the
    order TorchRL writes them in); ``unfinished``: the other steps, grouped the same way.
    """
    ids = pending.get(TRAJ_KEY).reshape(-1)
    order = torch.sort(ids, stable=True).indices
    done = pending.get(("next", "done")).reshape(ids.numel(), -1).any(-1)
    finished = torch.isin(ids[order], ids[done])
    return pending[order[finished]], pending[order[~finished]]


class EpisodeCollector(Collector):
    """TorchRL's single-process ``Collector`` whose complete-episode writes into a
    replay buffer are assembled by ``complete_episodes``. Without a replay buffer
    (batches yielded to the caller) it is TorchRL's own assembly."""

    _unfinished: TensorDictBase | None = None  # steps of the episodes under way

    def _iter_by_trajectories(self) -> Iterator[TensorDictBase | None]:
        rb = getattr(self, "replay_buffer", None)
        if rb is None or getattr(self, "_ignore_rb", True):
            yield from super()._iter_by_trajectories()
            return
        self._ignore_rb = True  # iterator() must not write the raw rollouts
        self._unfinished = None
        try:
            for batch in self.iterator():
                if batch is None:
                    continue
                flat = batch.reshape(-1)
                pending = flat if self._unfinished is None else torch.cat([self._unfinished, flat])
                episodes, self._unfinished = complete_episodes(pending)
                if self._discards_in_flight_trajectories():
                    self._unfinished = None
                if episodes.shape[0]:
                    rb.extend(episodes)
                yield
        finally:
            self._ignore_rb = False

    def _drop_partial_trajectories(self, traj_ids: list[int]) -> None:
        """A partial reset abandons these episodes under way."""
        if self._unfinished is not None:
            ids = self._unfinished.get(TRAJ_KEY).reshape(-1)
            self._unfinished = self._unfinished[~torch.isin(ids, torch.as_tensor(traj_ids, dtype=ids.dtype))]
        super()._drop_partial_trajectories(traj_ids)

    def _flush_trajectory_assembly(self) -> None:
        """A reset abandons the episodes under way (TorchRL's contract)."""
        self._unfinished = None
        super()._flush_trajectory_assembly()


class StampTrajectoryIds:
    """Post-processing for AsyncBatchedCollector, which writes one completed episode
    at a time but does not number them: gives each a fresh ``("collector", "traj_ids")``."""

    def __init__(self) -> None:
        self._next = 0
        self._lock = threading.Lock()

    def __call__(self, episode: TensorDictBase) -> TensorDictBase:
        with self._lock:
            traj_id, self._next = self._next, self._next + 1
        episode.set(TRAJ_KEY, torch.full(episode.shape, traj_id, dtype=torch.int64))
        return episode
