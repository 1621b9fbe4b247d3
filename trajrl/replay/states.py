"""The recurrent state stored with every step, recomputed with the learner's network.

A slice that starts mid-episode begins from the state stored with its first step: the
state of the network that acted then, often thousands of updates older than the one
that learns. Burn-in (R2D2) washes part of the difference out; the rest makes the
learner fit values to states its own network never reaches (docs/learning/tuning.md
measures it). ``refresh_states`` runs the current network over every stored run of
steps and writes the states back, under the buffer's write lock.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch
from tensordict import TensorDict

from trajrl.replay.episodes import TRAJ_KEY, buffer_locked, find_runs, run_steps

#: ``(observations [N, obs], run [N], offset [N], lengths of the runs (longest first), initial state
#: of each run: each [layers, runs, H]) -> the state before each step: each [N, layers, H]``
#: (``trajrl.algos.networks.states_along`` with a network's encoder and core).
StatesAlong = Callable[..., tuple[torch.Tensor, ...]]


@torch.no_grad()
def refresh_states(buffer, keys: list[str], states_along: StatesAlong) -> int:
    """Recompute the state stored under ``keys`` with every step of ``buffer`` (a flat
    storage of whole episodes): each run of steps from the state stored with its first
    step (zero where an episode starts; what survives of an episode whose head was
    overwritten keeps its first state). Returns the steps refreshed."""
    with buffer_locked(buffer):
        storage = buffer.storage
        size = len(storage)
        if size == 0:
            return 0
        stored = storage[:size]
        starts, lengths = find_runs(stored.get(TRAJ_KEY))
        lengths, order = lengths.sort(descending=True)
        starts = starts[order]
        run, offset, index = run_steps(starts, lengths, size)
        initial = tuple(stored.get(key)[starts].transpose(0, 1).contiguous() for key in keys)
        states = states_along(stored.get("observation")[index], run, offset, lengths, initial)
        fresh = TensorDict(dict(zip(keys, states)), [index.numel()])
        storage.set(index, fresh, set_cursor=False)
    return int(index.numel())


@dataclass
class StateRefresh:
    """``refresh_states`` of ``buffer`` every ``every`` updates of the learner."""

    buffer: object
    keys: list[str]
    states_along: StatesAlong
    every: int
    refreshes: int = 0

    def __call__(self, updates: int) -> None:
        if updates % self.every == 0:
            refresh_states(self.buffer, self.keys, self.states_along)
            self.refreshes += 1
