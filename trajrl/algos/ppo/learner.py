"""Episodic PPO's update: the passes over one batch of complete episodes (``[N, T]`` with a mask), GAE per
episode, advantage normalisation, losses and every statistic over valid steps only, minibatches of whole
episodes.
"""

from __future__ import annotations

from collections.abc import Iterator

import torch
from tensordict import TensorDictBase
from torchrl.objectives.value.functional import generalized_advantage_estimate

from trajrl.algos.networks import (
    adam,
    clipped_step,
    scale_lr,
)
from trajrl.algos.ppo.networks import ActorCritic
from trajrl.algos.ppo.settings import PPOSettings
from trajrl.algos.sequences import observations_with_next, without_padding_columns
from trajrl.base.errors import RefusedBatch
from trajrl.base.keys import LOG_PROB_KEY, MASK_KEY, SAMPLE_KEY


# ---------------------------------------------------------------- advantages
def masked_gae(
    reward: torch.Tensor,
    value: torch.Tensor,
    next_value: torch.Tensor,
    terminated: torch.Tensor,
    mask: torch.Tensor,
    gamma: float,
    lam: float,
) -> torch.Tensor:
    """GAE over ``[N, T]`` rows that each hold one episode (valid steps a prefix): TorchRL's
    ``generalized_advantage_estimate``, its trace stopped at each episode's last valid step.

    It bootstraps from the next state's value unless the episode terminated there (a
    time-limit truncation still bootstraps). Padded steps enter as zeros (whatever the
    padding holds, nothing of it reaches a valid step) and get 0.
    """
    last = ~torch.cat([mask[:, 1:], torch.zeros_like(mask[:, :1])], 1)  # the next step is not in the episode
    reward, value, next_value = (torch.where(mask, x, 0.0).unsqueeze(-1) for x in (reward, value, next_value))
    advantage, _ = generalized_advantage_estimate(
        gamma, lam, value, next_value, reward, done=last.unsqueeze(-1), terminated=terminated.bool().unsqueeze(-1)
    )
    return torch.where(mask, advantage.squeeze(-1), 0.0)


class RewardScale:
    """Divides rewards by the running standard deviation of the discounted return summed
    forward from each episode's start (as Stable-Baselines3's ``VecNormalize`` and
    gymnasium's ``NormalizeReward`` do): value targets of any task at about unit scale."""

    def __init__(self, gamma: float):
        self.gamma, self.count, self.mean, self.var = gamma, 0, 0.0, 1.0

    def __call__(self, reward: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """``reward`` ``[N, T]`` of whole episodes, scaled (the statistics updated first)."""
        running, returns = torch.zeros_like(reward[:, 0]), torch.zeros_like(reward)
        for t in range(reward.shape[1]):
            running = self.gamma * running + reward[:, t]
            returns[:, t] = running
        seen = returns[mask].double()
        n, total = int(seen.numel()), self.count + int(seen.numel())
        if n:
            mean, var = float(seen.mean()), float(seen.var(unbiased=False))
            delta = mean - self.mean
            self.var = (self.var * self.count + var * n + delta**2 * self.count * n / total) / total
            self.mean, self.count = self.mean + delta * n / total, total
        return reward / (self.var**0.5 + 1e-8)

    def state_dict(self) -> dict:
        return {"count": self.count, "mean": self.mean, "var": self.var}

    def load_state_dict(self, state: dict) -> None:
        self.count, self.mean, self.var = int(state["count"]), float(state["mean"]), float(state["var"])


def masked_mean(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    return torch.where(mask, x, 0.0).sum() / mask.sum().clamp_min(1)


# ---------------------------------------------------------------- algorithm
class PPO:
    """Clipped-surrogate PPO over whole episodes; ``update`` runs every epoch and minibatch."""

    def __init__(
        self,
        net: ActorCritic,
        settings: PPOSettings,
        minibatch_episodes: int = 8,
        total_frames: int = 50_000,
        seed: int = 0,
    ):
        """``minibatch_episodes``: whole episodes per gradient step (``sampler.episodes_per_batch``);
        ``total_frames``: the run's, over which the learning rate (``anneal_lr``) and the clip
        range (``clip_epsilon_end``) decay."""
        self.net = net
        self.params = list(net.parameters())  # listed once: each step clips their gradient
        self.settings, self.minibatch_episodes, self.total_frames = settings, minibatch_episodes, total_frames
        self.optimizer = adam(net, lr=settings.lr, eps=1e-5)
        self.generator = torch.Generator().manual_seed(seed)
        self.reward_scale = RewardScale(settings.gamma) if settings.normalize_rewards else None
        self.updates = 0
        self.frames_seen = 0
        self.clip_epsilon = settings.clip_epsilon  # this batch's (clip_epsilon_end: decays with the frames seen)

    def schedule(self) -> None:
        """This batch's learning rate and clip range, linear in the share of ``total_frames`` learnt
        before it: the first batch at ``lr`` and ``clip_epsilon``, the last near 0 and ``clip_epsilon_end``."""
        s, progress = self.settings, min(1.0, self.frames_seen / self.total_frames)
        if s.anneal_lr:
            scale_lr(self.optimizer, 1.0 - progress)
        if s.clip_epsilon_end is not None:
            self.clip_epsilon = s.clip_epsilon + (s.clip_epsilon_end - s.clip_epsilon) * progress

    @property
    def device(self) -> torch.device:
        """Where the network is: batches are moved there."""
        return self.params[0].device

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
        if self.reward_scale is not None:
            reward = self.reward_scale(reward, mask)
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
        dist = self.net.distribution(batch.get("observation"))
        if self.net.continuous:
            taken = batch.get(SAMPLE_KEY)  # the Gaussian's sample, before clipping
        else:
            taken = batch.get("action").reshape(mask.shape) if self.net.one_number else batch.get("action")
        log_prob = dist.log_prob(taken)
        log_ratio = torch.where(mask, log_prob - batch.get(LOG_PROB_KEY).reshape(mask.shape), 0.0)
        ratio = log_ratio.exp()
        clip = self.clip_epsilon
        surrogate = torch.min(ratio * advantage, ratio.clamp(1 - clip, 1 + clip) * advantage)
        policy_loss = -masked_mean(surrogate, mask)
        value = self.net.critic.sequence(batch.get("observation")).squeeze(-1)
        value_loss = 0.5 * masked_mean((value - returns) ** 2, mask)
        entropy = masked_mean(dist.entropy(), mask)
        loss = policy_loss + s.value_coef * value_loss - s.entropy_coef * entropy
        with torch.no_grad():
            stats = {
                "policy_loss": policy_loss.detach(),
                "value_loss": value_loss.detach(),
                "entropy": entropy.detach(),
                "kl": masked_mean((ratio - 1) - log_ratio, mask),
                "clip_fraction": masked_mean(((ratio - 1).abs() > clip).float(), mask),
            }
        return loss, stats

    def minibatches(self, episodes: int) -> Iterator[torch.Tensor]:
        """The rows of each minibatch: ``epochs`` passes over a batch of ``episodes``, each in a fresh order."""
        for _ in range(self.settings.epochs):
            yield from torch.randperm(episodes, generator=self.generator).split(self.minibatch_episodes)

    def update(self, batch: TensorDictBase) -> dict[str, float]:
        """Learn from one batch of ``[N, T]`` complete episodes (``epochs`` x minibatches) of
        the current policy: ``RefusedBatch`` for one without its mask or the log-probabilities
        it acted with."""
        needed = [MASK_KEY, LOG_PROB_KEY, *([SAMPLE_KEY] if self.net.continuous else [])]
        missing = [key for key in needed if batch.get(key, None) is None]
        if missing:
            raise RefusedBatch(
                f"the batch has no {', '.join(map(repr, missing))}: PPO learns from [N, T] episodes of its own "
                "policy, with the mask and what the policy wrote as it acted (its collector's batches have them)"
            )
        batch = batch.to(self.device)  # the learner's device
        s, mask = self.settings, batch.get(MASK_KEY)
        self.schedule()
        self.frames_seen += int(mask.sum())
        advantage, returns = self.advantages(batch)
        totals: dict[str, float] = {}
        looked, steps, grad_norm = 0, 0, 0.0
        for rows in self.minibatches(mask.shape[0]):
            minibatch = without_padding_columns(batch[rows])
            horizon = minibatch.shape[1]
            loss, stats = self.loss(minibatch, advantage[rows, :horizon], returns[rows, :horizon])
            looked += 1
            for name, value in stats.items():
                totals[name] = totals.get(name, 0.0) + float(value)
            if s.target_kl is not None and float(stats["kl"]) > 1.5 * s.target_kl:
                break  # this batch has moved the policy far enough
            self.optimizer.zero_grad(set_to_none=True)
            loss.backward()
            grad_norm += float(clipped_step(self.optimizer, self.params, s.max_grad_norm, loss, "PPO loss"))
            steps += 1
        self.updates += steps
        with torch.no_grad():
            value, _ = self.values(batch)
        explained = 1 - masked_mean((returns - value.detach()) ** 2, mask) / masked_mean(
            (returns - masked_mean(returns, mask)) ** 2, mask
        ).clamp_min(1e-8)
        return {
            **{name: total / looked for name, total in totals.items()},
            "grad_norm": grad_norm / max(steps, 1),
            "explained_variance": float(explained),
            "lr": self.optimizer.param_groups[0]["lr"],
            "clip_epsilon": self.clip_epsilon,
            "gradient_steps": float(steps),
        }

    def state_dict(self) -> dict:
        return {
            "net": self.net.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "updates": self.updates,
            "frames_seen": self.frames_seen,
            "reward_scale": self.reward_scale.state_dict() if self.reward_scale is not None else None,
            "generator": self.generator.get_state(),  # the minibatches' order: a resumed run draws on
        }

    def load_state_dict(self, state: dict) -> None:
        """Network (in place: the policy built around it follows), optimiser, counters."""
        self.net.load_state_dict(state["net"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.updates, self.frames_seen = int(state["updates"]), int(state["frames_seen"])
        if "generator" in state:
            self.generator.set_state(state["generator"])
        if self.reward_scale is not None and state.get("reward_scale"):
            self.reward_scale.load_state_dict(state["reward_scale"])
