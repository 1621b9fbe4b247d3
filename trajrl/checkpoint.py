"""Checkpoints of the learner in the run directory (``checkpoints/latest.pt``).

Written atomically (to a temporary file, then renamed), so a run stopped at any
moment leaves the previous checkpoint whole. Read with ``weights_only=True``:
loading never unpickles arbitrary objects, and a truncated or foreign file is
refused with a clear error.
"""
from __future__ import annotations

import os
from pathlib import Path

import torch

FORMAT = "trajrl-checkpoint/1"


class CheckpointError(ValueError):
    """A checkpoint that cannot be read: says which file and why."""


def checkpoint_path(run_dir: str | Path) -> Path:
    return Path(run_dir) / "checkpoints" / "latest.pt"


def save_checkpoint(path: str | Path, algo, frames: int, algo_name: str) -> Path:
    """The learner's state (networks, target networks, optimisers, counters) at ``frames``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    payload = {"format": FORMAT, "algo_name": algo_name, "frames": int(frames), "algo": algo.state_dict()}
    tmp = path.with_name(path.name + ".tmp")
    torch.save(payload, tmp)
    os.replace(tmp, path)
    return path


def load_checkpoint(path: str | Path, algo_name: str | None = None) -> dict:
    """The checkpoint at ``path`` (a file, or a run directory); ``algo_name``: refuse another algorithm's."""
    path = Path(path)
    if path.is_dir():
        path = checkpoint_path(path)
    if not path.exists():
        raise CheckpointError(f"no checkpoint at {path}")
    try:
        payload = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as err:  # truncated, corrupt, or holding objects weights_only refuses
        raise CheckpointError(f"{path} cannot be read as a checkpoint ({type(err).__name__}: {str(err)[:200]}); "
                              "it is truncated, corrupt or not a trajrl checkpoint") from None
    if not isinstance(payload, dict) or payload.get("format") != FORMAT:
        found = payload.get("format") if isinstance(payload, dict) else type(payload).__name__
        raise CheckpointError(f"{path} is not a trajrl checkpoint (format {found!r}, expected {FORMAT!r})")
    if algo_name is not None and payload["algo_name"] != algo_name:
        raise CheckpointError(f"{path} holds an algo={payload['algo_name']} learner, not algo={algo_name}")
    return payload


def load_agent(run_dir: str | Path):
    """The agent a finished (or stopped) run left in ``run_dir``: built from its
    ``config.yaml`` and restored from its last checkpoint. ``agent.greedy`` acts
    deterministically (for evaluation), ``agent.algo`` can keep learning."""
    from omegaconf import OmegaConf

    from trajrl.config import validate
    from trajrl.factory.algo import build_agent
    from trajrl.factory.env import check_env_id, env_spaces

    run_dir = Path(run_dir)
    if not (run_dir / "config.yaml").exists():
        raise CheckpointError(f"{run_dir} has no config.yaml: not a trajrl run directory")
    cfg = validate(OmegaConf.load(run_dir / "config.yaml"))
    payload = load_checkpoint(run_dir, algo_name=cfg.algo.name)
    check_env_id(cfg.env.id, cfg.env.import_module)
    obs_dim, actions, _ = env_spaces(cfg.env, cfg.algo.name)
    agent = build_agent(cfg, obs_dim, actions)
    agent.algo.load_state_dict(payload["algo"])
    return agent
