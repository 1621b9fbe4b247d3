"""Tapes: whole stored episodes laid end to end into one sequence (``sampler=tape``), for the
linear memory cores that restart inside a sequence (``trajrl.algos.memory``).

Morad et al. (2024, "Recurrent Reinforcement Learning with Memoroids") batch this way:
no slice cut out of an episode, so no padding, no burn-in and no stored (stale) state; a
core that restarts at each episode start runs the whole tape in one pass.

The layout a learner gets, ``[1, N]``: each episode's steps, then a closing cell that holds
the observation after its last step (``CLOSING_KEY``; ``("collector", "mask")`` false there),
so the value of every step's next observation is one cell on, as in a row of slices
(``trajrl.algos.sequences.sequence_of``); ``is_init`` is true exactly at each episode's first
step. Episodes are drawn uniformly, each at most once per tape (so every stored step is
about equally likely to be learnt from), until ``tape_frames`` steps; the last one is cut
there and its closing cell holds the observation after the cut, which its target
bootstraps from as from a truncation.
"""

from __future__ import annotations

import torch
from tensordict import TensorDictBase
from torchrl.data.replay_buffers.storages import Storage

from trajrl.base import internals
from trajrl.base.keys import CLOSING_KEY, MASK_KEY
from trajrl.replay.slices import StepSliceSampler


class TapeSampler(StepSliceSampler):
    """Whole episodes, drawn without replacement, laid end to end up to ``batch_size`` steps
    (each with its closing cell). It keeps the episode index the slice samplers keep
    (``StepSliceSampler``: updated from the buffer's writer, whoever wrote)."""

    def __init__(self, capacity: int):
        super().__init__(capacity, slice_len=1)

    def sample(self, storage: Storage, batch_size: int) -> tuple[torch.Tensor, dict]:
        size = len(storage)
        self._update_index(storage)
        starts = self._starts
        lengths = torch.diff(starts, append=starts[:1] + size)
        # a run whose first steps were overwritten (the storage wrapped around) is no whole episode
        whole = storage[starts].get("step_count").reshape(-1) == 0
        starts, lengths = starts[whole], lengths[whole]
        if starts.numel() == 0:
            raise RuntimeError("TapeSampler: the buffer holds no complete episode yet.")
        order = torch.randperm(starts.numel(), generator=internals.sampler_rng(self))
        taken = lengths[order].cumsum(0)
        count = min(int((taken < batch_size).sum()) + 1, order.numel())  # episodes until the tape is full
        order = order[:count]
        kept = lengths[order].clone()
        kept[-1] -= (taken[count - 1] - batch_size).clamp_min(0)  # the last one cut at the budget
        cells = kept + 1  # its steps and its closing cell
        episode = torch.repeat_interleave(torch.arange(count), cells)
        offset = torch.arange(int(cells.sum())) - torch.repeat_interleave(cells.cumsum(0) - cells, cells)
        closing = offset == kept[episode]
        index = (starts[order][episode] + torch.minimum(offset, kept[episode] - 1)) % size
        return index, {"is_init": (offset == 0).unsqueeze(-1), CLOSING_KEY: closing}


def as_tape(sample: TensorDictBase) -> TensorDictBase:
    """A tape sample laid out as ``[1, N]``: each closing cell holds the observation after the step
    it repeats and is masked out."""
    closing = sample.get(CLOSING_KEY)
    next_obs = sample.get(("next", "observation"))
    shape = (-1,) + (1,) * (next_obs.dim() - 1)
    sample.set("observation", torch.where(closing.reshape(shape), next_obs, sample.get("observation")))
    sample.set(MASK_KEY, ~closing)
    return sample.unsqueeze(0)
