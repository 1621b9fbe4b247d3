"""Slices inside episodes whose starts are drawn per stored step: uniformly, or by
priority (R2D2's prioritised replay), in plain torch.

Why not TorchRL's samplers: its ``SliceSampler`` draws an episode uniformly and
then a slice in it, so a buffer of many short early episodes hands the learner
mostly those, and the long episodes of a good policy are rarely replayed (on
CartPole without velocities that bias held recurrent DQN near a return of 100).
Its ``PrioritizedSliceSampler`` needs TorchRL's C++ segment trees, whose
extension in the torchrl 0.14.1 wheel does not load against torch 2.13
(undefined symbol), and it would miss episodes written by worker processes into
a shared buffer, since those writes never reach the learner's sampler. This one
keeps a priority per storage position and notices new episodes by their
trajectory ids, whoever wrote them.
"""
from __future__ import annotations

from typing import Any

import torch
from torchrl.data.replay_buffers.samplers import Sampler
from torchrl.data.replay_buffers.storages import Storage

from trajrl.data.episodes import TRAJ_KEY, find_runs, run_steps


class StepSliceSampler(Sampler):
    """Slices of ``slice_len`` steps inside one episode, started at a step drawn with
    probability ``p_i^alpha / sum_j p_j^alpha`` (``alpha=0``: uniformly over steps);
    importance weights ``(N P(i))^-beta`` (normalised by their max) in ``priority_weight``.

    A slice starts at the drawn step, moved back if the episode ends sooner, and is
    shorter only when the whole episode is. ``is_init`` marks each slice's first step.
    New steps get the largest priority seen so far.
    """

    def __init__(self, capacity: int, slice_len: int, alpha: float = 0.0, beta: float = 0.0,
                 eps: float = 1e-6, traj_key: Any = TRAJ_KEY):
        self.capacity, self.slice_len = capacity, slice_len
        self.alpha, self.beta, self.eps, self.traj_key = alpha, beta, eps, traj_key
        self.priority = torch.zeros(capacity)
        self.ids_seen = torch.full((capacity,), -1, dtype=torch.long)
        self.max_priority = 1.0

    def sample(self, storage: Storage, batch_size: int) -> tuple[torch.Tensor, dict]:
        size = len(storage)
        traj_ids = storage[:].get(self.traj_key).reshape(-1)
        num_slices = max(1, batch_size // self.slice_len)
        if self.alpha > 0:  # by priority: new steps get the largest one seen so far
            new = traj_ids != self.ids_seen[:size]
            self.priority[:size][new] = self.max_priority
            self.ids_seen[:size] = traj_ids
            weights = (self.priority[:size] + self.eps) ** self.alpha
            probability = weights / weights.sum()
            picked = torch.multinomial(probability, num_slices, replacement=True, generator=self._rng)
            importance = (size * probability[picked]) ** (-self.beta)
            importance = importance / importance.max()
        else:  # uniformly over the stored steps: no per-step bookkeeping
            picked = torch.randint(size, (num_slices,), generator=self._rng)
            importance = torch.ones(num_slices)

        # The run (episode) of each picked step, by binary search over the runs' starts;
        # a step before the first start belongs to the last run, which wraps around.
        starts, lengths = find_runs(traj_ids)
        run = (torch.searchsorted(starts, picked, right=True) - 1) % starts.numel()
        offset = (picked - starts[run]) % size
        run_len = lengths[run]
        slice_len = run_len.clamp_max(self.slice_len)
        first = torch.minimum(offset, run_len - slice_len)
        _, steps, index = run_steps(starts[run] + first, slice_len, size)
        is_init = steps == 0
        return index, {"is_init": is_init.unsqueeze(-1),
                       "priority_weight": torch.repeat_interleave(importance, slice_len)}

    def update_priority(self, index: torch.Tensor, priority: torch.Tensor, *, storage=None) -> None:
        index, priority = torch.as_tensor(index).reshape(-1), torch.as_tensor(priority, dtype=torch.float).reshape(-1)
        self.priority[index] = priority
        self.max_priority = max(self.max_priority, float(priority.max()))

    def _empty(self) -> None:
        self.priority.zero_()
        self.ids_seen.fill_(-1)
        self.max_priority = 1.0

    def state_dict(self) -> dict[str, Any]:
        return {"priority": self.priority, "ids_seen": self.ids_seen, "max_priority": self.max_priority}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self.priority.copy_(state_dict["priority"])
        self.ids_seen.copy_(state_dict["ids_seen"])
        self.max_priority = float(state_dict["max_priority"])

    def dumps(self, path) -> None:
        torch.save(self.state_dict(), f"{path}/prioritized_slice_sampler.pt")

    def loads(self, path) -> None:
        self.load_state_dict(torch.load(f"{path}/prioritized_slice_sampler.pt", weights_only=True))
