"""What a learner is, as the loops, the checkpoints and the factory use one (recurrent DQN,
recurrent SAC and PPO each are one): a ``typing.Protocol``, checked by ``isinstance``."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

import torch
from tensordict import TensorDictBase


@runtime_checkable
class Learner(Protocol):
    """Learns from the batches a sampler hands it (or, on-policy, the collector), and keeps
    everything a checkpoint needs to continue.

    ``update(batch)``: one update (PPO: its passes over one batch of complete episodes); returns its
    statistics (``train/<name>`` in metrics.csv). Raises ``trajrl.base.errors.NonFiniteUpdate`` instead
    of taking a step whose loss or gradient is not finite. An off-policy learner writes each
    step's ``|TD error|`` into ``batch[TD_KEY]`` (``[B, T]``; NaN where it learnt nothing), which a
    prioritised sampler reads.
    ``updates``: gradient steps so far. ``device``: where it learns.
    ``state_dict()`` / ``load_state_dict()``: networks, targets, optimisers and counters."""

    updates: int

    @property
    def device(self) -> torch.device: ...

    def update(self, batch: TensorDictBase) -> dict[str, float]: ...

    def state_dict(self) -> dict: ...

    def load_state_dict(self, state: dict) -> None: ...
