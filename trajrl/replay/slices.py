"""Slices inside episodes whose starts are drawn per stored step: uniformly, or by
priority (R2D2's prioritised replay), in plain torch.

What TorchRL 0.14.1 has, and lacks: its ``SliceSampler`` draws an episode uniformly
and then a slice in it, so a buffer of many short early episodes hands the learner
mostly those, and the long episodes of a good policy are rarely replayed (on
CartPole without velocities that bias held recurrent DQN near a return of 100).
Its ``Sequence`` sample unit does expand anchors drawn per stored step into windows
(``episode_boundary="stop"`` moves a window back at its episode's end, as here), so
the uniform draw alone could be a ``RandomSampler`` with that unit. The priorities
could not: its ``PrioritizedSampler`` needs TorchRL's C++ segment trees, whose
extension in the torchrl 0.14.1 wheel does not load against torch 2.13 (undefined
symbol), and it would miss episodes written by worker processes into a shared
buffer, since those writes never reach the learner's sampler. This one keeps a
priority per storage position and learns of new steps from the buffer's writer,
whoever wrote them; one sampler for both draws keeps the ``[N, T]`` batch, its
``is_init`` and the stored states' index (``SparseStates``) the same with or
without priorities.
"""

from __future__ import annotations

from typing import Any

import torch
from torchrl.data.replay_buffers.samplers import Sampler
from torchrl.data.replay_buffers.storages import Storage

from trajrl.base import internals
from trajrl.base.keys import TRAJ_KEY
from trajrl.replay.episodes import find_runs, run_steps
from trajrl.replay.states import SparseStates


class StepSliceSampler(Sampler):
    """Slices of ``slice_len`` steps inside one episode, started at a step drawn with
    probability ``p_i^alpha / sum_j p_j^alpha`` (``alpha=0``: uniformly over steps);
    importance weights ``(N P(i))^-beta`` (normalised by their max) in ``priority_weight``.

    A slice starts at the drawn step, moved back if the episode ends sooner, and is
    shorter only when the whole episode is. ``is_init`` marks each slice's first step.
    New steps get the largest priority seen so far.

    The episodes' starts are kept up to date as the buffer is written: each sample
    reads only the steps written since the last one (the buffer's writer counts
    them, whichever process wrote), including what wrap-around overwrote. ``follow``
    gives it the writer; without one it finds the episodes in the whole storage at
    every sample (and cannot sample by priority).
    """

    def __init__(
        self,
        capacity: int,
        slice_len: int,
        alpha: float = 0.0,
        beta: float = 0.0,
        eps: float = 1e-6,
        traj_key: Any = TRAJ_KEY,
        states: SparseStates | None = None,
    ):
        self.capacity, self.slice_len = capacity, slice_len
        self.states = states  # the state kept every k steps only: slices start there (trajrl.replay.states)
        self.alpha, self.beta, self.eps, self.traj_key = alpha, beta, eps, traj_key
        self.priority = torch.zeros(capacity)
        self.max_priority = 1.0
        self.writer = None
        self.hindsight = None  # HindsightGoals (trajrl.replay.hindsight): substituted goals drawn with each sample
        self._starts = torch.zeros(0, dtype=torch.long)  # sorted storage positions where an episode begins
        self._indexed: int | None = None  # the writer's count of written steps when the starts were last updated
        self._loaded_at: int | None = None  # after a load: that count where the loaded priorities were kept

    def follow(self, writer) -> None:
        """Keep the episode index up to date from ``writer``'s count of written steps."""
        self.writer = writer

    def _update_index(self, storage: Storage) -> torch.Tensor:
        """The positions written since the last call (all of them after a rebuild),
        with ``self._starts`` brought up to date."""
        size = len(storage)
        written = int(internals.writer_write_count(self.writer)) if self.writer is not None else None
        fresh = written is None or self._indexed is None or written - self._indexed >= size
        if fresh:
            starts, lengths = find_runs(storage[:].get(self.traj_key))
            if written is not None and starts.numel() == 1 and int(lengths[0]) == size == storage.max_size:
                # one episode fills it: it begins where the last write did
                starts = torch.tensor([int(internals.writer_cursor(self.writer)) % size])
            since, self._loaded_at = self._loaded_at, None
            self._starts, self._indexed = starts, written
            if since is not None and written is not None and written - since < size:  # loaded: keep priorities
                return self._written_since(since, written, size)
            return torch.arange(size)
        new = written - self._indexed
        self._indexed = written
        if new == 0:
            return torch.zeros(0, dtype=torch.long)
        cursor = int(internals.writer_cursor(self.writer))
        changed = self._written_since(written - new, written, size)  # the new steps
        # Whether a step begins an episode depends on the step before it: recheck the new
        # steps and the one after them (its predecessor changed), if the storage has it.
        check = torch.cat([changed, torch.tensor([cursor % size])]) if size == storage.max_size else changed
        ids = storage[check].get(self.traj_key).reshape(-1)
        before = storage[(check - 1) % size].get(self.traj_key).reshape(-1)
        begins = (ids != before) | ((check == 0) & (size < storage.max_size))
        kept = self._starts[~torch.isin(self._starts, check)]
        self._starts = torch.cat([kept, check[begins]]).sort().values
        return changed

    def _written_since(self, since: int, written: int, size: int) -> torch.Tensor:
        """The storage positions of the steps written after the writer's count was ``since``."""
        new = written - since
        return (int(internals.writer_cursor(self.writer)) - new + torch.arange(new)) % size

    def sample(self, storage: Storage, batch_size: int) -> tuple[torch.Tensor, dict]:
        size = len(storage)
        new = self._update_index(storage)
        num_slices = max(1, batch_size // self.slice_len)
        if self.alpha > 0:  # by priority: new steps get the largest one seen so far
            if self.writer is None:
                raise RuntimeError(
                    "StepSliceSampler with priorities needs follow(<the buffer's writer>) "
                    "to tell new steps from old ones"
                )
            self.priority[new] = self.max_priority
            weights = (self.priority[:size] + self.eps) ** self.alpha
            probability = weights / weights.sum()
            picked = torch.multinomial(probability, num_slices, replacement=True, generator=internals.sampler_rng(self))
        else:  # uniformly over the stored steps: no per-step bookkeeping
            picked = torch.randint(size, (num_slices,), generator=internals.sampler_rng(self))
        starts = self._starts
        lengths = torch.diff(starts, append=starts[:1] + size)

        # The run (episode) of each picked step, by binary search over the runs' starts;
        # a step before the first start belongs to the last run, which wraps around.
        run = (torch.searchsorted(starts, picked, right=True) - 1) % starts.numel()
        offset = (picked - starts[run]) % size
        run_len = lengths[run]
        if self.states is None:  # the slice holds the picked step, moved back if its episode ends sooner
            slice_len = run_len.clamp_max(self.slice_len)
            first = torch.minimum(offset, run_len - slice_len)
        else:  # it starts at a step with a kept state: the one at or before the picked step
            first, first_count, keep = self._kept_start(storage, picked, offset, run_len)
            if not bool(keep.any()):
                raise RuntimeError(
                    "no slice can start where its recurrent state is kept (sampler.state_every="
                    f"{self.states.every}): sample once more episodes are stored; if the batches written "
                    "carry no state, store it with every step (sampler.state_every=null), start slices "
                    "from a zero state (algo.initial_state=zero) or write batches with the policy's state"
                )
            again = torch.multinomial(keep.float(), num_slices, replacement=True, generator=internals.sampler_rng(self))
            pick = torch.where(keep, torch.arange(num_slices), again)  # the others: slices drawn again
            run, first, run_len = run[pick], first[pick], run_len[pick]
            first_count = first_count[pick]
            slice_len = (run_len - first).clamp_max(self.slice_len)
        _, steps, index = run_steps(starts[run] + first, slice_len, size)
        is_init = steps == 0
        if self.alpha > 0:
            importance = self._importance(probability, starts[run] + first, run_len - first, size)
        else:
            importance = torch.ones(len(first))
        info = {"is_init": is_init.unsqueeze(-1), "priority_weight": torch.repeat_interleave(importance, slice_len)}
        if self.states is not None:  # each slice's first state, on all its steps (the learner reads the first)
            for key, state in self.states.read((starts[run] + first) % size, first_count).items():
                info[key] = torch.repeat_interleave(state, slice_len, dim=0)
        if self.hindsight is not None:
            rng = internals.sampler_rng(self)
            info.update(self.hindsight.draw(storage, starts[run], run_len, first, slice_len, rng))
        return index, info

    def _importance(
        self, probability: torch.Tensor, begin: torch.Tensor, left: torch.Tensor, size: int
    ) -> torch.Tensor:
        """Each slice's importance weight ``(P_uniform / P)^beta`` (normalised by the batch's
        largest): ``P`` is the probability that the slice is drawn, the sum over every step whose
        pick leads to it, and ``P_uniform`` that sum's share of steps under uniform picks, so
        ``(N * mean probability of those steps)^-beta`` (equal priorities: 1, as the uniform
        sampler's). A pick leads to the slice starting at storage position ``begin`` (``left``
        steps before its episode ends) from each step that starts at it: the slice's first step
        alone inside the episode; every step from it to the episode's end where the slice was
        moved back to fit (the episode's last slice, or the whole of a shorter episode); with kept
        states (``sampler.state_every``), the steps up to the next kept state."""
        if self.states is None:
            picks = torch.where(left <= self.slice_len, left, 1)
        else:
            picks = left.clamp_max(self.states.every)
        slice_of, _, steps = run_steps(begin, picks, size)
        mean = torch.zeros(len(begin)).index_add_(0, slice_of, probability[steps]) / picks
        importance = (size * mean) ** (-self.beta)
        return importance / importance.max()

    def _kept_start(
        self, storage: Storage, picked: torch.Tensor, offset: torch.Tensor, run_len: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(first, its step count, kept)``: the offset in its run of the step with a kept
        state at or before each picked step (or the next one, where that state is gone; or
        else the episode's first step, where a write without states kept none), that step's
        place in its episode, and whether there is one in the run."""
        every, size = self.states.every, len(storage)
        step_count = internals.storage_contents(storage).get("step_count").reshape(-1)
        count = step_count[picked]
        back = count % every
        first, at = offset - back, count - back
        kept = (first >= 0) & self.states.has_state((picked - back) % size, at)
        ahead = first + every
        kept_ahead = (ahead < run_len) & self.states.has_state((picked - back + every) % size, at + every)
        from_start = step_count[(picked - offset) % size] == 0  # the run begins its episode: a zero state
        first = torch.where(kept, first, torch.where(kept_ahead, ahead, 0))
        at = torch.where(kept, at, torch.where(kept_ahead, at + every, 0))
        return first, at, kept | kept_ahead | from_start

    def update_priority(self, index: torch.Tensor, priority: torch.Tensor, *, storage=None) -> None:
        index, priority = torch.as_tensor(index).reshape(-1), torch.as_tensor(priority, dtype=torch.float).reshape(-1)
        self.priority[index] = priority
        self.max_priority = max(self.max_priority, float(priority.max()))

    def _empty(self) -> None:
        self.priority.zero_()
        self.max_priority = 1.0
        self._indexed = None

    def state_dict(self) -> dict[str, Any]:
        """Priorities, and the writer's count they were kept at (the episode index is rebuilt from
        the storage after a load; only steps written after that count get the largest priority)."""
        return {"priority": self.priority, "max_priority": self.max_priority, "indexed": self._indexed}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self.priority.copy_(state_dict["priority"])
        self.max_priority = float(state_dict["max_priority"])
        self._indexed, self._loaded_at = None, state_dict.get("indexed")

    def dumps(self, path) -> None:
        torch.save(self.state_dict(), f"{path}/prioritized_slice_sampler.pt")

    def loads(self, path) -> None:
        self.load_state_dict(torch.load(f"{path}/prioritized_slice_sampler.pt", weights_only=True))
