"""The factory: turns a validated config into real TorchRL objects, one group at a time."""
from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import gymnasium as gym
import torch
from omegaconf import DictConfig
from torchrl.collectors import BaseCollector
from torchrl.data import TensorDictReplayBuffer
from torchrl.envs import EnvBase

from trajrl.algos.r2d2 import R2D2, R2D2Settings, RecurrentQNet, make_policies
from trajrl.config import ConfigError, validate
from trajrl.factory.buffer import SequenceSampler, build_buffer
from trajrl.factory.collector import PROCESS_COLLECTORS, build_collector, close_collector
from trajrl.factory.env import check_env_id, env_factory, make_env
from trajrl.factory.logger import build_loggers

log = logging.getLogger("trajrl")


@dataclass
class Pipeline:
    """The objects of one run, built but not started. ``close()`` releases them."""

    env_fn: Callable[[], EnvBase]
    collector: BaseCollector
    buffer: TensorDictReplayBuffer
    sequences: SequenceSampler
    policy: torch.nn.Module            # the behaviour policy the collector runs (epsilon-greedy)
    greedy_policy: torch.nn.Module     # the same network, acting greedily (evaluation)
    exploration: torch.nn.Module       # the EGreedyModule whose epsilon anneals with frames
    algo: R2D2
    loggers: list = field(default_factory=list)
    eval_max_steps: int = 1000

    def close(self) -> None:
        close_collector(self.collector)
        for logger in self.loggers:
            experiment = getattr(logger, "experiment", None)
            if hasattr(experiment, "finish"):
                experiment.finish()
            elif hasattr(experiment, "close"):
                experiment.close()

    def __enter__(self) -> "Pipeline":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _spaces(env_cfg) -> tuple[int, int, int]:
    """(observation size, number of actions, episode step limit) from gymnasium's spec."""
    env = gym.make(env_cfg.id, **dict(env_cfg.kwargs or {}))
    try:
        obs_space, act_space = env.observation_space, env.action_space
        if not isinstance(act_space, gym.spaces.Discrete):
            raise ConfigError("env.id", env_cfg.id, f"algo=r2d2 needs discrete actions; this one has {act_space}")
        if not (isinstance(obs_space, gym.spaces.Box) and len(obs_space.shape) == 1):
            raise ConfigError("env.id", env_cfg.id, f"needs a flat Box observation; this one has {obs_space}")
        limit = env.spec.max_episode_steps if env.spec and env.spec.max_episode_steps else 1000
        return obs_space.shape[0], int(act_space.n), int(limit)
    finally:
        env.close()


def observation_stats(env_cfg, steps: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Mean and std of observations under a uniformly random policy (fixed for the run)."""
    import numpy as np

    env = gym.make(env_cfg.id, **dict(env_cfg.kwargs or {}))
    env.action_space.seed(seed)
    observations = [env.reset(seed=seed)[0]]
    for _ in range(steps):
        obs, _, terminated, truncated, _ = env.step(env.action_space.sample())
        observations.append(env.reset()[0] if terminated or truncated else obs)
    env.close()
    stacked = torch.as_tensor(np.stack(observations), dtype=torch.float)
    return stacked.mean(0), stacked.std(0).clamp_min(1e-3)


def build(cfg: DictConfig, run_dir: str | Path | None = None) -> Pipeline:
    """Build the pipeline for ``cfg`` (validated here). Loggers are made when ``run_dir`` is given."""
    cfg = validate(cfg)
    torch.manual_seed(cfg.seed)
    check_env_id(cfg.env.id, cfg.env.import_module)
    obs_dim, num_actions, limit = _spaces(cfg.env)

    a = cfg.algo
    loc, scale = observation_stats(cfg.env, 2_000, int(cfg.seed)) if a.normalize_observations else (None, None)
    qnet = RecurrentQNet(obs_dim, num_actions, list(a.encoder_sizes), int(a.hidden_size), a.rnn, loc, scale)
    probe_env = make_env(cfg.env.id, dict(cfg.env.kwargs or {}), cfg.env.import_module)
    action_spec = probe_env.action_spec
    probe_env.close()
    greedy, explore, egreedy, core = make_policies(qnet, action_spec, a.eps_start, a.eps_end, int(a.eps_decay_frames))
    env_fn = env_factory(cfg.env, primer=core.make_tensordict_primer())
    log.info("env %s: %d observations, %d actions, episodes up to %d steps", cfg.env.id, obs_dim, num_actions, limit)

    kind = cfg.collector.kind
    sequences = build_buffer(cfg.storage, cfg.sampler, shared=kind in PROCESS_COLLECTORS, run_dir=run_dir)
    collector = build_collector(
        kind, env_fn, explore, sequences.buffer,
        num_workers=int(cfg.collector.num_workers), frames_per_batch=int(cfg.collector.frames_per_batch),
        trajs_per_batch=cfg.trajs_per_batch, seed=int(cfg.seed),
        env_backend=cfg.collector.get("env_backend", "threading"),
    )
    log.info("collector %s (%s), storage %s x %d, sampler %s", kind, type(collector).__name__,
             cfg.storage.kind, cfg.storage.capacity, cfg.sampler.kind)
    algo = R2D2(qnet, R2D2Settings(
        gamma=a.gamma, n_step=a.n_step, burn_in=a.burn_in, initial_state=a.initial_state, double_q=a.double_q,
        value_rescaling=a.value_rescaling, lr=a.lr, max_grad_norm=a.max_grad_norm, target_tau=a.target_tau,
        priority_eta=cfg.sampler.get("eta", 0.9),
    ))
    loggers = build_loggers(list(cfg.logger.backends), Path(run_dir), "trajrl", cfg.logger.wandb_mode) if run_dir else []
    return Pipeline(env_fn, collector, sequences.buffer, sequences, explore, greedy, egreedy, algo, loggers, limit)
