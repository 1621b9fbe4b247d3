"""Episodic PPO (Schulman et al., 2017) on batches of complete episodes, optionally recurrent.

Read top to bottom: the actor-critic network, the acting policy built around it,
masked GAE, then one ``update(batch)`` on a ``[N, T]`` batch of whole episodes
padded with ``("collector", "mask")``. Its settings (``PPOSettings``) are in
``trajrl.configuration.settings``.

Discrete actions come from a categorical policy; ``MultiDiscrete`` ones from one categorical
per part and ``MultiBinary`` ones from one Bernoulli per bit, each part independent (the
log-probability and the entropy summed over the parts); continuous ones from a Gaussian with a
state-independent std, in units where the action space spans [-1, 1], clipped to it
before the environment gets it (as Stable-Baselines3 and RL Baselines3 Zoo do): the
log-probability is the Gaussian's, of the sample before clipping, so the ratio of two
policies stays exact; a tanh squashing would need its Jacobian and has no closed-form entropy.

Each row of a batch is one complete episode, so a recurrent actor and critic run
over it from a zero state at its first step: exactly what the acting policy did
(its state restarts at ``is_init``). Padding never reaches an advantage, a loss
or a statistic: every mean below is over valid steps only.
"""

from __future__ import annotations

import torch
from tensordict.nn import TensorDictSequential
from torch import nn
from torch.distributions import Bernoulli, Categorical, Independent, Normal
from torchrl.modules import IndependentNormal, ProbabilisticActor

from trajrl.algos.greedy import Argmax, Bits, BoundedMean, PartsArgmax
from trajrl.algos.memory import Memory, acting_core, recurrent_core, run_memory
from trajrl.algos.networks import (
    Inputs,
    KeyedModule,
    Parts,
    encoder,
)
from trajrl.base.keys import LOG_PROB_KEY, SAMPLE_KEY


# ---------------------------------------------------------------- network
class MultiCategorical(torch.distributions.Distribution):
    """Independent categoricals, one for each part of a ``MultiDiscrete`` action: ``logits``
    holds the parts' logits side by side (``categories[i]`` of them for part ``i``); a sample
    is ``[..., parts]`` action indices; log-probability and entropy are sums over the parts."""

    arg_constraints: dict = {}

    def __init__(self, logits: torch.Tensor, categories: tuple[int, ...]):
        self.parts = [Categorical(logits=part) for part in logits.split(list(categories), -1)]
        super().__init__(logits.shape[:-1], torch.Size([len(categories)]), validate_args=False)

    def sample(self, sample_shape: torch.Size = torch.Size()) -> torch.Tensor:  # noqa: B008 (torch's own signature)
        return torch.stack([part.sample(sample_shape) for part in self.parts], -1)

    def log_prob(self, value: torch.Tensor) -> torch.Tensor:
        return sum(part.log_prob(value[..., i]) for i, part in enumerate(self.parts))

    def entropy(self) -> torch.Tensor:
        return sum(part.entropy() for part in self.parts)

    @property
    def mode(self) -> torch.Tensor:
        return torch.stack([part.logits.argmax(-1) for part in self.parts], -1)

    @property
    def deterministic_sample(self) -> torch.Tensor:
        return self.mode


class Bernoullis(Independent):
    """Independent Bernoullis, one for each bit of a ``MultiBinary`` action (``logits``
    ``[..., bits]``); its most likely action is each bit's more likely value."""

    def __init__(self, logits: torch.Tensor):
        super().__init__(Bernoulli(logits=logits), 1, validate_args=False)

    def log_prob(self, value: torch.Tensor) -> torch.Tensor:
        return super().log_prob(value.to(self.base_dist.logits.dtype))  # the environment's bits are integers

    @property
    def deterministic_sample(self) -> torch.Tensor:
        return self.mode


class Tower(nn.Module):
    """observation -> its inputs (``Inputs``) -> MLP -> (memory core) -> head with ``out`` outputs."""

    def __init__(
        self,
        parts: Parts,
        out: int,
        sizes: list[int],
        rnn: Memory | str | None,
        hidden_size: int,
        inputs: Inputs | None = None,
    ):
        super().__init__()
        self.encoder = encoder(parts, sizes, inputs, activation=nn.Tanh)
        self.rnn = recurrent_core(rnn, sizes[-1], hidden_size) if rnn else None
        self.head = nn.Linear(hidden_size if rnn else sizes[-1], out)

    def sequence(self, obs: torch.Tensor) -> torch.Tensor:
        """Outputs ``[N, T, out]`` for whole episodes ``[N, T, obs]`` (zero state at t = 0)."""
        features = self.encoder(obs)
        if self.rnn is not None:
            features, _ = run_memory(self.rnn, features)
        return self.head(features)


class ActionBounds(nn.Module):
    """A Gaussian sample ``u`` (in units where the action space spans [-1, 1]) -> the action
    the environment gets: clipped to [-1, 1], then scaled to ``[low, high]`` (a dimension
    without finite bounds gets ``u`` as it is)."""

    def __init__(self, low: torch.Tensor, high: torch.Tensor):
        super().__init__()
        bounded = low.isfinite() & high.isfinite()
        self.register_buffer("bounded", bounded)
        self.register_buffer("loc", torch.where(bounded, (high + low) / 2, 0.0))
        self.register_buffer("scale", torch.where(bounded, (high - low) / 2, 1.0))

    def forward(self, sample: torch.Tensor) -> torch.Tensor:
        return torch.where(self.bounded, self.loc + self.scale * sample.clamp(-1.0, 1.0), sample)


class StateIndependentStd(nn.Module):
    """The Gaussian's standard deviation: one learnt log-std per action dimension."""

    def __init__(self, action_dim: int):
        super().__init__()
        self.log_std = nn.Parameter(torch.zeros(action_dim))  # std 1: half the action range

    def forward(self, mean: torch.Tensor) -> torch.Tensor:
        return self.log_std.exp().expand_as(mean)


class ActorCritic(nn.Module):
    """Separate actor and critic (state value) towers. The actor gives the logits of
    ``actions`` discrete actions, or of each part of a ``MultiDiscrete`` action (its parts'
    ``categories``), or of each bit of a ``MultiBinary`` one (``binary``), or the mean of a
    Gaussian with a state-independent std (continuous actions within ``bounds``, a
    ``(low, high)`` pair)."""

    def __init__(
        self,
        parts: Parts,
        actions: int,
        sizes: list[int],
        rnn: Memory | str | None,
        hidden_size: int,
        inputs: Inputs | None = None,
        bounds: tuple[torch.Tensor, torch.Tensor] | None = None,
        categories: tuple[int, ...] = (),
        binary: bool = False,
    ):
        super().__init__()
        self.actor = Tower(parts, actions, sizes, rnn, hidden_size, inputs)
        self.critic = Tower(parts, 1, sizes, rnn, hidden_size, inputs)
        self.continuous = bounds is not None
        self.categories, self.binary = tuple(categories), binary
        if self.continuous:
            self.std = StateIndependentStd(actions)
            self.bounds = ActionBounds(*bounds)

    @property
    def one_number(self) -> bool:
        """Each action is one index (``Discrete``), not a vector of numbers."""
        return not (self.continuous or self.categories or self.binary)

    def greedy_parts(self) -> tuple[nn.Module, nn.Module | None, nn.Module]:
        """(encoder, memory core or None, greedy choice) of the actor in plain torch, for export: the most likely
        action (each part's, each bit's), or the Gaussian's mean within the bounds."""
        tower = self.actor
        if self.continuous:
            choose: nn.Module = BoundedMean(tower.head, self.bounds)
        elif self.categories:
            choose = PartsArgmax(tower.head, self.categories)
        else:
            choose = Bits(tower.head) if self.binary else Argmax(tower.head)
        return tower.encoder, tower.rnn, choose

    def policy(self, logits: torch.Tensor) -> torch.distributions.Distribution:
        """The distribution of discrete actions of the given ``logits``."""
        if self.categories:
            return MultiCategorical(logits, self.categories)
        return Bernoullis(logits) if self.binary else Categorical(logits=logits)

    def distribution(self, obs: torch.Tensor) -> torch.distributions.Distribution:
        """The policy over whole episodes ``[N, T, obs]``: one distribution per step."""
        out = self.actor.sequence(obs)
        if self.continuous:
            return Independent(Normal(out, self.std(out)), 1)
        return self.policy(out)


def make_actor(net: ActorCritic, action_spec):
    """The acting policy around ``net.actor``: samples actions and stores their log-prob;
    acts on the most likely action (the Gaussian's mean) under deterministic exploration
    (evaluation). Continuous actions: the Gaussian sample is stored as ``SAMPLE_KEY``
    (what the log-prob is of) and the environment gets it clipped to its bounds.

    Returns ``(policy, recurrent core or None)``; the core's primer must be on every env.
    """
    tower = net.actor
    modules = [KeyedModule(tower.encoder, ["observation"], ["features"])]
    core = None
    if tower.rnn is not None:
        core = acting_core(tower.rnn, in_key="features", out_key="features")
        modules.append(core)
    if not net.continuous:
        modules.append(KeyedModule(tower.head, ["features"], ["logits"]))
        policy = ProbabilisticActor(
            TensorDictSequential(*modules),
            in_keys=["logits"],
            distribution_class=net.policy,
            return_log_prob=True,
            log_prob_key=LOG_PROB_KEY,
            spec=action_spec,
        )
        return policy, core
    modules += [KeyedModule(tower.head, ["features"], ["loc"]), KeyedModule(net.std, ["loc"], ["scale"])]
    sample = ProbabilisticActor(
        TensorDictSequential(*modules),
        in_keys=["loc", "scale"],
        out_keys=[SAMPLE_KEY],
        distribution_class=IndependentNormal,
        return_log_prob=True,
        log_prob_key=LOG_PROB_KEY,
    )
    return TensorDictSequential(sample, KeyedModule(net.bounds, [SAMPLE_KEY], ["action"])), core
