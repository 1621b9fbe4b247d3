"""Algorithm factory: the networks, the acting policies around them, and the learner."""
from __future__ import annotations

from dataclasses import dataclass

import torch
from tensordict.nn import TensorDictSequential
from torch import nn
from torchrl.envs.transforms import TensorDictPrimer

from trajrl.algos.ppo import PPO, ActorCritic, PPOSettings, make_actor
from trajrl.algos.networks import KeyedModule
from trajrl.algos.r2d2 import R2D2, R2D2Settings, RecurrentQNet, make_policies
from trajrl.algos.rsac import RSAC, RecurrentActor, RecurrentCritic, RSACSettings, make_policy
from trajrl.data.episodes import VERSION_KEY
from trajrl.factory.env import make_env, observation_stats

#: Mean and std of the observations the networks standardise with (algo.normalize_observations), or None.
Observations = tuple[torch.Tensor, torch.Tensor] | None


class PolicyVersion(nn.Module):
    """Stamps every step the collector takes with the version of the weights it
    acted with (``policy_version``). The version is a buffer of the behaviour
    policy, so it travels with each weight push; the learner bumps it before
    pushing, and the staleness of a sample is the learner's version minus its steps'."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("version", torch.zeros((), dtype=torch.int32))  # stored with every step

    def forward(self, observation: torch.Tensor) -> torch.Tensor:
        return self.version.expand(observation.shape[:-1]).clone()

    def bump(self) -> int:
        """The next version (in place, so the pushed weights carry it)."""
        self.version += 1
        return int(self.version)


@dataclass
class Agent:
    algo: R2D2 | RSAC | PPO
    greedy: nn.Module                 # acts deterministically (evaluation)
    explore: nn.Module                # acts during collection (stamps ``policy_version``)
    egreedy: nn.Module | None         # R2D2's EGreedyModule, annealed with frames (None: no epsilon)
    primer: TensorDictPrimer | None   # puts the recurrent state in every environment (None: not recurrent)
    version: PolicyVersion | None = None  # the behaviour policy's weight version

    def not_stored(self) -> list:
        """What the policy writes on each step that learning never reads: its layers'
        outputs (Q-values included: the environments count the non-greedy actions)
        and the recurrent state after the step (a slice starts from the state
        before its first step, which is stored)."""
        after = [("next", key) for key in self.primer.primers.keys()] if self.primer is not None else []
        return ["embed", "features", "action_value", "chosen_action_value", *after]

    def policy_state(self) -> dict[str, nn.Module]:
        """The behaviour policy's own state, beside the learner's: epsilon and weight version."""
        return {name: module for name, module in (("epsilon", self.egreedy), ("version", self.version))
                if module is not None}


def with_version(agent: Agent) -> Agent:
    """The agent whose collection policy also stamps ``policy_version`` on each step."""
    version = PolicyVersion()
    explore = TensorDictSequential(agent.explore, KeyedModule(version, ["observation"], [VERSION_KEY]))
    return Agent(agent.algo, agent.greedy, explore, agent.egreedy, agent.primer, version)


def action_spec(env_cfg):
    probe_env = make_env(env_cfg.id, dict(env_cfg.kwargs or {}), env_cfg.import_module)
    spec = probe_env.action_spec
    probe_env.close()
    return spec


def build_r2d2(algo_cfg, env_cfg, obs_dim: int, num_actions: int, burn_in: int, priority_eta: float,
               planned_updates: int = 0, observations: Observations = None) -> Agent:
    """Recurrent Q-network, its policies and the R2D2 learner from ``algo_cfg``."""
    a = algo_cfg
    loc, scale = observations or (None, None)
    qnet = RecurrentQNet(obs_dim, num_actions, list(a.encoder_sizes), int(a.hidden_size), a.rnn, loc, scale,
                         dueling=bool(a.get("dueling", False)))
    spec = action_spec(env_cfg)
    greedy, explore, egreedy, core = make_policies(qnet, spec, a.eps_start, a.eps_end, int(a.eps_decay_frames))
    algo = R2D2(qnet, R2D2Settings(
        gamma=a.gamma, n_step=a.n_step, burn_in=burn_in, initial_state=a.initial_state, double_q=a.double_q,
        value_rescaling=a.value_rescaling, lr=a.lr, lr_end=a.get("lr_end"), decay_updates=planned_updates,
        max_grad_norm=a.max_grad_norm, target_tau=a.target_tau,
        priority_eta=priority_eta,
    ))
    if a.eval_network == "target":  # the slowly averaged network acts in evaluation
        greedy = make_policies(algo.target, spec, a.eps_start, a.eps_end, int(a.eps_decay_frames))[0]
    return Agent(algo, greedy, explore, egreedy, core.make_tensordict_primer())


def build_ppo(algo_cfg, env_cfg, obs_dim: int, num_actions: int, seed: int, minibatch_episodes: int,
              total_frames: int, observations: Observations = None) -> Agent:
    """Actor-critic (recurrent or not), its acting policy and the PPO learner from ``algo_cfg``."""
    a = algo_cfg
    loc, scale = observations or (None, None)
    net = ActorCritic(obs_dim, num_actions, list(a.encoder_sizes), a.rnn if a.recurrent else None,
                      int(a.hidden_size), loc, scale)
    policy, core = make_actor(net, action_spec(env_cfg))
    algo = PPO(net, PPOSettings(
        gamma=a.gamma, gae_lambda=a.gae_lambda, clip_epsilon=a.clip_epsilon, epochs=int(a.epochs),
        minibatch_episodes=minibatch_episodes, lr=a.lr, anneal_lr=a.anneal_lr, total_frames=total_frames,
        value_coef=a.value_coef, entropy_coef=a.entropy_coef, max_grad_norm=a.max_grad_norm,
        normalize_advantage=a.normalize_advantage,
    ), seed=seed)
    return Agent(algo, policy, policy, None, core.make_tensordict_primer() if core is not None else None)


def build_rsac(algo_cfg, env_cfg, obs_dim: int, action_dim: int, burn_in: int,
               observations: Observations = None) -> Agent:
    """Recurrent actor, twin recurrent critics, the acting policy and the SAC learner."""
    a = algo_cfg
    loc, scale = observations or (None, None)
    spec = action_spec(env_cfg)
    low, high = spec.space.low.float().reshape(-1), spec.space.high.float().reshape(-1)
    sizes, hidden = list(a.encoder_sizes), int(a.hidden_size)
    actor = RecurrentActor(obs_dim, action_dim, sizes, hidden, a.rnn, low, high, loc, scale)
    critics = nn.ModuleList(RecurrentCritic(obs_dim, action_dim, sizes, hidden, a.rnn, loc, scale) for _ in range(2))
    policy, core = make_policy(actor)
    algo = RSAC(actor, critics, RSACSettings(
        gamma=a.gamma, burn_in=burn_in, initial_state=a.initial_state, lr=a.lr, tau=a.tau, init_alpha=a.init_alpha,
        target_entropy=a.target_entropy, max_grad_norm=a.max_grad_norm,
    ))
    return Agent(algo, policy, policy, None, core.make_tensordict_primer())


def build_agent(cfg, obs_dim: int, actions: int) -> Agent:
    """The agent ``cfg.algo.name`` names; ``actions``: how many (discrete) or the action size (continuous)."""
    seed, burn_in = int(cfg.seed), int(cfg.sampler.get("burn_in", 0))
    observations = (observation_stats(cfg.env, 2_000, seed, step_timeout_s=float(cfg.loop.stall_timeout_s))
                    if cfg.algo.normalize_observations else None)
    if cfg.algo.name == "ppo":
        agent = build_ppo(cfg.algo, cfg.env, obs_dim, actions, seed=seed, observations=observations,
                          minibatch_episodes=int(cfg.sampler.episodes_per_batch), total_frames=int(cfg.total_frames))
    elif cfg.algo.name == "rsac":
        agent = build_rsac(cfg.algo, cfg.env, obs_dim, actions, burn_in=burn_in, observations=observations)
    else:
        loop = cfg.loop
        planned = int(max(0, cfg.total_frames - loop.warmup_frames) * loop.updates_per_frame)
        agent = build_r2d2(cfg.algo, cfg.env, obs_dim, actions, burn_in=burn_in, observations=observations,
                           priority_eta=cfg.sampler.get("eta", 0.9), planned_updates=planned)
    return with_version(agent)
