"""Recurrent SAC for a run: its actor and twin critics, the policy around CPU copies of the actor and
the learner (SAC-discrete where the actions are ``Discrete``; one categorical per dimension and critics
decomposed per dimension where they are ``MultiDiscrete`` or ``MultiBinary``)."""

from __future__ import annotations

from torch import nn

from trajrl.algos.agent import Agent, AgentNeeds, action_bounds, memory_of, on_cpu
from trajrl.algos.networks import CpuCopies
from trajrl.algos.rsac import factored_categories
from trajrl.algos.rsac.learner import RSAC
from trajrl.algos.rsac.networks import RecurrentActor, RecurrentCritic, make_policy
from trajrl.base.kinds import DISCRETE


def build_rsac(needs: AgentNeeds) -> Agent:
    """Recurrent actor, twin recurrent critics, the acting policy and the SAC learner."""
    a, spaces = needs.settings, needs.spaces
    categories = factored_categories(spaces)
    discrete = spaces.action_kind == DISCRETE or bool(categories)
    low, high = (None, None) if discrete else action_bounds(needs.action_spec)
    sizes, memory = list(a.encoder_sizes), memory_of(a)
    parts, action_dim = spaces.parts, sum(categories) if categories else spaces.actions
    actor = RecurrentActor(
        parts, action_dim, sizes, a.hidden_size, memory, low, high, needs.inputs, categories, needs.action_spec.dtype
    ).to(needs.device)
    critics = nn.ModuleList(
        [
            RecurrentCritic(parts, action_dim, sizes, a.hidden_size, memory, needs.inputs, discrete, categories)
            for _ in range(2)
        ]
    ).to(needs.device)
    acting, evaluated = on_cpu(actor), on_cpu(actor)
    policy, core = make_policy(acting)
    return Agent(
        algo=RSAC(actor, critics, a, burn_in=needs.burn_in),
        greedy_policy=make_policy(evaluated)[0],
        policy=policy,
        primer=core.make_tensordict_primer(),
        acting=CpuCopies([(acting, actor)]),
        evaluated=CpuCopies([(evaluated, actor)]),
        greedy_net=evaluated,
        recurrent_net=actor,
    )
