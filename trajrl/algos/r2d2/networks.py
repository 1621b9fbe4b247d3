"""Recurrent DQN in the manner of R2D2 (Kapturowski et al., 2019), on TorchRL pieces.

Read top to bottom: the Q-network, the acting policy built around it, then one
``update(batch)`` on a ``[B, T]`` batch of slices (or whole episodes). Its settings
(``R2D2Settings``: type, default, range and description of each) are in ``trajrl.configuration.settings``.

Why a loss of our own rather than ``torchrl.objectives.DQNLoss``: in recurrent
mode that loss starts the next-step (target) sequence from a zero state while
the online pass starts from the stored one, so its targets are inconsistent.
Here the online and target networks run over the same sequence of T + 1
observations from the same initial state, and the target is read one step on.
"""

from __future__ import annotations

import torch
from tensordict import TensorDictBase
from tensordict.nn import TensorDictSequential
from torch import nn
from torchrl.envs.utils import ExplorationType, exploration_type
from torchrl.modules import EGreedyModule, QValueModule

from trajrl.algos.greedy import Argmax
from trajrl.algos.memory import Memory, acting_core, recurrent_core, run_memory, state_keys
from trajrl.algos.networks import (
    DuelingHead,
    Inputs,
    KeyedModule,
    Parts,
    encoder,
)
from trajrl.base.keys import WORKER_KEY


# ---------------------------------------------------------------- network
class RecurrentQNet(nn.Module):
    """observation -> its inputs (``Inputs``: standardised) -> MLP encoder -> memory core
    -> one Q-value per action (a linear head, or a dueling one)."""

    def __init__(
        self,
        parts: Parts,
        num_actions: int,
        encoder_sizes: list[int],
        hidden_size: int,
        rnn: Memory | str = "lstm",
        inputs: Inputs | None = None,
        dueling: bool = False,
    ):
        super().__init__()
        self.encoder = encoder(parts, encoder_sizes, inputs)
        self.rnn = recurrent_core(rnn, encoder_sizes[-1], hidden_size)
        self.head = DuelingHead(hidden_size, num_actions) if dueling else nn.Linear(hidden_size, num_actions)

    def sequence_q(
        self, obs: torch.Tensor, state: tuple[torch.Tensor, ...], starts: torch.Tensor | None = None
    ) -> torch.Tensor:
        """Q-values ``[B, T, A]`` for observations ``[B, T, obs]`` from ``state`` (each ``[layers, B, H]``),
        restarting where ``starts`` flags (a tape; linear cores)."""
        return self.run(obs, state, starts)[0]

    def run(
        self, obs: torch.Tensor, state: tuple[torch.Tensor, ...], starts: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, tuple[torch.Tensor, ...]]:
        """Like ``sequence_q`` but also returns the final state."""
        features, final = run_memory(self.rnn, self.encoder(obs), state, starts)
        return self.head(features), final

    @property
    def state_keys(self) -> list[str]:
        """Keys under which the acting policy stores the recurrent state with each step."""
        return state_keys(self.rnn)

    def greedy_parts(self) -> tuple[nn.Module, nn.Module, nn.Module]:
        """(encoder, memory core, greedy choice) in plain torch, for export: the action of the highest Q-value."""
        return self.encoder, self.rnn, Argmax(self.head)


class SpreadEpsilonGreedy(EGreedyModule):
    """TorchRL's ``EGreedyModule`` (its epsilon annealed the same way, kept in checkpoints the
    same way) with each collecting environment exploring at its own rate, as Ape-X's and R2D2's
    actors do: environment ``i`` of ``actors`` at ``epsilon^(1 + spread * i / (actors - 1))``.
    ``i`` comes from the collector slot every step carries (``WORKER_KEY``): slot ``s`` holds
    environments ``s * per_slot`` to ``s * per_slot + per_slot - 1`` (a vector of ``per_slot``)."""

    def __init__(
        self, spec, eps_init: float, eps_end: float, annealing_num_steps: int, spread: float, actors: int, per_slot: int
    ):
        super().__init__(spec=spec, eps_init=eps_init, eps_end=eps_end, annealing_num_steps=annealing_num_steps)
        self.spread, self.actors, self.per_slot = spread, actors, per_slot

    def epsilons(self, tensordict: TensorDictBase) -> torch.Tensor:
        """Each environment's epsilon, shaped as the tensordict's batch."""
        slot = tensordict.get(WORKER_KEY)
        actor = slot * self.per_slot
        if self.per_slot > 1:  # a vector's environments, in order
            actor = actor + torch.arange(slot.numel()).reshape(slot.shape) % self.per_slot
        return self.eps ** (1 + self.spread * actor / max(1, self.actors - 1))

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        if exploration_type() not in (ExplorationType.RANDOM, None):  # evaluation acts greedily
            return tensordict
        action = tensordict.get(self.action_key)
        explore = torch.rand(tensordict.shape) < self.epsilons(tensordict)
        spec = self.spec[self.action_key]  # TorchRL keeps it under the action's key
        spec = spec if spec.shape == action.shape else spec.expand(action.shape)
        explore = explore.reshape(*explore.shape, *([1] * (action.dim() - explore.dim())))
        return tensordict.set(self.action_key, torch.where(explore, spec.rand(), action))


def make_policies(
    qnet: RecurrentQNet,
    action_spec,
    eps_start: float,
    eps_end: float,
    eps_decay_frames: int,
    spread: dict | None = None,
):
    """The acting policies around ``qnet``: (greedy, epsilon-greedy, the EGreedyModule).

    They share ``qnet``'s parameters; the recurrent module stores its state with
    every step and restarts from zero where ``is_init`` is set. ``spread``: ``{spread, actors,
    per_slot}`` gives each collecting environment its own epsilon (``SpreadEpsilonGreedy``).
    """
    core = acting_core(qnet.rnn, in_key="embed", out_key="features")
    greedy = TensorDictSequential(
        KeyedModule(qnet.encoder, ["observation"], ["embed"]),
        core,
        KeyedModule(qnet.head, ["features"], ["action_value"]),
        QValueModule(spec=action_spec, action_value_key="action_value"),
    )
    anneal = dict(spec=action_spec, eps_init=eps_start, eps_end=eps_end, annealing_num_steps=max(1, eps_decay_frames))
    egreedy = EGreedyModule(**anneal) if spread is None else SpreadEpsilonGreedy(**anneal, **spread)
    return greedy, TensorDictSequential(greedy, egreedy), egreedy, core
