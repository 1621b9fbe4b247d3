"""Episodic PPO for a run: its actor-critic, the policy around CPU copies of it and the learner."""

from __future__ import annotations

from trajrl.algos.agent import Agent, AgentNeeds, action_bounds, memory_of, on_cpu
from trajrl.algos.networks import CpuCopies
from trajrl.algos.ppo.learner import PPO
from trajrl.algos.ppo.networks import ActorCritic, make_actor
from trajrl.base.kinds import CONTINUOUS, MULTI_BINARY


def build_ppo(needs: AgentNeeds) -> Agent:
    """Actor-critic (recurrent or not), its acting policy and the PPO learner."""
    a, spaces = needs.settings, needs.spaces
    bounds = action_bounds(needs.action_spec) if spaces.action_kind == CONTINUOUS else None
    net = ActorCritic(
        spaces.parts,
        spaces.actions,
        list(a.encoder_sizes),
        memory_of(a) if a.recurrent else None,
        a.hidden_size,
        needs.inputs,
        bounds,
        categories=spaces.action_parts,
        binary=spaces.action_kind == MULTI_BINARY,
    ).to(needs.device)
    acting, evaluated = on_cpu(net), on_cpu(net)
    policy, core = make_actor(acting, needs.action_spec)
    algo = PPO(net, a, minibatch_episodes=needs.episodes_per_batch, total_frames=needs.total_frames, seed=needs.seed)
    return Agent(
        algo=algo,
        greedy_policy=make_actor(evaluated, needs.action_spec)[0],
        policy=policy,
        primer=core.make_tensordict_primer() if core is not None else None,
        acting=CpuCopies([(acting, net)]),
        evaluated=CpuCopies([(evaluated, net)]),
        greedy_net=evaluated,
    )
