"""Agent factory: what the run gives the algorithm the config names (``AgentNeeds``), and its
registered builder's agent (``trajrl.algos.registry``), its collection policy stamping the weight version."""

from __future__ import annotations

import torch

from trajrl.algos.agent import Agent, AgentNeeds, with_version
from trajrl.algos.networks import Inputs
from trajrl.algos.registry import algo_spec
from trajrl.collect.collector_env import make_env, observation_stats
from trajrl.configuration.settings import settings_of
from trajrl.envs.gym_envs import EnvSpaces
from trajrl.factory.collector import collector_slots


def learner_device(device: str) -> torch.device:
    """The device the ``device`` setting names (``auto``: cuda where there is one)."""
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(device)


def action_spec(env_cfg):
    probe_env = make_env(env_cfg.id, dict(env_cfg.kwargs or {}), env_cfg.import_module)
    spec = probe_env.action_spec
    probe_env.close()
    return spec


def agent_needs(cfg, spaces: EnvSpaces) -> AgentNeeds:
    """What the run ``cfg`` (a checked config) gives its algorithm's builder."""
    settings = settings_of(cfg, "algo")
    stats = (
        observation_stats(cfg.env, 2_000, int(cfg.seed), step_timeout_s=float(cfg.loop.stall_timeout_s))
        if settings.normalize_observations
        else (None, None)
    )
    sampler = settings_of(cfg, "sampler")
    actors = int(cfg.collector.num_workers) * int(cfg.env.num_envs)
    slots = collector_slots(cfg.collector.kind, int(cfg.collector.num_workers), int(cfg.env.num_envs))
    return AgentNeeds(
        settings=settings,
        spaces=spaces,
        action_spec=action_spec(cfg.env),
        inputs=Inputs(*stats),
        device=learner_device(cfg.device),
        seed=int(cfg.seed),
        total_frames=int(cfg.total_frames),
        burn_in=int(getattr(sampler, "burn_in", 0)),
        episodes_per_batch=int(getattr(sampler, "episodes_per_batch", 0)),
        actors=actors,
        actors_per_slot=actors // slots,
    )


def build_agent(cfg, spaces: EnvSpaces) -> Agent:
    """The agent ``cfg.algo.name`` names (``cfg``: a checked config) for an environment of ``spaces``."""
    return with_version(algo_spec(cfg.algo.name).build(agent_needs(cfg, spaces)))
