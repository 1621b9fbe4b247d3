"""The recurrent DQN for a run: its Q-network, the policies around CPU copies of it and the learner."""

from __future__ import annotations

from trajrl.algos.agent import Agent, AgentNeeds, memory_of, on_cpu
from trajrl.algos.networks import CpuCopies
from trajrl.algos.r2d2.learner import R2D2
from trajrl.algos.r2d2.networks import RecurrentQNet, make_policies


def build_r2d2(needs: AgentNeeds) -> Agent:
    """Recurrent Q-network, its policies and the R2D2 learner."""
    a, spaces = needs.settings, needs.spaces
    qnet = RecurrentQNet(
        spaces.parts,
        spaces.actions,
        list(a.encoder_sizes),
        a.hidden_size,
        memory_of(a),
        needs.inputs,
        dueling=a.dueling,
    ).to(needs.device)
    acting, evaluated = on_cpu(qnet), on_cpu(qnet)
    spread = None
    if a.eps_spread > 0:  # each collecting environment its own epsilon
        spread = dict(spread=a.eps_spread, actors=needs.actors, per_slot=needs.actors_per_slot)
    anneal = (a.eps_start, a.eps_end, a.eps_decay_frames)
    _, policy, exploration, core = make_policies(acting, needs.action_spec, *anneal, spread)
    algo = R2D2(qnet, a, burn_in=needs.burn_in)
    return Agent(
        algo=algo,
        greedy_policy=make_policies(evaluated, needs.action_spec, *anneal)[0],
        policy=policy,
        primer=core.make_tensordict_primer(),
        acting=CpuCopies([(acting, qnet)]),
        evaluated=CpuCopies([(evaluated, qnet)]),
        greedy_net=evaluated,
        exploration=exploration,
        recurrent_net=qnet,
        per_environment=spread is not None,
    )
