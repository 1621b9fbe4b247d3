"""Complete episodes out of a collector's rollouts, assembled with a few tensor
operations per rollout rather than a few per environment.

TorchRL's collectors with ``trajs_per_batch`` group each rollout's steps by
trajectory id one id at a time (a tensordict slice per environment and a ``cat``
per finished episode): over a vector of 256 environments that costs more than
stepping them. ``EpisodeCollector`` is TorchRL's ``Collector`` with that one step
replaced by ``EpisodesUnderWay`` when it writes into a replay buffer: it writes the
same episodes, in the same order, in the same writes (tests/unit/test_assembly.py
compares the two buffers). The collector's private methods it overrides are in
``trajrl.base.internals.EpisodeAssemblyOverride``.
"""

from __future__ import annotations

import threading

import torch
from tensordict import TensorDictBase
from torchrl.collectors import Collector

from trajrl.base import internals
from trajrl.base.keys import TRAJ_KEY


class EpisodesUnderWay:
    """The steps of the episodes under way, between rollouts.

    ``add(steps)`` takes a rollout's flat steps and returns the episodes they complete.
    Each step is copied once into a staging tensordict (a ring that doubles when the
    episodes under way outgrow it) and once out of it, with its episode; only the steps'
    trajectory ids and rows are re-sorted. Re-concatenating every step under way with
    each rollout instead cost in proportion to their number: at 256 environments, a
    copy of every running episode's steps per rollout.
    """

    def __init__(self, min_capacity: int = 1024) -> None:
        self.min_capacity = min_capacity  # rows of the ring when it is first made
        self.stage: TensorDictBase | None = None
        self.ids = torch.empty(0, dtype=torch.int64)  # each step under way: its trajectory id, in arrival order
        self.rows = torch.empty(0, dtype=torch.int64)  # and its place: a running count, its row modulo the capacity
        self.count = 0  # steps copied in so far

    def add(self, steps: TensorDictBase) -> TensorDictBase:
        """The episodes ``steps`` complete, with their earlier steps: each contiguous
        in time order, by ascending id (the order TorchRL writes them in). ``steps``
        is flat, each trajectory's steps in time order."""
        n = steps.shape[0]
        step_ids = steps.get(TRAJ_KEY).reshape(-1)
        self._make_room(steps, n)
        self._put(self.count, steps)
        ids = torch.cat([self.ids, step_ids])
        rows = torch.cat([self.rows, torch.arange(self.count, self.count + n)])
        self.count += n
        done = steps.get(("next", "done")).reshape(n, -1).any(-1)
        ended = torch.isin(ids, step_ids[done])
        order = torch.sort(ids[ended], stable=True).indices
        episodes = self.stage[rows[ended][order] % self.capacity]
        self.ids, self.rows = ids[~ended], rows[~ended]
        return episodes

    def drop(self, traj_ids: torch.Tensor | list[int]) -> None:
        """Forget the steps of these trajectories (their episodes were abandoned)."""
        keep = ~torch.isin(self.ids, torch.as_tensor(traj_ids).to(self.ids.dtype))
        self.ids, self.rows = self.ids[keep], self.rows[keep]

    def clear(self) -> None:
        """Forget every episode under way."""
        self.ids, self.rows = self.ids[:0], self.rows[:0]

    def __len__(self) -> int:
        return self.ids.numel()

    @property
    def capacity(self) -> int:
        return self.stage.shape[0] if self.stage is not None else 0

    def _make_room(self, steps: TensorDictBase, n: int) -> None:
        """Grow the ring (twice over, at least) when ``n`` more steps would overwrite one under way."""
        oldest = int(self.rows.min()) if self.rows.numel() else self.count
        needed = self.count + n - oldest
        if needed <= self.capacity:
            return
        capacity = max(2 * self.capacity, 2 * needed, self.min_capacity)
        stage = steps.apply(lambda t: t.new_empty((capacity, *t.shape[1:])), batch_size=[capacity])
        if self.rows.numel():
            stage[: self.rows.numel()] = self.stage[self.rows % self.capacity]
        self.stage, self.rows, self.count = stage, torch.arange(self.rows.numel()), self.rows.numel()

    def _put(self, start: int, steps: TensorDictBase) -> None:
        """Copy ``steps`` into the ring from running count ``start`` (in two pieces where it wraps)."""
        begin, n = start % self.capacity, steps.shape[0]
        first = min(n, self.capacity - begin)
        self.stage[begin : begin + first] = steps[:first]
        if first < n:
            self.stage[: n - first] = steps[first:]


class EpisodeCollector(internals.EpisodeAssemblyOverride, Collector):
    """TorchRL's single-process ``Collector`` whose complete-episode writes into a
    replay buffer are assembled by ``EpisodesUnderWay``. Without a replay buffer
    (batches yielded to the caller) it is TorchRL's own assembly."""

    def new_episode_assembly(self) -> EpisodesUnderWay:
        return EpisodesUnderWay()


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
