"""Recurrent SAC's update (Haarnoja et al., 2018, with R2D2-style sequences; Christodoulou (2019)'s
SAC-discrete for ``Discrete`` actions, factored per dimension for ``MultiDiscrete`` and ``MultiBinary``
ones): one ``update(batch)`` on a ``[B, T]`` batch of slices with ``("collector", "mask")``, read top to
bottom: the critics towards the n-step return bootstrapped with the soft value of the target critics, then
the actor, then the temperature.

With discrete actions every expectation over the policy is exact (a sum over the actions weighted by
their probabilities; factored: per dimension, ``soft_value``) where the continuous case samples one
action: the critics' soft value, the actor's loss and the entropy the temperature follows.
"""

from __future__ import annotations

import copy
import math

import torch
from tensordict import TensorDictBase
from torch import nn

from trajrl.algos.networks import TargetSync, adam, clipped_step, frozen, read_statistics
from trajrl.algos.rsac.networks import RecurrentActor, critic_features, run_core
from trajrl.algos.rsac.settings import RSACSettings
from trajrl.algos.sequences import (
    learned_steps,
    n_step_return,
    sequence_of,
    stored_state,
    without_padding_columns,
)
from trajrl.base.keys import MASK_KEY, TD_KEY

#: Discrete actions' target entropy by default, as a fraction of log |A| (Ni et al., 2022; Christodoulou's
#: 0.98 keeps a two-action policy almost uniform).
DISCRETE_TARGET_FRACTION = 0.7
#: ``critic_loss=huber``: the TD error past which a critic's loss grows linearly.
HUBER_DELTA = 1.0


def target_entropy(settings: RSACSettings, actions: int, discrete: bool, categories: tuple[int, ...] = ()) -> float:
    """The entropy the temperature aims at: ``target_entropy`` where set; else -action size
    (continuous) or ``target_entropy_fraction`` of the uniform policy's log |A| (discrete).

    A factored action (``categories``, one per dimension) has one temperature, which weighs the policy's
    entropy: the sum of its dimensions' entropies. Its target is therefore the sum of each dimension's
    fraction of log n_d, the same fraction of the uniform joint policy's log |A| = sum_d log n_d: each
    dimension is asked the share of its own uniform entropy a one-dimensional policy is asked, and a
    dimension of many categories is not held to a two-category dimension's entropy (a temperature per
    dimension would be a second control loop per dimension, for no measured gain)."""
    if settings.target_entropy is not None:
        return float(settings.target_entropy)
    if discrete:
        fraction = settings.target_entropy_fraction
        fraction = DISCRETE_TARGET_FRACTION if fraction is None else fraction
        if categories:
            return sum(fraction * math.log(n) for n in categories)
        return fraction * math.log(actions)
    return -float(actions)


#: What the actor does at each step: (action, log pi(action)) sampled for a continuous action;
#: (None, log pi(.) over every action) for a discrete one.
Policy = tuple[torch.Tensor | None, torch.Tensor]


def soft_value(
    critics: nn.ModuleList, features: list[torch.Tensor], policy: Policy, alpha: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Per step, E_pi[min Q(h, a) - alpha log pi(a|h)] over the twin critics (clipped double Q, Fujimoto
    et al., 2018), the policy's entropy and that Q: over the sampled action (continuous), or exactly,
    weighting every action by its probability (discrete; Q then of every action, ``[..., actions]``).

    A factored action (the critics' ``categories``): Q(h, a) = mean_d Q_d(h, a_d) and pi = prod_d pi_d, so
    E_pi[Q] = mean_d sum_{a_d} pi_d(a_d) Q_d(a_d) and the entropy is sum_d H_d, each exact per dimension;
    the twin critics' min is taken per dimension and category (for one dimension, SAC-discrete's min per
    action). Both are one sum over the side-by-side outputs, with Q divided by the dimensions."""
    action, log_prob = policy
    if action is None:
        q = torch.stack([c.values(f) for c, f in zip(critics, features)]).min(0).values
        prob = log_prob.exp()
        dimensions = len(critics[0].categories)
        each = q / dimensions if dimensions else q  # a factored Q is the mean of its dimensions'
        return (prob * (each - alpha * log_prob)).sum(-1), -(prob * log_prob).sum(-1), q
    q = torch.stack([c.value(f, action) for c, f in zip(critics, features)]).min(0).values
    return q - alpha * log_prob, -log_prob, q


def critic_error(q: torch.Tensor, target: torch.Tensor, loss: str) -> torch.Tensor:
    """Each step's loss of a critic: the squared TD error (``mse``), or twice Huber's (``huber``), which
    equals it up to an error of ``HUBER_DELTA`` and grows linearly past it (2 delta |d| - delta^2)."""
    if loss == "mse":
        return (q - target) ** 2
    return 2 * nn.functional.huber_loss(q, target, reduction="none", delta=HUBER_DELTA)


def action_gap(q: torch.Tensor, categories: tuple[int, ...]) -> torch.Tensor:
    """Per step, the best action's Q above the mean action's (factored: each dimension's, averaged)."""
    if categories:
        return torch.stack([action_gap(part, ()) for part in q.split(categories, -1)]).mean(0)
    return q.max(-1).values - q.mean(-1)


def steps_of(policy: Policy, steps: slice) -> Policy:
    """The policy at ``steps`` of the time axis."""
    action, log_prob = policy
    return (None if action is None else action[:, steps]), log_prob[:, steps]


class RewardRMS:
    """The running root mean square of the rewards learnt from (``algo.reward_scaling=rms``): the
    learner divides rewards by it, so a task's rewards times c train as the task's own do."""

    def __init__(self):
        self.count, self.sum_of_squares = 0, 0.0

    def __call__(self, rewards: torch.Tensor) -> float:
        """The statistic with ``rewards`` (the valid steps' of a batch) counted; 1 until a reward
        other than 0 has been seen."""
        self.count += rewards.numel()
        self.sum_of_squares += float(rewards.double().square().sum())
        return math.sqrt(self.sum_of_squares / self.count) if self.sum_of_squares > 0 else 1.0

    def state_dict(self) -> dict:
        return {"count": self.count, "sum_of_squares": self.sum_of_squares}

    def load_state_dict(self, state: dict) -> None:
        self.count, self.sum_of_squares = int(state["count"]), float(state["sum_of_squares"])


class RSAC:
    """Actor, twin critics and their targets, a learnt temperature, one update per batch."""

    def __init__(self, actor: RecurrentActor, critics: nn.ModuleList, settings: RSACSettings, burn_in: int = 0):
        """``burn_in``: the sampler's (``sampler.burn_in``). Batches are rows of slices or episodes, or
        tapes of whole episodes (``trajrl.algos.sequences.is_tape``)."""
        self.actor, self.critics, self.settings, self.burn_in = actor, critics, settings, burn_in
        self.target_critics = copy.deepcopy(critics).requires_grad_(False)
        # each network's parameters, listed once: an update clips, freezes and averages them
        self.actor_params, self.critic_params = list(actor.parameters()), list(critics.parameters())
        self.target_params = list(self.target_critics.parameters())
        self.target_entropy = target_entropy(settings, actor.actions, actor.discrete, actor.categories)
        self.log_alpha = torch.tensor(math.log(settings.init_alpha), device=self.device, requires_grad=True)
        self.actor_optimizer = adam(actor, lr=settings.lr)
        self.critic_optimizer = adam(critics, lr=settings.lr)
        self.target_sync = TargetSync(settings.tau, settings.target_sync_every)
        alpha_lr = settings.lr if settings.alpha_lr is None else settings.alpha_lr
        self.alpha_optimizer = adam([self.log_alpha], lr=alpha_lr)
        self.reward_rms = RewardRMS() if settings.reward_scaling == "rms" else None
        self.updates = 0

    @property
    def device(self) -> torch.device:
        """Where the networks are: batches are moved there."""
        return self.actor_params[0].device

    def actor_features(
        self, sequence: torch.Tensor, batch: TensorDictBase, burn_in: int, starts: torch.Tensor | None, episode_starts
    ) -> torch.Tensor:
        """The actor's core's features over ``sequence``, from the state it stored while acting."""
        state = stored_state(batch, self.actor.state_keys, zero=self.settings.initial_state == "zero")
        return run_core(self.actor.rnn, self.actor.encoder(sequence), state, burn_in, starts, episode_starts)

    def policy(self, features: torch.Tensor) -> Policy:
        """The actor's policy at each step of ``features``."""
        if self.actor.discrete:
            return None, self.actor.head.log_probs(features)
        return self.actor.head.sample(features)

    def update(self, batch: TensorDictBase) -> dict[str, float]:
        """One gradient step of critics, actor and temperature on ``[B, T]`` slices (or a tape). Writes each
        step's ``|TD error|`` (the twin critics' mean; NaN where nothing is learnt) into
        ``batch[TD_KEY]`` for a prioritised sampler, whose ``priority_weight`` (a slice's
        importance weight) scales that slice's critic loss."""
        s = self.settings
        full = batch
        batch = without_padding_columns(batch.to(self.device))  # on the learner's device
        mask = batch.get(MASK_KEY)
        n_seq, horizon = mask.shape
        sequence, starts = sequence_of(batch)  # T + 1 observations
        action = batch.get("action")
        if self.actor.categories:  # a factored action: one index per dimension
            action = action.reshape(n_seq, horizon, -1).long()
        elif self.actor.discrete:
            action = action.reshape(n_seq, horizon)
        else:
            action = action.reshape(n_seq, horizon, -1).float()
        reward = batch.get(("next", "reward")).reshape(n_seq, horizon).float()
        reward_rms = None
        if self.reward_rms is not None:  # algo.reward_scaling=rms
            reward_rms = self.reward_rms(reward[mask])
            reward = reward / reward_rms
        terminated = batch.get(("next", "terminated")).reshape(n_seq, horizon).float()
        burn_in = min(self.burn_in, horizon - 1)
        learn, episode_starts = learned_steps(batch, burn_in)
        n_learn = learn.sum().clamp_min(1)
        alpha = self.log_alpha.exp().detach()

        # The actor and the critics over all T + 1 observations (the actor's policy at the next steps
        # for the targets, at these for its loss)
        actor_features = self.actor_features(sequence, batch, burn_in, starts, episode_starts)
        with torch.no_grad():
            target_features = [f[:, 1:] for f in critic_features(self.target_critics, sequence, burn_in, starts)]
        online = critic_features(self.critics, sequence, burn_in, starts, episode_starts)
        policy = self.policy(actor_features)

        # ---- critics: twin Q towards the n-step return, bootstrapped with the soft value
        # E_pi[min target Q(next, a') - alpha log pi(a'|next)] (n = 1: r + gamma * that); the level of its
        # bonus, alpha x the target entropy a step, fades out over algo.soft_target_fade updates
        with torch.no_grad():
            next_policy = tuple(None if p is None else p.detach() for p in steps_of(policy, slice(1, None)))
            next_value, _, _ = soft_value(self.target_critics, target_features, next_policy, alpha)
            if s.soft_target_fade is not None:  # the level alpha x target fades out: alpha (H - target) after
                faded = min(1.0, self.updates / s.soft_target_fade)
                next_value = next_value - faded * alpha * self.target_entropy
            target = n_step_return(reward, terminated, next_value, mask, s.gamma, s.n_step)
        features = [f[:, :-1] for f in online]
        q_taken = [c.value(f, action) for c, f in zip(self.critics, features)]
        weight = batch.get("priority_weight", None)
        weight = 1.0 if weight is None else weight.reshape(n_seq, horizon)[:, :1]
        losses = [(critic_error(q, target, s.critic_loss) * learn * weight).sum() / n_learn for q in q_taken]
        critic_loss = losses[0] + losses[1]
        self.critic_optimizer.zero_grad(set_to_none=True)
        critic_loss.backward()
        critic_grad = clipped_step(
            self.critic_optimizer, self.critic_params, s.max_grad_norm, critic_loss, "critic loss"
        )
        self.target_sync.after(self.updates + 1, self.target_params, self.critic_params)

        # ---- actor: maximise E_pi[min Q(h, a) - alpha log pi(a|h)] (the critics fixed: their features
        # and weights, whose gradient this loss does not need)
        with frozen(self.critic_params):
            value, entropy, q_now = soft_value(
                self.critics, [f.detach() for f in features], steps_of(policy, slice(None, -1)), alpha
            )
            actor_loss = -(value * learn).sum() / n_learn
            self.actor_optimizer.zero_grad(set_to_none=True)
            actor_loss.backward()
        clipped_step(self.actor_optimizer, self.actor_params, s.max_grad_norm, actor_loss, "actor loss")

        # ---- temperature: keep the policy's entropy near the target; the loss log_alpha (H - target)
        # is linear in log_alpha, so its gradient is H - target, written without a backward pass
        entropy = (entropy.detach() * learn).sum() / n_learn
        self.log_alpha.grad = (entropy - self.target_entropy).to(self.log_alpha.dtype)
        self.alpha_optimizer.step()

        self.updates += 1
        td = torch.stack([(q.detach() - target).abs() for q in q_taken]).mean(0)
        td_error = torch.full(full.shape, float("nan"), device=full.device)
        td_error[:, :horizon] = torch.where(learn, td, float("nan")).to(full.device)
        full.set(TD_KEY, td_error)
        stats = {
            "critic_loss": critic_loss,
            "actor_loss": actor_loss,
            "alpha": alpha,
            "entropy": entropy,
            "q_mean": (q_taken[0].detach() * learn).sum() / n_learn,
            "critic_grad_norm": critic_grad,
            "learn_frac": learn.float().mean(),
        }
        if self.actor.discrete:  # how far the critics tell the actions apart: 0 while they cannot
            stats["action_gap"] = (action_gap(q_now.detach(), self.actor.categories) * learn).sum() / n_learn
        return {
            **read_statistics(stats),
            "lr": self.critic_optimizer.param_groups[0]["lr"],
            **({} if reward_rms is None else {"reward_rms": reward_rms}),
        }

    def state_dict(self) -> dict:
        return {
            "actor": self.actor.state_dict(),
            "critics": self.critics.state_dict(),
            "target_critics": self.target_critics.state_dict(),
            "log_alpha": self.log_alpha.detach(),
            "actor_optimizer": self.actor_optimizer.state_dict(),
            "critic_optimizer": self.critic_optimizer.state_dict(),
            "alpha_optimizer": self.alpha_optimizer.state_dict(),
            "reward_rms": None if self.reward_rms is None else self.reward_rms.state_dict(),
            "updates": self.updates,
        }

    def load_state_dict(self, state: dict) -> None:
        """Networks (in place: the policy built around the actor follows), alpha, optimisers, counter."""
        self.actor.load_state_dict(state["actor"])
        self.critics.load_state_dict(state["critics"])
        self.target_critics.load_state_dict(state["target_critics"])
        with torch.no_grad():
            self.log_alpha.copy_(state["log_alpha"])
        self.actor_optimizer.load_state_dict(state["actor_optimizer"])
        self.critic_optimizer.load_state_dict(state["critic_optimizer"])
        self.alpha_optimizer.load_state_dict(state["alpha_optimizer"])
        if self.reward_rms is not None and state.get("reward_rms"):  # a checkpoint made without it: from scratch
            self.reward_rms.load_state_dict(state["reward_rms"])
        self.updates = int(state["updates"])
