"""Compose the run configuration and check it before anything is built."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from hydra import compose as hydra_compose
from hydra import initialize_config_dir
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import MissingMandatoryValue

CONFIG_DIR = Path(__file__).resolve().parent.parent / "configs"

#: Collectors on this machine (threads and worker processes), and the one on Ray.
LOCAL_COLLECTORS = ("sync", "async", "multi_sync", "multi_async", "async_batched")
COLLECTORS = LOCAL_COLLECTORS + ("ray",)
TRAJECTORY_SAMPLERS = ("slice", "slice_without_replacement", "prioritized_slice", "episode")
SAMPLERS = TRAJECTORY_SAMPLERS + ("random",)
STORAGES = ("lazy_tensor", "lazy_memmap", "none")
ALGOS = ("r2d2", "rsac", "ppo")
#: Collectors that hand PPO episodes of the policy it is learning (the others run ahead with older weights).
ON_POLICY_COLLECTORS = ("sync", "multi_sync")


class ConfigError(ValueError):
    """A setting that cannot work: names the setting, the value and what would."""

    def __init__(self, setting: str, value: Any, fix: str):
        self.setting, self.value, self.fix = setting, value, fix
        super().__init__(f"{setting}={value!r}: {fix}")


def compose(overrides: list[str] | None = None) -> DictConfig:
    """The configuration the CLI would run with these overrides (Hydra's compose API)."""
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
        return hydra_compose(config_name="config", overrides=list(overrides or []))


def _get(cfg: DictConfig, key: str) -> Any:
    try:
        return OmegaConf.select(cfg, key, throw_on_missing=True)
    except MissingMandatoryValue:
        raise ConfigError(key, "???", f"{key} is required (for example {key}=CartPole-v1)") from None


def _one_of(cfg: DictConfig, key: str, allowed: tuple[str, ...]) -> str:
    value = _get(cfg, key)
    if value not in allowed:
        raise ConfigError(key, value, f"use one of {', '.join(allowed)}")
    return value


def _positive(cfg: DictConfig, key: str, minimum: float = 1) -> Any:
    value = _get(cfg, key)
    if value is None or not isinstance(value, (int, float)) or value < minimum:
        raise ConfigError(key, value, f"must be a number >= {minimum}")
    return value


def validate(cfg: DictConfig) -> DictConfig:
    """Check every setting and the ones that depend on each other; raise ConfigError.

    Returns the config converted to the schema's types (``trajrl.schema``), with
    ``storage.ndim`` resolved from ``auto``. Makes one instance of the environment
    (gymnasium only) to check its id, spaces and episode step limit.
    """
    from trajrl.envs import env_spaces
    from trajrl.schema import typed

    cfg = typed(cfg)
    collector = _one_of(cfg, "collector.kind", COLLECTORS)
    sampler = _one_of(cfg, "sampler.kind", SAMPLERS)
    storage = _one_of(cfg, "storage.kind", STORAGES)
    algo = _one_of(cfg, "algo.name", ALGOS)
    _one_of(cfg, "algo.rnn", ("lstm", "gru"))
    _get(cfg, "env.id")
    _positive(cfg, "env.num_envs")
    _one_of(cfg, "env.vectorization", ("sync", "async"))
    _positive(cfg, "total_frames")
    _positive(cfg, "collector.frames_per_batch")
    _one_of(cfg, "traj_format", ("cat", "padded"))
    workers = _positive(cfg, "collector.num_workers")
    if collector in ("sync", "async") and workers != 1:
        raise ConfigError(
            "collector.num_workers", workers,
            f"collector={collector} runs one environment; use collector=multi_sync or multi_async for {workers} workers",
        )
    cores = os.cpu_count() or 1
    if workers > 4 * cores:
        raise ConfigError("collector.num_workers", workers, f"this machine has {cores} cores; use at most {4 * cores}")
    if collector == "async_batched":
        _one_of(cfg, "collector.env_backend", ("threading", "multiprocessing"))
    if collector == "ray":
        _check_ray(cfg)

    trajs = cfg.trajs_per_batch
    if trajs is not None and (not isinstance(trajs, int) or trajs < 1):
        raise ConfigError("trajs_per_batch", trajs, "must be an integer >= 1 (or null for fixed-frame batches)")
    if algo == "ppo":
        _check_ppo(cfg, collector, storage, sampler, trajs)
    else:
        _check_off_policy(cfg, collector, storage, sampler, trajs)

    _positive(cfg, "loop.log_every_frames")
    for key in ("seed", "loop.eval_every_frames", "loop.eval_episodes", "loop.checkpoint_every_frames"):
        _positive(cfg, key, minimum=0)
    _positive(cfg, "loop.stall_timeout_s", minimum=1)
    if cfg.loop.time_limit_s is not None and cfg.loop.time_limit_s <= 0:
        raise ConfigError("loop.time_limit_s", cfg.loop.time_limit_s, "must be > 0 seconds, or null for no limit")
    if not isinstance(cfg.audit, bool):
        raise ConfigError("audit", cfg.audit, "use audit=true or audit=false")
    _positive(cfg, "audit_every")
    for backend in cfg.logger.backends:
        if backend not in ("csv", "tensorboard", "wandb"):
            raise ConfigError("logger.backends", backend, "use csv, tensorboard or wandb")
    _one_of(cfg, "logger.wandb_mode", ("offline", "online"))
    if cfg.device != "cpu":
        raise ConfigError("device", cfg.device, "only device=cpu is supported so far (learner and collectors run on the CPU)")

    _check_against_env(cfg, env_spaces(cfg.env, algo))
    if cfg.resume is not None:
        _check_resume(cfg.resume)

    cfg = cfg.copy()
    if storage != "none":
        with_flag = OmegaConf.is_struct(cfg)
        OmegaConf.set_struct(cfg, False)
        cfg.storage.ndim = 1
        OmegaConf.set_struct(cfg, with_flag)
    return cfg


#: Settings only the off-policy loop reads (algo=r2d2, rsac).
OFF_POLICY_ONLY = ("loop.warmup_frames", "loop.updates_per_frame", "loop.max_update_lag", "loop.weight_sync_every")


def key_of(override: str) -> str:
    """The setting an override sets (``+a.b=1`` -> ``a.b``)."""
    return override.split("=", 1)[0].lstrip("+~")


def check_overrides(overrides: list[str], algo: str) -> None:
    """Refuse an override of a setting this run would not read (``overrides``: as typed)."""
    if algo != "ppo":
        return
    for override in overrides:
        key, value = key_of(override), override.partition("=")[2]
        if key in OFF_POLICY_ONLY:
            raise ConfigError(
                key, value, "is read by the off-policy loop only; algo=ppo learns from each batch of episodes as "
                "it comes (algo.epochs passes, weights pushed after each): drop it, or set algo.epochs, "
                "trajs_per_batch or sampler.episodes_per_batch",
            )


def check_launcher(launcher: str, collector: str, env_backend: str = "threading") -> None:
    """Refuse a Hydra launcher that cannot run this collector (``launcher``: its ``_target_``)."""
    in_processes = collector in ("async", "multi_sync", "multi_async") or (
        collector == "async_batched" and env_backend == "multiprocessing")
    if "joblib" in launcher.lower() and in_processes:
        raise ConfigError(
            "hydra/launcher", "joblib",
            f"cannot start collector={collector}'s worker processes inside its jobs (they cannot pickle its "
            "shared memory); use hydra/launcher=parallel (each job its own process) or collector=sync",
        )


def _check_ray(cfg: DictConfig) -> None:
    import importlib.util

    if importlib.util.find_spec("ray") is None:
        raise ConfigError("collector", "ray", "needs Ray, an optional extra: pip install 'trajrl[ray]' "
                          "(or use collector=multi_async on this machine)")
    if cfg.trajs_per_batch is None:
        raise ConfigError("trajs_per_batch", None, "collector=ray sends complete episodes; set trajs_per_batch=4")


def _check_ppo(cfg: DictConfig, collector: str, storage: str, sampler: str, trajs: int | None) -> None:
    if collector not in ON_POLICY_COLLECTORS:
        raise ConfigError(
            "collector", collector,
            "algo=ppo learns on-policy from complete episodes of its current policy, and this collector runs "
            f"ahead with older weights; use collector={' or collector='.join(ON_POLICY_COLLECTORS)}",
        )
    if trajs is None:
        raise ConfigError("trajs_per_batch", None, "algo=ppo needs complete-episode batches; set trajs_per_batch=8")
    if storage != "none":
        raise ConfigError("storage", storage, "algo=ppo keeps no replay storage (it learns from each batch, then "
                          "drops it); use storage=none")
    if sampler != "episode":
        raise ConfigError("sampler", sampler, "algo=ppo learns from whole episodes; use sampler=episode "
                          "(sampler.episodes_per_batch episodes per minibatch)")
    _positive(cfg, "sampler.episodes_per_batch")
    _positive(cfg, "algo.epochs")
    if not 0 < cfg.algo.clip_epsilon < 1:
        raise ConfigError("algo.clip_epsilon", cfg.algo.clip_epsilon, "must be between 0 and 1 (e.g. 0.2)")


def _check_off_policy(cfg: DictConfig, collector: str, storage: str, sampler: str, trajs: int | None) -> None:
    if storage == "none":
        raise ConfigError("storage", "none", f"algo={cfg.algo.name} learns from a replay buffer; "
                          "use storage=lazy_tensor or storage=lazy_memmap")
    _positive(cfg, "storage.capacity")
    _one_of(cfg, "algo.initial_state", ("stored", "zero"))
    if cfg.algo.name == "r2d2":
        _one_of(cfg, "algo.eval_network", ("online", "target"))
    if trajs is None and sampler in TRAJECTORY_SAMPLERS:
        raise ConfigError(
            "trajs_per_batch", None,
            f"sampler={sampler} needs complete episodes in the buffer; set trajs_per_batch=4 (or use sampler=random)",
        )
    if collector == "async_batched" and trajs != 1:
        raise ConfigError(
            "trajs_per_batch", trajs,
            "collector=async_batched writes each episode as it completes; use trajs_per_batch=1, "
            "or collector=multi_async to batch episodes",
        )
    ndim = cfg.storage.ndim
    if ndim != "auto" and ndim != 1:
        raise ConfigError(
            "storage.ndim", ndim,
            f"collector={collector} with one environment per worker writes flat [T] batches"
            + (" of complete episodes" if trajs else "") + "; use storage.ndim=auto or 1",
        )
    if sampler == "slice":
        _one_of(cfg, "sampler.weighting", ("step", "episode"))
    if sampler in ("slice", "slice_without_replacement", "prioritized_slice"):
        slice_len = _positive(cfg, "sampler.slice_len")
        _positive(cfg, "sampler.slices_per_batch")
        burn_in = _get(cfg, "sampler.burn_in")
        if not isinstance(burn_in, int) or burn_in < 0:
            raise ConfigError("sampler.burn_in", burn_in, "must be an integer >= 0")
        if burn_in >= slice_len:
            raise ConfigError(
                "sampler.burn_in", burn_in,
                f"leaves no step to learn from in slices of {slice_len}; "
                f"use sampler.burn_in<={slice_len - 1} or a longer sampler.slice_len",
            )
    elif sampler == "episode":
        _positive(cfg, "sampler.episodes_per_batch")
    else:
        _positive(cfg, "sampler.transitions_per_batch")
    if cfg.algo.name == "r2d2":
        _positive(cfg, "algo.n_step")
    loop = cfg.loop
    if loop.updates_per_frame is None or loop.updates_per_frame <= 0:
        raise ConfigError("loop.updates_per_frame", loop.updates_per_frame, "must be > 0")
    if loop.warmup_frames >= cfg.total_frames:
        raise ConfigError(
            "loop.warmup_frames", loop.warmup_frames,
            f"must be below total_frames={cfg.total_frames}, or no update ever runs",
        )


def _check_against_env(cfg: DictConfig, spaces) -> None:
    """Settings that only make sense for episodes of at most ``spaces.step_limit`` steps."""
    limit = spaces.step_limit
    if cfg.storage.kind != "none" and cfg.storage.capacity < limit:
        raise ConfigError(
            "storage.capacity", cfg.storage.capacity,
            f"cannot hold one whole episode of {cfg.env.id} (up to {limit} steps); use storage.capacity>={limit}",
        )
    if cfg.algo.name != "ppo" and "slice_len" in cfg.sampler and cfg.sampler.slice_len > limit:
        raise ConfigError(
            "sampler.slice_len", cfg.sampler.slice_len,
            f"is longer than any episode of {cfg.env.id} (at most {limit} steps): no slice could be full, "
            f"each would be a whole episode and padding; use sampler.slice_len<={limit}",
        )


def _check_resume(resume: str) -> None:
    run_dir = Path(resume)
    missing = [name for name in ("config.yaml", "checkpoints/latest.pt") if not (run_dir / name).exists()]
    if missing:
        raise ConfigError("resume", resume, f"has no {' and no '.join(missing)}; use resume=<the directory of a "
                          "run that saved a checkpoint> (outputs/<date>/<time>)")
