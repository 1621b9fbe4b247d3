"""``trajrl evaluate <run dir>``: the return of a finished run's agent (its best or its
latest checkpoint) over N deterministic episodes, and a video of one (RL Baselines3 Zoo's
``enjoy``). The video is written by gymnasium's ``RecordVideo`` (moviepy), for environments
that render ``rgb_array`` frames (``pip install 'trajrl[video]'`` for classic control's).
"""

from __future__ import annotations

import os
from pathlib import Path

from trajrl.base.errors import ConfigError


def load_run(run_dir: str | Path, which: str = "best"):
    """``(checked config, agent)`` of a finished run: its ``which`` agent (``load_agent``)."""
    from trajrl.configuration.compose import validate
    from trajrl.configuration.settings import load_run_config
    from trajrl.factory import load_agent

    agent = load_agent(run_dir, which)
    return validate(load_run_config(run_dir)), agent


def evaluate_run(cfg, agent, episodes: int = 10, seed: int = 0) -> dict[str, float]:
    """Mean and std of the return of ``agent`` (of a run of ``cfg``) over ``episodes`` deterministic episodes."""
    from trajrl.collect.collector_env import eval_env_factory
    from trajrl.envs.gym_envs import env_spaces
    from trajrl.training.evaluator import Evaluator

    spaces = env_spaces(cfg.env)
    env_fn = eval_env_factory(cfg.env, primer=agent.primer, success=spaces.goal is not None)
    evaluator = Evaluator(
        env_fn, agent.greedy_policy, episodes, seed=seed, max_steps=spaces.step_limit, env_id=cfg.env.id
    )
    try:
        return evaluator()
    finally:
        evaluator.close()


def record_video(cfg, agent, folder: str | Path, which: str = "best", seed: int = 0) -> Path:
    """One deterministic episode of ``agent`` (a run of ``cfg``'s ``which`` agent) as
    ``<folder>/<which>-episode-0.mp4``."""
    import gymnasium as gym
    import torch
    from torchrl.envs.utils import ExplorationType, set_exploration_type

    from trajrl.collect.collector_env import make_env
    from trajrl.envs.gym_envs import env_spaces, gym_options

    folder = Path(folder)
    os.environ.setdefault("SDL_VIDEODRIVER", "dummy")  # pygame draws off-screen: no display needed
    probe = gym.make(cfg.env.id, **dict(cfg.env.kwargs or {}))
    modes = probe.metadata.get("render_modes", [])
    probe.close()
    if "rgb_array" not in modes:
        raise ConfigError(
            "--video",
            str(folder),
            f"env.id={cfg.env.id} renders {modes or 'no frames'}, not rgb_array frames; evaluate without --video",
        )
    kwargs = {**dict(cfg.env.kwargs or {}), "render_mode": "rgb_array"}
    made_here = not folder.exists()  # RecordVideo makes it before it asks for moviepy

    def record(env: gym.Env) -> gym.Env:
        return gym.wrappers.RecordVideo(
            env,
            str(folder),
            name_prefix=which,
            episode_trigger=lambda episode: episode == 0,
        )

    try:  # RecordVideo asks for moviepy when it is made, the renderer for pygame when it first draws
        env = make_env(
            cfg.env.id, kwargs, cfg.env.import_module, primer=agent.primer, wrap=record, **gym_options(cfg.env)
        )
        try:
            env.set_seed(seed)
            with set_exploration_type(ExplorationType.DETERMINISTIC), torch.no_grad():
                env.rollout(env_spaces(cfg.env).step_limit, agent.greedy_policy, break_when_any_done=True)
        finally:
            env.close()  # RecordVideo writes the file when the episode ends or the environment closes
    except gym.error.DependencyNotInstalled as err:
        if made_here and folder.is_dir() and not any(folder.iterdir()):
            folder.rmdir()  # nothing in it: the next try (the extra installed) writes there without a warning
        raise ConfigError(
            "--video", str(folder), f"rendering needs a package not installed ({err}); pip install 'trajrl[video]'"
        ) from None
    return folder / f"{which}-episode-0.mp4"
