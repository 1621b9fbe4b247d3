"""Training batches out of a replay buffer: each sample laid out as ``[N, T]`` with
``("collector", "mask")``, and sequence priorities written back (R2D2)."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from tensordict import TensorDictBase
from torchrl.data import TensorDictReplayBuffer

from trajrl.base.errors import RunInterrupted
from trajrl.base.keys import MASK_KEY, TD_KEY
from trajrl.replay.episodes import as_sequences
from trajrl.replay.hindsight import HindsightGoals
from trajrl.replay.tapes import as_tape


@dataclass
class SequenceSampler:
    """Draws ``[N, T]`` batches (with ``("collector", "mask")``) from a replay buffer: rows of
    slices, whole episodes or transitions, or (``tape``) one ``[1, N]`` tape."""

    buffer: TensorDictReplayBuffer
    transitions: bool  # each sample is N single transitions (random sampler)
    horizon: int | None = None  # T of every batch (slice samplers: slice_len); None: the longest sequence
    priority_eta: float | None = None  # prioritised: a sequence's priority is eta * max |td| + (1 - eta) * mean |td|
    hindsight: HindsightGoals | None = None  # relabels the rows its sampler flagged (trajrl.replay.hindsight)
    tape: bool = False  # each sample is one tape of whole episodes (trajrl.replay.tapes)

    def sample(self) -> TensorDictBase:
        try:
            flat = self.buffer.sample()
        except RuntimeError as err:
            # a signal's RunInterrupted raised inside the buffer's transforms: TorchRL runs them in a tensordict
            # unlock_() block, whose exit turns an exception that is not an Exception into this RuntimeError
            if isinstance(err.__context__, RunInterrupted):
                raise err.__context__ from None
            raise
        if self.tape:
            return as_tape(flat)
        starts = torch.ones(flat.shape, dtype=torch.bool) if self.transitions else flat.get("is_init")
        batch = as_sequences(flat, starts, self.horizon)
        return self.hindsight.relabel(batch) if self.hindsight is not None else batch

    def update_priority(self, batch: TensorDictBase) -> None:
        """Give the steps each sampled sequence learnt from its priority (R2D2), from the
        ``|TD error|`` the learner wrote on them (NaN elsewhere: burn-in, padding and a tape's
        closing cells keep the priority they had)."""
        if self.priority_eta is None:
            return
        td = batch.get(TD_KEY, None)
        if td is None:
            raise RuntimeError(
                f"a prioritised sampler reads the |TD error| the learner writes on each sampled step "
                f"(batch[{TD_KEY!r}]), and this learner wrote none: write it in the learner's update "
                "(trajrl.algos.learner.Learner), or sample slices uniformly (sampler=slice)"
            )
        priority = sequence_priority(td, self.priority_eta)
        learnt = batch.get(MASK_KEY) & ~td.isnan()
        self.buffer.update_priority(batch.get("index")[learnt], priority.unsqueeze(-1).expand(learnt.shape)[learnt])


def sequence_priority(td_abs: torch.Tensor, eta: float) -> torch.Tensor:
    """``eta * max |td| + (1 - eta) * mean |td|`` per row over the steps learnt from (the
    ones that are not NaN; ``[N, T]`` in, ``[N]`` out; 0 for a row with none)."""
    learnt = ~td_abs.isnan()
    td_abs = torch.where(learnt, td_abs, 0.0)
    return eta * td_abs.max(-1).values + (1 - eta) * td_abs.sum(-1) / learnt.sum(-1).clamp_min(1)
