"""An algorithm added from outside trajrl, as a user would (docs/development.md, "An algorithm"):
importing this module registers ``algo=toy_q``, one-step recurrent Q-learning without a target
network, on trajrl's recurrent Q-network. From the CLI: ``env.import_module=toy_algo algo=toy_q``."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from tensordict import TensorDictBase

from trajrl.algos.agent import Agent, AgentNeeds, memory_of, on_cpu
from trajrl.algos.networks import CpuCopies
from trajrl.algos.r2d2.networks import RecurrentQNet, make_policies
from trajrl.algos.registry import AlgoSpec, register_algo
from trajrl.algos.sequences import sequence_of, stored_state, without_padding_columns
from trajrl.algos.settings import NetworkSettings
from trajrl.base.declare import FRACTION, option, setting
from trajrl.base.keys import MASK_KEY, TD_KEY
from trajrl.base.kinds import DISCRETE


@dataclass
class ToyQSettings(NetworkSettings):
    """One-step recurrent Q-learning, no target network."""

    name: str = option("toy_q", checkpointed=True)
    epsilon: float = setting(0.2, "the share of random actions while collecting", range=FRACTION)


class ToyQ:
    """Q(h, a) towards r + gamma max_a' Q(h', a') on each step of a batch of slices."""

    def __init__(self, qnet: RecurrentQNet, settings: ToyQSettings):
        self.qnet, self.settings = qnet, settings
        self.optimizer = torch.optim.Adam(qnet.parameters(), lr=settings.lr)
        self.updates = 0

    @property
    def device(self) -> torch.device:
        return next(self.qnet.parameters()).device

    def update(self, batch: TensorDictBase) -> dict[str, float]:
        full, batch = batch, without_padding_columns(batch.to(self.device))
        mask = batch.get(MASK_KEY)
        n_seq, horizon = mask.shape
        sequence, starts = sequence_of(batch)
        q = self.qnet.sequence_q(sequence, stored_state(batch, self.qnet.state_keys), starts)
        action = batch.get("action").reshape(n_seq, horizon, -1).long()
        if action.shape[-1] > 1:  # one-hot actions
            action = action.argmax(-1, keepdim=True)
        q_taken = q[:, :-1].gather(-1, action).squeeze(-1)
        with torch.no_grad():
            reward = batch.get(("next", "reward")).reshape(n_seq, horizon).float()
            terminated = batch.get(("next", "terminated")).reshape(n_seq, horizon).float()
            target = reward + self.settings.gamma * (1 - terminated) * q[:, 1:].max(-1).values
        loss = ((q_taken - target) ** 2 * mask).sum() / mask.sum().clamp_min(1)
        td = torch.full(full.shape, float("nan"), device=full.device)  # each step's |TD error| for priorities
        td[:, :horizon] = torch.where(mask, (q_taken - target).detach().abs(), float("nan")).to(full.device)
        full.set(TD_KEY, td)
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        self.optimizer.step()
        self.updates += 1
        return {"loss": float(loss)}

    def state_dict(self) -> dict:
        return {"qnet": self.qnet.state_dict(), "optimizer": self.optimizer.state_dict(), "updates": self.updates}

    def load_state_dict(self, state: dict) -> None:
        self.qnet.load_state_dict(state["qnet"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.updates = int(state["updates"])


def build_toy_q(needs: AgentNeeds) -> Agent:
    s, spaces = needs.settings, needs.spaces
    qnet = RecurrentQNet(spaces.parts, spaces.actions, list(s.encoder_sizes), s.hidden_size, memory_of(s), needs.inputs)
    qnet = qnet.to(needs.device)
    acting, evaluated = on_cpu(qnet), on_cpu(qnet)
    _, policy, exploration, core = make_policies(acting, needs.action_spec, s.epsilon, s.epsilon, 1)
    return Agent(
        algo=ToyQ(qnet, s),
        greedy_policy=make_policies(evaluated, needs.action_spec, 0.0, 0.0, 1)[0],
        policy=policy,
        primer=core.make_tensordict_primer(),
        acting=CpuCopies([(acting, qnet)]),
        evaluated=CpuCopies([(evaluated, qnet)]),
        greedy_net=evaluated,
        exploration=exploration,
        recurrent_net=qnet,
    )


register_algo(
    AlgoSpec(
        name="toy_q",
        settings=ToyQSettings,
        build=build_toy_q,
        actions=(DISCRETE,),
        brings={"loop.warmup_frames": 300},
        slices_per_batch=8,
    )
)
