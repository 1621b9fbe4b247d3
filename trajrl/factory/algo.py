"""Algorithm factory: the networks, the acting policies around them, and the learner."""
from __future__ import annotations

from dataclasses import dataclass

from torch import nn
from torchrl.envs.transforms import TensorDictPrimer

from trajrl.algos.r2d2 import R2D2, R2D2Settings, RecurrentQNet, make_policies
from trajrl.factory.env import make_env, observation_stats


@dataclass
class Agent:
    algo: R2D2
    greedy: nn.Module            # acts greedily (evaluation)
    explore: nn.Module           # epsilon-greedy (collection)
    egreedy: nn.Module           # its EGreedyModule, annealed with frames
    primer: TensorDictPrimer     # puts the recurrent state in every environment


def build_r2d2(algo_cfg, env_cfg, obs_dim: int, num_actions: int, seed: int, priority_eta: float) -> Agent:
    """Recurrent Q-network, its policies and the R2D2 learner from ``algo_cfg``."""
    a = algo_cfg
    loc, scale = observation_stats(env_cfg, 2_000, seed) if a.normalize_observations else (None, None)
    qnet = RecurrentQNet(obs_dim, num_actions, list(a.encoder_sizes), int(a.hidden_size), a.rnn, loc, scale)
    probe_env = make_env(env_cfg.id, dict(env_cfg.kwargs or {}), env_cfg.import_module)
    action_spec = probe_env.action_spec
    probe_env.close()
    greedy, explore, egreedy, core = make_policies(qnet, action_spec, a.eps_start, a.eps_end, int(a.eps_decay_frames))
    algo = R2D2(qnet, R2D2Settings(
        gamma=a.gamma, n_step=a.n_step, burn_in=a.burn_in, initial_state=a.initial_state, double_q=a.double_q,
        value_rescaling=a.value_rescaling, lr=a.lr, max_grad_norm=a.max_grad_norm, target_tau=a.target_tau,
        priority_eta=priority_eta,
    ))
    return Agent(algo, greedy, explore, egreedy, core.make_tensordict_primer())
