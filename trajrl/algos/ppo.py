"""Episodic PPO (Schulman et al., 2017) on batches of complete episodes, optionally recurrent.

Read top to bottom: the actor-critic network, the acting policy built around it,
masked GAE, then one ``update(batch)`` on a ``[N, T]`` batch of whole episodes
padded with ``("collector", "mask")``. Its settings (``PPOSettings``) are in
``trajrl.settings``.

Each row of a batch is one complete episode, so a recurrent actor and critic run
over it from a zero state at its first step: exactly what the acting policy did
(its state restarts at ``is_init``). Padding never reaches an advantage, a loss
or a statistic: every mean below is over valid steps only.
"""
from __future__ import annotations

import torch
from tensordict import TensorDictBase
from tensordict.nn import TensorDictSequential
from torch import nn
from torch.distributions import Categorical
from torchrl.modules import ProbabilisticActor

from trajrl.algos.networks import KeyedModule, acting_core, encoder, recurrent_core
from trajrl.algos.sequences import observations_with_next, without_padding_columns
from trajrl.replay.episodes import MASK_KEY
from trajrl.settings import PPOSettings

LOG_PROB_KEY = "action_log_prob"  # where the acting policy stores log pi(a|s)


# ---------------------------------------------------------------- network
class Tower(nn.Module):
    """observation -> standardisation -> MLP -> (LSTM/GRU) -> head with ``out`` outputs."""

    def __init__(self, obs_dim: int, out: int, sizes: list[int], rnn: str | None, hidden_size: int,
                 obs_loc: torch.Tensor | None = None, obs_scale: torch.Tensor | None = None):
        super().__init__()
        self.encoder = encoder(obs_dim, sizes, obs_loc, obs_scale, activation=nn.Tanh)
        self.kind = rnn
        self.rnn = recurrent_core(rnn, sizes[-1], hidden_size) if rnn else None
        self.head = nn.Linear(hidden_size if rnn else sizes[-1], out)

    def sequence(self, obs: torch.Tensor) -> torch.Tensor:
        """Outputs ``[N, T, out]`` for whole episodes ``[N, T, obs]`` (zero state at t = 0)."""
        features = self.encoder(obs)
        if self.rnn is not None:
            features, _ = self.rnn(features)
        return self.head(features)


class ActorCritic(nn.Module):
    """Separate actor (action logits) and critic (state value) towers."""

    def __init__(self, obs_dim: int, num_actions: int, sizes: list[int], rnn: str | None, hidden_size: int,
                 obs_loc: torch.Tensor | None = None, obs_scale: torch.Tensor | None = None):
        super().__init__()
        self.actor = Tower(obs_dim, num_actions, sizes, rnn, hidden_size, obs_loc, obs_scale)
        self.critic = Tower(obs_dim, 1, sizes, rnn, hidden_size, obs_loc, obs_scale)


def make_actor(net: ActorCritic, action_spec):
    """The acting policy around ``net.actor``: samples actions and stores their log-prob;
    acts on the most likely action under deterministic exploration (evaluation).

    Returns ``(policy, recurrent core or None)``; the core's primer must be on every env.
    """
    tower = net.actor
    modules = [KeyedModule(tower.encoder, ["observation"], ["features"])]
    core = None
    if tower.rnn is not None:
        core = acting_core(tower.rnn, in_key="features", out_key="features")
        modules.append(core)
    modules.append(KeyedModule(tower.head, ["features"], ["logits"]))
    policy = ProbabilisticActor(
        TensorDictSequential(*modules), in_keys=["logits"], distribution_class=Categorical,
        return_log_prob=True, log_prob_key=LOG_PROB_KEY, spec=action_spec,
    )
    return policy, core


# ---------------------------------------------------------------- advantages
def masked_gae(reward: torch.Tensor, value: torch.Tensor, next_value: torch.Tensor, terminated: torch.Tensor,
               mask: torch.Tensor, gamma: float, lam: float) -> torch.Tensor:
    """GAE over ``[N, T]`` rows that each hold one episode (valid steps a prefix).

    The trace stops at each episode's last valid step; it bootstraps from the
    next state's value unless the episode terminated there (a time-limit
    truncation still bootstraps). Padded steps get 0.
    """
    alive = 1.0 - terminated.float()
    delta = torch.where(mask, reward + gamma * alive * next_value - value, 0.0)
    advantage = torch.zeros_like(delta)
    running = torch.zeros_like(delta[:, 0])
    carries = torch.cat([mask[:, 1:], torch.zeros_like(mask[:, :1])], 1).float()  # the next step is in the episode
    for t in reversed(range(delta.shape[1])):
        running = delta[:, t] + gamma * lam * carries[:, t] * running
        advantage[:, t] = running
    return torch.where(mask, advantage, 0.0)


def masked_mean(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    return torch.where(mask, x, 0.0).sum() / mask.sum().clamp_min(1)


# ---------------------------------------------------------------- algorithm
class PPO:
    """Clipped-surrogate PPO over whole episodes; ``update`` runs every epoch and minibatch."""

    def __init__(self, net: ActorCritic, settings: PPOSettings, minibatch_episodes: int = 8,
                 total_frames: int = 50_000, seed: int = 0):
        """``minibatch_episodes``: whole episodes per gradient step (``sampler.episodes_per_batch``);
        ``total_frames``: the run's, over which the learning rate anneals (``anneal_lr``)."""
        self.net = net
        self.settings, self.minibatch_episodes, self.total_frames = settings, minibatch_episodes, total_frames
        self.optimizer = torch.optim.Adam(net.parameters(), lr=settings.lr, eps=1e-5)
        self.generator = torch.Generator().manual_seed(seed)
        self.updates = 0
        self.frames_seen = 0

    def values(self, batch: TensorDictBase) -> tuple[torch.Tensor, torch.Tensor]:
        """V(s_t) and V(s_{t+1}) ``[N, T]``, the critic run over each episode's T + 1 observations."""
        value_all = self.net.critic.sequence(observations_with_next(batch)).squeeze(-1)
        return value_all[:, :-1], value_all[:, 1:]

    def advantages(self, batch: TensorDictBase) -> tuple[torch.Tensor, torch.Tensor]:
        """(advantage, return target) ``[N, T]`` under the current critic."""
        s, mask = self.settings, batch.get(MASK_KEY)
        with torch.no_grad():
            value, next_value = self.values(batch)
        reward = batch.get(("next", "reward")).reshape(mask.shape)
        terminated = batch.get(("next", "terminated")).reshape(mask.shape)
        advantage = masked_gae(reward, value, next_value, terminated, mask, s.gamma, s.gae_lambda)
        return advantage, advantage + value

    def loss(self, batch: TensorDictBase, advantage: torch.Tensor, returns: torch.Tensor):
        """The PPO loss and its statistics on a ``[n, T]`` minibatch of episodes."""
        s, mask = self.settings, batch.get(MASK_KEY)
        if s.normalize_advantage and mask.sum() > 1:
            mean = masked_mean(advantage, mask)
            std = masked_mean((advantage - mean) ** 2, mask).sqrt()
            advantage = (advantage - mean) / (std + 1e-8)
        dist = Categorical(logits=self.net.actor.sequence(batch.get("observation")))
        log_prob = dist.log_prob(batch.get("action").reshape(mask.shape))
        log_ratio = torch.where(mask, log_prob - batch.get(LOG_PROB_KEY).reshape(mask.shape), 0.0)
        ratio = log_ratio.exp()
        surrogate = torch.min(ratio * advantage, ratio.clamp(1 - s.clip_epsilon, 1 + s.clip_epsilon) * advantage)
        policy_loss = -masked_mean(surrogate, mask)
        value = self.net.critic.sequence(batch.get("observation")).squeeze(-1)
        value_loss = 0.5 * masked_mean((value - returns) ** 2, mask)
        entropy = masked_mean(dist.entropy(), mask)
        loss = policy_loss + s.value_coef * value_loss - s.entropy_coef * entropy
        with torch.no_grad():
            stats = {
                "policy_loss": policy_loss.detach(), "value_loss": value_loss.detach(), "entropy": entropy.detach(),
                "kl": masked_mean((ratio - 1) - log_ratio, mask),
                "clip_fraction": masked_mean(((ratio - 1).abs() > s.clip_epsilon).float(), mask),
            }
        return loss, stats

    def update(self, batch: TensorDictBase) -> dict[str, float]:
        """Learn from one batch of ``[N, T]`` complete episodes (``epochs`` x minibatches)."""
        s, mask = self.settings, batch.get(MASK_KEY)
        self.frames_seen += int(mask.sum())
        if s.anneal_lr:
            for group in self.optimizer.param_groups:
                group["lr"] = s.lr * max(0.0, 1.0 - self.frames_seen / self.total_frames)
        advantage, returns = self.advantages(batch)
        totals: dict[str, float] = {}
        steps = 0
        for _ in range(s.epochs):
            order = torch.randperm(mask.shape[0], generator=self.generator)
            for rows in order.split(self.minibatch_episodes):
                minibatch = without_padding_columns(batch[rows])
                horizon = minibatch.shape[1]
                loss, stats = self.loss(minibatch, advantage[rows, :horizon], returns[rows, :horizon])
                self.optimizer.zero_grad(set_to_none=True)
                loss.backward()
                stats["grad_norm"] = nn.utils.clip_grad_norm_(self.net.parameters(), s.max_grad_norm)
                self.optimizer.step()
                for name, value in stats.items():
                    totals[name] = totals.get(name, 0.0) + float(value)
                steps += 1
        self.updates += steps
        with torch.no_grad():
            value, _ = self.values(batch)
        explained = 1 - masked_mean((returns - value.detach()) ** 2, mask) / masked_mean(
            (returns - masked_mean(returns, mask)) ** 2, mask).clamp_min(1e-8)
        return {**{name: total / steps for name, total in totals.items()},
                "explained_variance": float(explained), "lr": self.optimizer.param_groups[0]["lr"],
                "gradient_steps": float(steps)}

    def state_dict(self) -> dict:
        return {"net": self.net.state_dict(), "optimizer": self.optimizer.state_dict(), "updates": self.updates,
                "frames_seen": self.frames_seen}

    def load_state_dict(self, state: dict) -> None:
        """Network (in place: the policy built around it follows), optimiser, counters."""
        self.net.load_state_dict(state["net"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.updates, self.frames_seen = int(state["updates"]), int(state["frames_seen"])
