"""Recurrent SAC's networks (Haarnoja et al., 2018, with R2D2-style sequences), for continuous actions
and, as Christodoulou (2019)'s SAC-discrete, for ``Discrete`` ones: an LSTM/GRU actor with a squashed
Gaussian head, or a categorical one; twin recurrent critics, Q(h, a) for a continuous action, Q(h, .)
over every discrete action, each with its own encoder and core; the acting policy around the actor.

The actor starts each slice from the state it stored while acting; the critics, which do not run
while acting, start from zero. The first ``burn_in`` steps of a slice that starts mid-episode only warm
those states: no loss on them, and no gradient through them; a slice that starts its episode learns from
every step (its first ``burn_in`` steps' losses reach the heads only), and the gradient of its later steps
reaches back through the first ones to the episode's first observation (``run_core``).
"""

from __future__ import annotations

import math

import torch
from tensordict.nn import TensorDictSequential
from torch import nn
from torchrl.envs.utils import ExplorationType, exploration_type
from torchrl.modules import MLP

from trajrl.algos.greedy import Argmax, PartsArgmax, TanhMean
from trajrl.algos.memory import Memory, acting_core, recurrent_core, run_memory, state_keys
from trajrl.algos.networks import Inputs, KeyedModule, Parts, encoder


# ---------------------------------------------------------------- networks
def run_core(
    rnn: nn.Module,
    x: torch.Tensor,
    state: tuple[torch.Tensor, ...] | None,
    burn_in: int,
    starts: torch.Tensor | None = None,
    episode_starts: torch.Tensor | None = None,
) -> torch.Tensor:
    """Features ``[B, T, H]``; the first ``burn_in`` steps' features carry no gradient. In the rows
    ``episode_starts`` (``[B]``: slices that start their episode) the state they leave does: the
    later steps' gradient reaches back through them to the episode's first observation, which is
    how a memory of it is learnt; ``starts``: where an episode starts inside the sequence (a tape;
    linear cores; no burn-in)."""
    if burn_in <= 0 or not torch.is_grad_enabled():  # no gradient to stop: one pass
        return run_memory(rnn, x, state, starts)[0]
    if episode_starts is None or not bool(episode_starts.any()):
        with torch.no_grad():
            warm, final = run_memory(rnn, x[:, :burn_in], state)
    else:
        warm, final = run_memory(rnn, x[:, :burn_in], state)
        warm = warm.detach()
        final = tuple(torch.where(episode_starts.view(1, -1, 1), h, h.detach()) for h in final)
    rest, _ = run_memory(rnn, x[:, burn_in:], final)
    return torch.cat([warm, rest], 1)


class SquashedGaussian(nn.Module):
    """features -> action in ``[low, high]``: tanh of a Gaussian sample (its mean when
    exploration is deterministic, as in evaluation)."""

    def __init__(self, in_size: int, action_dim: int, low: torch.Tensor, high: torch.Tensor):
        super().__init__()
        self.net = nn.Linear(in_size, 2 * action_dim)
        self.register_buffer("loc", (high + low) / 2)
        self.register_buffer("scale", (high - low) / 2)

    def sample(self, features: torch.Tensor, deterministic: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
        """(action, log-probability) with the tanh change of variables."""
        mean, log_std = self.net(features).chunk(2, -1)
        std = log_std.clamp(-5, 2).exp()
        u = mean if deterministic else mean + std * torch.randn_like(mean)
        log_prob = (-0.5 * ((u - mean) / std) ** 2 - std.log() - 0.5 * math.log(2 * math.pi)).sum(-1)
        # log(1 - tanh(u)^2) = 2 (log 2 - u - softplus(-2u)), exact where tanh saturates: with
        # log(1 - tanh(u)^2 + eps) a saturated action's log-probability stops at -log(eps) and
        # its gradient at 0, the entropy estimate sticks low and the temperature grows unbounded
        # (Q values diverged on point reach; notebook/learning/hindsight_pilots.md).
        log_det = self.scale.log() + 2 * (math.log(2) - u - nn.functional.softplus(-2 * u))
        return self.loc + self.scale * torch.tanh(u), log_prob - log_det.sum(-1)

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        deterministic = exploration_type() in (
            ExplorationType.DETERMINISTIC,
            ExplorationType.MODE,
            ExplorationType.MEAN,
        )
        return self.sample(features, deterministic)[0]


class CategoricalHead(nn.Module):
    """features -> one of ``actions`` discrete actions: sampled from the softmax of its
    logits (the most likely one when exploration is deterministic, as in evaluation).

    With ``categories`` (a factored action: ``MultiDiscrete``, or ``MultiBinary`` as 2 categories a bit)
    one categorical per dimension, their logits side by side (``actions`` = the sum of the categories):
    the action is ``[..., dimensions]``, one index each (of ``dtype``, the environment's: a ``MultiBinary``'s
    bits are ``int8``), and the policy the product of the dimensions'."""

    def __init__(self, in_size: int, actions: int, categories: tuple[int, ...] = (), dtype: torch.dtype = torch.long):
        super().__init__()
        self.net = nn.Linear(in_size, actions)
        self.categories, self.dtype = tuple(categories), dtype

    def log_probs(self, features: torch.Tensor) -> torch.Tensor:
        """log pi(. | features): ``[..., actions]`` (factored: each dimension's log pi_d side by side)."""
        logits = self.net(features)
        if self.categories:
            return torch.cat([torch.log_softmax(part, -1) for part in logits.split(self.categories, -1)], -1)
        return torch.log_softmax(logits, -1)

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        logits = self.net(features)
        if self.categories:
            return torch.stack([self.choose(part) for part in logits.split(self.categories, -1)], -1).to(self.dtype)
        return self.choose(logits)

    def choose(self, logits: torch.Tensor) -> torch.Tensor:
        """An action from ``logits``: the most likely where exploration is deterministic, else a sample."""
        if exploration_type() in (ExplorationType.DETERMINISTIC, ExplorationType.MODE, ExplorationType.MEAN):
            return logits.argmax(-1)
        return torch.distributions.Categorical(logits=logits).sample()


class RecurrentActor(nn.Module):
    """Encoder, memory core (``trajrl.algos.memory``) and a head: a squashed Gaussian within ``[low, high]`` for a
    continuous action of ``action_dim`` numbers, or (``low`` and ``high`` None) a categorical
    policy over ``action_dim`` discrete actions; with ``categories``, one categorical per dimension of a
    factored action (``action_dim`` their sum), acting with indices of ``action_dtype``."""

    def __init__(
        self,
        parts: Parts,
        action_dim: int,
        sizes: list[int],
        hidden_size: int,
        rnn: Memory | str,
        low: torch.Tensor | None,
        high: torch.Tensor | None,
        inputs: Inputs | None = None,
        categories: tuple[int, ...] = (),
        action_dtype: torch.dtype = torch.long,
    ):
        super().__init__()
        self.discrete = low is None
        self.actions, self.categories = action_dim, tuple(categories)
        self.encoder = encoder(parts, sizes, inputs)
        self.rnn = recurrent_core(rnn, sizes[-1], hidden_size)
        self.head = (
            CategoricalHead(hidden_size, action_dim, self.categories, action_dtype)
            if self.discrete
            else SquashedGaussian(hidden_size, action_dim, low, high)
        )

    @property
    def state_keys(self) -> list[str]:
        return state_keys(self.rnn)

    def greedy_parts(self) -> tuple[nn.Module, nn.Module, nn.Module]:
        """(encoder, memory core, greedy choice) in plain torch, for export: the most likely action, or the
        squashed Gaussian's at its mean."""
        if self.categories:
            return self.encoder, self.rnn, PartsArgmax(self.head.net, self.categories)
        if self.discrete:
            return self.encoder, self.rnn, Argmax(self.head.net)
        return self.encoder, self.rnn, TanhMean(self.head)


class RecurrentCritic(nn.Module):
    """Q(history up to t, a_t): the recurrent core reads observations; a continuous action
    joins after it; with ``discrete``, the head gives the Q-value of each of ``action_dim``
    actions at once.

    With ``categories`` (a factored action) Q is decomposed over the dimensions, as DecQN (Seyde et al.,
    2023) and action branching (Tavakoli et al., 2018) do: Q(h, a) = the mean over dimensions d of
    Q_d(h, a_d), the head giving every Q_d of every category side by side (``action_dim`` = the sum of the
    categories), so that it grows with the sum of the categories, not their product."""

    def __init__(
        self,
        parts: Parts,
        action_dim: int,
        sizes: list[int],
        hidden_size: int,
        rnn: Memory | str,
        inputs: Inputs | None = None,
        discrete: bool = False,
        categories: tuple[int, ...] = (),
    ):
        super().__init__()
        self.discrete, self.categories = discrete, tuple(categories)
        # where each dimension's values begin in the head's outputs (factored actions)
        self.register_buffer("offsets", torch.tensor([0, *self.categories[:-1]]).cumsum(0), persistent=False)
        self.encoder = encoder(parts, sizes, inputs)
        self.rnn = recurrent_core(rnn, sizes[-1], hidden_size)
        self.q = MLP(
            in_features=hidden_size + (0 if discrete else action_dim),
            out_features=action_dim if discrete else 1,
            num_cells=[hidden_size],
            activation_class=nn.ReLU,
        )

    def features(
        self,
        obs: torch.Tensor,
        burn_in: int,
        starts: torch.Tensor | None = None,
        state: tuple[torch.Tensor, ...] | None = None,
        episode_starts: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """The core's features over ``obs``, from ``state`` (None: zero); ``run_core`` says what
        ``burn_in`` and ``episode_starts`` do."""
        return run_core(self.rnn, self.encoder(obs), state, burn_in, starts, episode_starts)

    def value(self, features: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        """Q of ``action`` (continuous: ``[..., action_dim]`` floats; discrete: ``[...]`` indices; factored:
        ``[..., dimensions]`` indices, Q the mean of the dimensions' values)."""
        if self.categories:
            return self.values(features).gather(-1, action.long() + self.offsets).mean(-1)
        if self.discrete:
            return self.values(features).gather(-1, action.long().unsqueeze(-1)).squeeze(-1)
        return self.q(torch.cat([features, action], -1)).squeeze(-1)

    def values(self, features: torch.Tensor) -> torch.Tensor:
        """Discrete actions: the Q-value of every action, ``[..., action_dim]`` (factored: every Q_d(h, a_d))."""
        return self.q(features)


def critic_features(
    critics: nn.ModuleList,
    obs: torch.Tensor,
    burn_in: int,
    starts: torch.Tensor | None = None,
    episode_starts: torch.Tensor | None = None,
) -> list[torch.Tensor]:
    """Each critic's features over ``obs``, from a zero state."""
    return [critic.features(obs, burn_in, starts, None, episode_starts) for critic in critics]


def make_policy(actor: RecurrentActor):
    """The acting policy: stores its recurrent state with each step, restarts at ``is_init``.
    Returns ``(policy, recurrent core)``; the core's primer must be on every env."""
    core = acting_core(actor.rnn, in_key="embed", out_key="features")
    head = KeyedModule(actor.head, ["features"], ["action"])
    policy = TensorDictSequential(KeyedModule(actor.encoder, ["observation"], ["embed"]), core, head)
    return policy, core
