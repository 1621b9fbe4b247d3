"""The recurrent DQN's update, R2D2-style (Kapturowski et al., 2019): one ``update(batch)`` on a ``[B, T]``
batch of slices (or whole episodes): n-step double-Q targets from a target network run over the same
T + 1 observations from the same stored state as the online one (TorchRL's recurrent ``DQNLoss`` starts the
target sequence from zero: its targets are inconsistent).
"""

from __future__ import annotations

import copy

import torch
from tensordict import TensorDictBase
from torch import nn

from trajrl.algos.networks import (
    TargetSync,
    adam,
    clipped_step,
    read_statistics,
)
from trajrl.algos.r2d2.networks import RecurrentQNet
from trajrl.algos.r2d2.settings import R2D2Settings
from trajrl.algos.sequences import learned_steps, n_step_return, sequence_of, stored_state, without_padding_columns
from trajrl.base.keys import TD_KEY


def signed_hyperbolic(x: torch.Tensor, eps: float = 1e-3) -> torch.Tensor:
    return x.sign() * ((x.abs() + 1).sqrt() - 1) + eps * x


def signed_parabolic(x: torch.Tensor, eps: float = 1e-3) -> torch.Tensor:
    """Inverse of ``signed_hyperbolic``."""
    z = ((1 + 4 * eps * (eps + 1 + x.abs())).sqrt() - 1) / (2 * eps)
    return x.sign() * (z.square() - 1)


# ---------------------------------------------------------------- algorithm
class R2D2:
    """Online and target recurrent Q-networks, an optimiser, and one update per batch."""

    def __init__(self, qnet: RecurrentQNet, settings: R2D2Settings, burn_in: int = 0):
        """``burn_in``: the sampler's (``sampler.burn_in``). Batches are rows of slices or episodes, or
        tapes of whole episodes (``trajrl.algos.sequences.is_tape``)."""
        self.qnet = qnet
        self.target = copy.deepcopy(qnet).requires_grad_(False)
        self.params, self.target_params = list(qnet.parameters()), list(self.target.parameters())  # listed once
        self.settings, self.burn_in = settings, burn_in
        self.optimizer = adam(qnet, lr=settings.lr)
        self.target_sync = TargetSync(settings.target_tau, settings.target_sync_every)
        self.updates = 0

    @property
    def device(self) -> torch.device:
        """Where the networks are: batches are moved there."""
        return self.params[0].device

    def initial_state(self, batch: TensorDictBase) -> tuple[torch.Tensor, ...]:
        """State at each sequence's first step, as ``[layers, B, H]`` tensors."""
        return stored_state(batch, self.qnet.state_keys, zero=self.settings.initial_state == "zero")

    def update(self, batch: TensorDictBase) -> dict[str, float]:
        """One gradient step on ``batch`` of shape ``[B, T]`` with ``("collector", "mask")``.

        ``step_count == 0`` at a sequence's first step means it starts its episode.

        Returns training statistics; writes each step's ``|TD error|`` into ``batch[TD_KEY]``
        (NaN where it did not learn; on ``batch``'s device), from which a prioritised sampler
        takes the priorities.
        """
        s = self.settings
        full, batch = batch, batch.to(self.device)  # the learner's device
        batch = without_padding_columns(batch)
        mask = batch.get(("collector", "mask"))
        n_seq, horizon = mask.shape
        sequence, starts = sequence_of(batch)  # T + 1 observations
        state = self.initial_state(batch)
        burn_in = min(self.burn_in, horizon - 1)
        learn, starts_episode = learned_steps(batch, burn_in)

        # Online pass: burn-in first; its gradient only flows for slices that start their episode.
        if burn_in > 0:
            q_burn, burned = self.qnet.run(sequence[:, :burn_in], state)
            keep = starts_episode.view(1, n_seq, 1)
            burned = tuple(torch.where(keep, h, h.detach()) for h in burned)
            q_rest = self.qnet.sequence_q(sequence[:, burn_in:], burned)
            q_all = torch.cat([q_burn, q_rest], 1)
        else:
            q_all = self.qnet.sequence_q(sequence, state, starts)
        with torch.no_grad():
            q_target_all = self.target.sequence_q(sequence, state, starts)

        action = batch.get("action").reshape(n_seq, horizon, -1).long()
        if action.shape[-1] > 1:  # one-hot actions
            action = action.argmax(-1, keepdim=True)
        q_taken = q_all[:, :-1].gather(-1, action).squeeze(-1)

        with torch.no_grad():
            next_q_online, next_q_target = q_all[:, 1:], q_target_all[:, 1:]
            chooser = next_q_online if s.double_q else next_q_target
            bootstrap = next_q_target.gather(-1, chooser.argmax(-1, keepdim=True)).squeeze(-1)
            if s.value_rescaling:
                bootstrap = signed_parabolic(bootstrap)
            reward = batch.get(("next", "reward")).reshape(n_seq, horizon).float()
            terminated = batch.get(("next", "terminated")).reshape(n_seq, horizon).float()
            target = n_step_return(reward, terminated, bootstrap, mask, s.gamma, s.n_step)
            if s.value_rescaling:
                target = signed_hyperbolic(target)

        td = (q_taken - target) * learn
        weight = batch.get("priority_weight", None)
        weight = weight.reshape(n_seq, horizon)[:, 0] if weight is not None else torch.ones(n_seq, device=self.device)
        per_seq = (nn.functional.smooth_l1_loss(q_taken, target, reduction="none") * learn).sum(-1)
        loss = (weight * per_seq).sum() / learn.sum().clamp_min(1)

        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        grad_norm = clipped_step(self.optimizer, self.params, s.max_grad_norm, loss, "Q loss")
        self.updates += 1
        self.target_sync.after(self.updates, self.target_params, self.params)

        abs_td = td.detach().abs()
        td_error = torch.full(full.shape, float("nan"), device=full.device)
        td_error[:, :horizon] = torch.where(learn, abs_td, float("nan")).to(full.device)
        full.set(TD_KEY, td_error)
        learnt = learn.sum().clamp_min(1)
        return read_statistics(
            {
                "loss": loss,
                "q_mean": (q_taken.detach() * learn).sum() / learnt,
                "td_abs_mean": abs_td.sum() / learnt,
                "grad_norm": grad_norm,
                "learn_frac": learn.float().mean(),
            }
        )

    def state_dict(self) -> dict:
        return {
            "qnet": self.qnet.state_dict(),
            "target": self.target.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "updates": self.updates,
        }

    def load_state_dict(self, state: dict) -> None:
        """Networks (in place: the policies built around them follow), optimiser, counter."""
        self.qnet.load_state_dict(state["qnet"])
        self.target.load_state_dict(state["target"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.updates = int(state["updates"])
