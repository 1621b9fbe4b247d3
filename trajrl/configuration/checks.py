"""The checks of a composed config, in one pass: every value against the range or choices
declared beside its setting (``trajrl.configuration.settings``), then the rules between settings, one
named function each, in the order the data flows: the machine, the collector, what an
on-policy learner needs, the replay buffer and its sampler, the learner, when to stop, the
environment, the run to resume.

``check(cfg)`` runs them all, on a config already merged into its dataclasses (its keys and
types checked: ``trajrl.configuration.compose.typed``); each rule raises the one-line ``ConfigError``
naming the setting, the value and what would work. ``check_overrides`` and
``check_launcher`` are what the CLI checks besides the config. Nothing here imports torch
but ``check_device``, where ``device=cuda`` asks.
"""

from __future__ import annotations

import importlib.util
import os
import re
from dataclasses import Field, fields
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, ListConfig, OmegaConf

from trajrl.algos.registry import SPECS, algo_spec, learns_on_policy, takes_actions
from trajrl.algos.settings import LINEAR_CORES
from trajrl.base.errors import ConfigError
from trajrl.configuration.room import check_replay_room
from trajrl.configuration.settings import (
    GROUPS,
    OFF_POLICY_ONLY,
    ON_POLICY_COLLECTORS,
    RunSettings,
    batches_of,
    default_of,
    load_run_config,
    option_schema,
    settings_of,
)
from trajrl.configuration.topology import fixed_frame_lanes, lane_ndim, starts_processes


def check(cfg: DictConfig) -> None:
    """Every check, in order; the first that fails raises its ``ConfigError``. Makes one
    instance of the environment (gymnasium only) to check its id, spaces and step limit."""
    check_ranges(cfg)
    check_device(cfg)
    check_wandb_login(cfg)
    # collect
    check_workers(cfg)
    check_ray(cfg)
    check_on_policy_collector(cfg)
    check_on_policy_batches(cfg)
    # replay: storage and sampler
    check_replay_storage(cfg)
    check_fixed_frame_sampler(cfg)
    check_lane_capacity(cfg)
    check_tape(cfg)
    check_async_batched_writes(cfg)
    check_storage_ndim(cfg)
    check_burn_in(cfg)
    check_state_every(cfg)
    # learn, and when to stop
    check_warmup(cfg)
    check_target_sync(cfg)
    check_eps_spread(cfg)
    check_clip_schedule(cfg)
    check_stop(cfg)
    # against the environment
    from trajrl.envs.env_check import check_first_steps
    from trajrl.envs.gym_envs import env_spaces  # gymnasium: only once the settings alone pass (a refusal is quicker)

    spaces = env_spaces(cfg.env, timeout_s=cfg.loop.stall_timeout_s)
    check_actions(cfg, spaces)
    check_first_steps(cfg.env, timeout_s=cfg.loop.stall_timeout_s, refuse=cfg.collector.bad_steps != "drop")
    check_episode_fits_storage(cfg, spaces)
    check_replay_room(cfg, spaces)
    check_slice_len(cfg, spaces)
    check_hindsight_replay(cfg)
    check_hindsight_env(cfg, spaces)
    check_her_state(cfg)


# ---------------------------------------------------------------- each setting on its own
def check_ranges(cfg: DictConfig) -> None:
    """Every value is in the range or choices declared beside its setting (its key and type
    were checked when the config was merged into the dataclasses: ``trajrl.configuration.compose.typed``)."""
    for group in GROUPS:
        section = cfg[group]
        for f in fields(option_schema(group, section)):
            check_value(f"{group}.{f.name}", f, section.get(f.name))
    for f in fields(RunSettings):
        if f.name not in GROUPS:
            check_value(f.name, f, cfg.get(f.name))


def check_value(key: str, f: Field, value: Any) -> None:
    """``value`` (or each item of a list) against the range or choices declared with field ``f``."""
    auto, span, choices = f.metadata.get("auto"), f.metadata.get("range"), f.metadata.get("choices")
    if value is None and not f.metadata.get("null", True):
        raise ConfigError(key, None, f"must be {span} or auto; the default is {default_of(f)} ({f.metadata['help']})")
    if value is None or f.metadata.get("help") is None or (value == "auto" and auto):
        return
    is_list = isinstance(value, (list, tuple, ListConfig))
    values = list(value) if is_list else [value]
    if is_list and span is not None and not values:
        raise ConfigError(key, [], "must list at least one size")
    for item in values:
        if choices is not None and (str(item).lower() if isinstance(item, bool) else str(item)) not in choices:
            raise ConfigError(key, item, f"use one of {', '.join(choices)}")
        if span is not None and not span.admits(item):
            admitted = f"{span}, null or auto" if f.metadata.get("null", True) else f"{span} or auto"
            admitted = admitted if auto else span
            raise ConfigError(key, item, f"must be {admitted}; the default is {default_of(f)} ({f.metadata['help']})")


# ---------------------------------------------------------------- the machine
def check_device(cfg: DictConfig) -> None:
    """``device=cuda`` needs a CUDA device torch can use."""
    if cfg.device != "cuda":
        return
    import torch  # only here: a refused setting is reported without waiting for torch's import

    if not torch.cuda.is_available():
        raise ConfigError(
            "device",
            cfg.device,
            f"this machine has no CUDA device that torch {torch.__version__} can use; "
            "use device=cpu, or device=auto (cuda where there is one)",
        )


def check_wandb_login(cfg: DictConfig) -> None:
    """``logger.wandb_mode=online`` needs a wandb account this machine is logged in to: asked of wandb
    itself (``wandb.login(prompt=False, verify=False)``: its key from ``WANDB_API_KEY``, its settings
    or ``~/.netrc``, without a prompt, the network or a file written)."""
    if "wandb" not in cfg.logger.backends or cfg.logger.wandb_mode != "online":
        return
    if os.environ.get("WANDB_MODE") in ("offline", "disabled", "dryrun"):
        return  # wandb will not go online whatever trajrl asks
    os.environ.setdefault("WANDB_SILENT", "true")
    import wandb  # only here: wandb's import takes a second

    if not wandb.login(prompt=False, verify=False):
        raise ConfigError(
            "logger.wandb_mode",
            "online",
            "no wandb account is logged in on this machine (no WANDB_API_KEY, no key in ~/.netrc); "
            "log in with `wandb login`, set WANDB_API_KEY, or use logger.wandb_mode=offline (synced later "
            "with `wandb sync`)",
        )


# ---------------------------------------------------------------- collect
def check_workers(cfg: DictConfig) -> None:
    """``collector.num_workers``: one for the single-environment collectors, and no more
    than the machine's cores can step (four a core)."""
    kind, workers = cfg.collector.kind, cfg.collector.num_workers
    if kind in ("sync", "async") and workers != 1:
        raise ConfigError(
            "collector.num_workers",
            workers,
            f"collector={kind} runs one environment; use collector=multi_sync or multi_async for {workers} workers",
        )
    cores = os.cpu_count() or 1
    if workers > 4 * cores:
        raise ConfigError("collector.num_workers", workers, f"this machine has {cores} cores; use at most {4 * cores}")


def check_ray(cfg: DictConfig) -> None:
    """``collector=ray`` needs Ray installed, and an address Ray can join."""
    if cfg.collector.kind != "ray":
        return
    if importlib.util.find_spec("ray") is None:
        raise ConfigError(
            "collector",
            "ray",
            "needs Ray, an optional extra: pip install 'trajrl[ray]' (or use collector=multi_async on this machine)",
        )
    address = cfg.collector.get("address")
    if address is not None and address != "auto" and not re.fullmatch(r"(ray://)?[^:/\s]+:\d+", str(address)):
        raise ConfigError(
            "collector.address",
            address,
            'give "ray://<head>:10001", "<head>:6379", "auto" '
            "(the cluster this machine belongs to) or null (a Ray instance of the run's own)",
        )


def check_on_policy_collector(cfg: DictConfig) -> None:
    """An on-policy learner needs episodes of its current weights: a collector that waits for them."""
    collector = cfg.collector.kind
    if learns_on_policy(cfg.algo.name) and collector not in ON_POLICY_COLLECTORS:
        raise ConfigError(
            "collector",
            collector,
            f"algo={cfg.algo.name} learns on-policy from complete episodes of its current policy, and this "
            f"collector runs ahead with older weights; use collector={' or collector='.join(ON_POLICY_COLLECTORS)}",
        )


def check_on_policy_batches(cfg: DictConfig) -> None:
    """An on-policy learner learns from each batch of whole episodes as it comes: complete-episode
    batches, no replay storage, sampled by episode."""
    if not learns_on_policy(cfg.algo.name):
        return
    algo = f"algo={cfg.algo.name}"
    if cfg.trajs_per_batch is None:
        raise ConfigError("trajs_per_batch", None, f"{algo} needs complete-episode batches; set trajs_per_batch=8")
    if cfg.storage.kind != "none":
        raise ConfigError(
            "storage",
            cfg.storage.kind,
            f"{algo} keeps no replay storage (it learns from each batch, then drops it); use storage=none",
        )
    if cfg.sampler.kind != "episode":
        raise ConfigError(
            "sampler",
            cfg.sampler.kind,
            f"{algo} learns from whole episodes; use sampler=episode "
            "(sampler.episodes_per_batch episodes per minibatch)",
        )


# ---------------------------------------------------------------- replay: storage and sampler
def check_replay_storage(cfg: DictConfig) -> None:
    """An off-policy learner samples a replay buffer: a storage, of a given capacity."""
    if learns_on_policy(cfg.algo.name):
        return
    if cfg.storage.kind == "none":
        raise ConfigError(
            "storage",
            "none",
            f"algo={cfg.algo.name} learns from a replay buffer; use storage=lazy_tensor or storage=lazy_memmap",
        )
    if cfg.storage.capacity is None:
        raise ConfigError("storage.capacity", None, "set the frames the buffer holds, e.g. storage.capacity=100000")


def writes_fixed_frames(cfg: DictConfig) -> bool:
    """Whether the collector writes fixed-frame batches (``trajs_per_batch=null``) into lanes of a storage."""
    return cfg.trajs_per_batch is None and cfg.storage.kind != "none"


def check_fixed_frame_sampler(cfg: DictConfig) -> None:
    """Fixed-frame batches are sampled by stored step (the lanes keep no episode index)."""
    sampler = cfg.sampler
    if not writes_fixed_frames(cfg):
        return
    if sampler.kind not in ("slice", "prioritized_slice", "random") or sampler.get("weighting", "step") != "step":
        setting, value = (
            ("sampler.weighting", sampler.weighting) if sampler.kind == "slice" else ("sampler", sampler.kind)
        )
        raise ConfigError(
            setting,
            value,
            "fixed-frame batches (trajs_per_batch=null) are sampled by stored step: "
            "use sampler=slice (sampler.weighting=step), sampler=prioritized_slice or sampler=random, "
            "or set trajs_per_batch=4 to store complete episodes",
        )


def check_lane_capacity(cfg: DictConfig) -> None:
    """Each lane of fixed-frame batches (one per environment) holds a write and a slice."""
    if not writes_fixed_frames(cfg):
        return
    c, capacity, slice_len = cfg.collector, cfg.storage.capacity, cfg.sampler.get("slice_len", 1)
    workers, envs, steps = fixed_frame_lanes(c.kind, c.num_workers, cfg.env.num_envs, c.frames_per_batch)
    lanes = workers * envs
    need = max(steps, slice_len)
    if capacity // lanes < need:
        raise ConfigError(
            "storage.capacity",
            capacity,
            f"gives each of the {lanes} lanes (one per environment) {capacity // lanes} steps, fewer than the "
            f"{need} a lane must hold (a write of {steps} steps, a slice of {slice_len}); "
            f"use storage.capacity>={need * lanes}",
        )


def check_tape(cfg: DictConfig) -> None:
    """``sampler=tape`` runs whole episodes laid end to end through one pass of the memory core,
    which restarts at each episode start inside it: a linear core."""
    if batches_of(cfg.sampler) != "tape":
        return
    if cfg.algo.rnn not in LINEAR_CORES:
        raise ConfigError(
            "algo.rnn",
            cfg.algo.rnn,
            f"sampler={cfg.sampler.kind} restarts the memory core at every episode start inside one sequence, which "
            f"{cfg.algo.rnn} "
            f"cannot: use algo.rnn={' or algo.rnn='.join(LINEAR_CORES)}, or a slice sampler (sampler=slice)",
        )


def check_async_batched_writes(cfg: DictConfig) -> None:
    """``collector=async_batched`` writes each episode as it completes, never several at once."""
    trajs = cfg.trajs_per_batch
    if cfg.collector.kind == "async_batched" and trajs not in (1, None):
        raise ConfigError(
            "trajs_per_batch",
            trajs,
            "collector=async_batched writes each episode as it completes; use trajs_per_batch=1 (or null: "
            "fixed-frame batches), or collector=multi_async to batch episodes",
        )


def check_storage_ndim(cfg: DictConfig) -> None:
    """An explicit ``storage.ndim`` is the one the collector's batches have (``storage_layout``)."""
    if cfg.storage.kind == "none":
        return
    ndim, why = storage_layout(cfg)
    if str(cfg.storage.ndim) not in ("auto", str(ndim)):
        raise ConfigError("storage.ndim", cfg.storage.ndim, f"{why}; use storage.ndim=auto or {ndim}")


def storage_layout(cfg: DictConfig) -> tuple[int, str]:
    """The storage's ``ndim`` for this collector and ``trajs_per_batch``, and why."""
    if cfg.trajs_per_batch is not None:
        return 1, f"trajs_per_batch={cfg.trajs_per_batch} writes complete episodes flat, one after the other"
    c = cfg.collector
    workers, envs, steps = fixed_frame_lanes(c.kind, c.num_workers, cfg.env.num_envs, c.frames_per_batch)
    if c.kind == "async_batched":
        lanes = f"[N={workers}, T]" if workers > 1 else "[T]"
        return lane_ndim(workers, envs), (
            f"collector=async_batched steps {workers} single environment{'s' * (workers > 1)} "
            f"(num_workers x env.num_envs) and writes their steps as they come (trajs_per_batch=null) "
            f"into {lanes} lanes, one per environment"
        )
    shape = ", ".join([f"W={workers}"] * (workers > 1) + [f"B={envs}"] * (envs > 1) + [f"T={steps}"])
    who = f"collector={c.kind}" + (f" with {workers} workers" if workers > 1 else "")
    envs_said = f"env.num_envs={envs}" if envs > 1 else "one environment each"
    return lane_ndim(workers, envs), (
        f"{who} and {envs_said} writes fixed-frame [{shape}] batches "
        "(trajs_per_batch=null), one storage lane per environment"
    )


def check_burn_in(cfg: DictConfig) -> None:
    """A slice keeps at least one step to learn from after its burn-in."""
    sampler = cfg.sampler
    if batches_of(sampler) == "slices" and sampler.burn_in >= sampler.slice_len:
        raise ConfigError(
            "sampler.burn_in",
            sampler.burn_in,
            f"leaves no step to learn from in slices of {sampler.slice_len}; "
            f"use sampler.burn_in<={sampler.slice_len - 1} or a longer sampler.slice_len",
        )


def check_state_every(cfg: DictConfig) -> None:
    """``sampler.state_every`` (a number): slices can start only where the state is kept
    (``state_every_problem``), and no step falls between two of them unlearnt."""
    every = cfg.sampler.get("state_every")
    if every is None or every == "auto":  # auto: trajrl.configuration.compose.resolve_auto picks what works
        return
    why = state_every_problem(cfg)
    most = cfg.sampler.slice_len - cfg.sampler.burn_in
    if why is None and every > most:
        why = (
            f"slices start only every {every} steps and learn from steps {cfg.sampler.burn_in} to "
            f"{cfg.sampler.slice_len - 1} of theirs (sampler.burn_in={cfg.sampler.burn_in}, "
            f"sampler.slice_len={cfg.sampler.slice_len}): the steps between would never be learnt from; "
            f"use sampler.state_every<={most} (R2D2's slices overlap by their burn-in)"
        )
    if why is not None:
        raise ConfigError("sampler.state_every", every, why)


def state_every_problem(cfg: DictConfig) -> str | None:
    """Why slices cannot start only where the state is kept every k steps (None: they can):
    that needs trajrl's step slice samplers over complete episodes, and a recurrent learner
    that reads the stored state."""
    if cfg.sampler.get("weighting", "step") != "step":
        return (
            "sampler.weighting=episode is TorchRL's SliceSampler, which starts slices anywhere; "
            "use sampler.weighting=step"
        )
    if cfg.trajs_per_batch is None:
        return (
            "fixed-frame batches (trajs_per_batch=null) keep every step's state in their lanes; "
            "set trajs_per_batch=4 to store complete episodes"
        )
    if cfg.algo.get("initial_state") == "zero":
        return "algo.initial_state=zero starts every slice from a zero state, so no state is read; leave it null"
    if cfg.algo.get("recurrent", True) is False:
        return "the network is not recurrent: it keeps no state; leave it null"
    return None


# ---------------------------------------------------------------- learn, and when to stop
def check_warmup(cfg: DictConfig) -> None:
    """An off-policy run updates at least once: its warm-up ends before the run does."""
    if not learns_on_policy(cfg.algo.name) and cfg.loop.warmup_frames >= cfg.total_frames:
        raise ConfigError(
            "loop.warmup_frames",
            cfg.loop.warmup_frames,
            f"must be below total_frames={cfg.total_frames}, or no update ever runs",
        )


def check_target_sync(cfg: DictConfig) -> None:
    """Target networks synced every k > 1 updates are copied there whole (tau=1)."""
    every = cfg.algo.get("target_sync_every", 1)
    for tau in ("target_tau", "tau"):
        if tau in cfg.algo and every > 1 and cfg.algo[tau] < 1:
            raise ConfigError(
                "algo.target_sync_every",
                every,
                f"syncs the target every {every} updates and algo.{tau}={cfg.algo[tau]:g} would move it only "
                f"part of the way there: set algo.{tau}=1 (a hard copy, as DQN's), or algo.target_sync_every=1 "
                "(a soft update every step)",
            )


def check_eps_spread(cfg: DictConfig) -> None:
    """``algo.eps_spread`` spreads epsilon over the collecting environments: it needs two or more."""
    spread = cfg.algo.get("eps_spread", 0.0)
    actors = int(cfg.collector.num_workers) * int(cfg.env.num_envs)
    if spread > 0 and actors < 2:
        raise ConfigError(
            "algo.eps_spread",
            spread,
            f"gives each collecting environment its own epsilon, and this run has {actors} "
            "(collector.num_workers x env.num_envs): collect with two or more (e.g. env.num_envs=4), "
            "or set algo.eps_spread=0",
        )


def check_clip_schedule(cfg: DictConfig) -> None:
    """``algo.clip_epsilon_end``: where the clip range decays to, from ``algo.clip_epsilon``."""
    end = cfg.algo.get("clip_epsilon_end")
    if end is not None and end > cfg.algo.clip_epsilon:
        raise ConfigError(
            "algo.clip_epsilon_end",
            end,
            f"is where the clip range decays to from algo.clip_epsilon={cfg.algo.clip_epsilon:g}: set it at most "
            "that (RL Baselines3 Zoo: 0), or null for a constant clip range",
        )


def check_stop(cfg: DictConfig) -> None:
    """A run that stops when solved evaluates on the way."""
    stop_at, loop = cfg.loop.stop_at_return, cfg.loop
    if stop_at is None:
        return
    if loop.eval_episodes == 0:
        raise ConfigError(
            "loop.stop_at_return",
            stop_at,
            "stops the run at an evaluation, and loop.eval_episodes=0 "
            "never evaluates: set loop.eval_episodes>=1 (the default is 10), or loop.stop_at_return=null",
        )
    if loop.eval_every_frames == 0 or loop.eval_every_frames >= cfg.total_frames:
        raise ConfigError(
            "loop.stop_at_return",
            stop_at,
            f"stops the run at an evaluation, and loop.eval_every_frames={loop.eval_every_frames} evaluates only "
            f"at the end of total_frames={cfg.total_frames}: set loop.eval_every_frames between 1 and "
            f"{cfg.total_frames - 1}, or loop.stop_at_return=null",
        )


# ---------------------------------------------------------------- against the environment
def check_episode_fits_storage(cfg: DictConfig, spaces: Any) -> None:
    """A storage of complete episodes holds the longest one (``spaces.step_limit`` steps)."""
    limit = spaces.step_limit
    if cfg.storage.kind != "none" and cfg.trajs_per_batch is not None and cfg.storage.capacity < limit:
        raise ConfigError(
            "storage.capacity",
            cfg.storage.capacity,
            f"cannot hold one whole episode of {cfg.env.id} (up to {limit} steps); use storage.capacity>={limit}",
        )


def check_slice_len(cfg: DictConfig, spaces: Any) -> None:
    """A slice is no longer than the longest episode."""
    limit = spaces.step_limit
    if "slice_len" in cfg.sampler and cfg.sampler.slice_len > limit:
        raise ConfigError(
            "sampler.slice_len",
            cfg.sampler.slice_len,
            f"is longer than any episode of {cfg.env.id} (at most {limit} steps): no slice could be full, "
            f"each would be a whole episode and padding; use sampler.slice_len<={limit}",
        )


def check_actions(cfg: DictConfig, spaces: Any) -> None:
    """The algorithm takes the environment's kind of actions (bounded where it needs bounds), and its own
    rule between its settings and the spaces holds (``AlgoSpec.check``)."""
    from trajrl.envs.gym_envs import ACTION_SPACES  # gymnasium: not for a refusal of the settings alone

    spec, env_id, kind = algo_spec(cfg.algo.name), str(cfg.env.id), spaces.action_kind
    if kind is None:
        every = [name for name, other in SPECS.items() if set(ACTION_SPACES) <= set(other.actions)]
        raise ConfigError(
            "env.id",
            env_id,
            f"has {spaces.action_space} actions, which no algorithm takes: wrap them into one of "
            f"{', '.join(ACTION_SPACES.values())}"
            + "".join(f" (algo={name} takes each of these)" for name in every[:1]),
        )
    if kind not in spec.actions:
        fix = " or ".join(f"algo={name}" for name in takes_actions(kind))
        why = f": {spec.why_not[kind]}" if kind in spec.why_not else ""
        raise ConfigError(
            "env.id",
            env_id,
            f"has {spaces.action_space} actions; algo={spec.name} takes "
            f"{' or '.join(ACTION_SPACES[k] for k in spec.actions)} actions{why} (use {fix})",
        )
    if spec.bounded and not spaces.bounded:
        raise ConfigError(
            "env.id",
            env_id,
            f"declares {spaces.action_space} actions, without finite bounds: algo={spec.name} squashes its "
            "actions into their bounds; declare the range the environment acts on (e.g. Box(-1, 1)) or use "
            + " or ".join(
                f"algo={name}" for name, other in SPECS.items() if kind in other.actions and not other.bounded
            ),
        )
    if spec.check is not None:
        spec.check(settings_of(cfg, "algo"), spaces, env_id)


def hindsight(cfg: DictConfig) -> str | None:
    """``hindsight relabelling (sampler.her_ratio=...)`` when it is on, for the messages; else None."""
    ratio = cfg.sampler.get("her_ratio", 0.0)
    return f"hindsight relabelling (sampler.her_ratio={ratio:g})" if ratio else None


def check_hindsight_replay(cfg: DictConfig) -> None:
    """Hindsight relabelling replays complete stored episodes, drawn by a sampler that keeps
    trajrl's episode index."""
    what = hindsight(cfg)
    if what is None:
        return
    if learns_on_policy(cfg.algo.name):
        raise ConfigError(
            "sampler.her_ratio",
            cfg.sampler.her_ratio,
            f"algo={cfg.algo.name} learns on-policy from the episodes its current policy collects; relabelled "
            "goals need replay: use algo=r2d2 or algo=rsac, or sampler.her_ratio=0",
        )
    if cfg.trajs_per_batch is None:
        raise ConfigError(
            "trajs_per_batch", None, f"{what} draws goals from complete stored episodes; set trajs_per_batch=4"
        )
    sampler = cfg.sampler
    if sampler.kind == "slice_without_replacement" or sampler.get("weighting", "step") != "step":
        setting, value = (
            ("sampler.weighting", sampler.weighting) if sampler.kind == "slice" else ("sampler", sampler.kind)
        )
        raise ConfigError(
            setting,
            value,
            f"{what} draws goals from trajrl's episode index, which this TorchRL sampler does not keep: use "
            "sampler=slice (sampler.weighting=step), sampler=prioritized_slice or sampler=episode",
        )


def check_hindsight_env(cfg: DictConfig, spaces: Any) -> None:
    """Hindsight relabelling needs a goal environment, whose rewards it recomputes (none observed)."""
    what = hindsight(cfg)
    if what is None:
        return
    if spaces.goal_problem:
        raise ConfigError(
            "env.id",
            cfg.env.id,
            f"{spaces.goal_problem}; {what} needs a goal environment, e.g. env=bit_flipping, or sampler.her_ratio=0",
        )
    if cfg.env.previous_reward:
        raise ConfigError(
            "env.previous_reward",
            True,
            f"{what} recomputes rewards for new goals, and a reward observed at the next step would still be the "
            "old goal's: use env.previous_reward=false (env.previous_action=true is fine), or sampler.her_ratio=0",
        )
    if cfg.env.reward_scale != 1:
        raise ConfigError(
            "env.reward_scale",
            cfg.env.reward_scale,
            f"{what} recomputes rewards for new goals with the environment's compute_reward, unscaled: "
            "use env.reward_scale=1, or sampler.her_ratio=0",
        )


def check_her_state(cfg: DictConfig) -> None:
    """``sampler.her_state=recompute`` recomputes a state that slices start from (not from zero)."""
    if hindsight(cfg) and cfg.sampler.get("her_state") == "recompute" and cfg.algo.initial_state == "zero":
        raise ConfigError(
            "sampler.her_state",
            "recompute",
            "recomputes the state a relabelled slice starts from, and algo.initial_state=zero starts every slice "
            "from a zero state: use sampler.her_state=zero, or algo.initial_state=stored",
        )


# ---------------------------------------------------------------- the run to resume
def check_resume(cfg: DictConfig) -> None:
    """``resume=<run dir>``: a run directory with its config and a checkpoint, resumed with
    the settings its checkpoint was made with (``checkpointed`` ones: the algorithm, the
    networks' sizes, the environment and its spaces). Run on the config with ``auto``
    resolved, as the run's own ``config.yaml`` holds it."""
    if cfg.resume is None:
        return
    missing = [name for name in ("config.yaml", "checkpoints/latest.pt") if not (Path(cfg.resume) / name).exists()]
    if missing:
        raise ConfigError(
            "resume",
            cfg.resume,
            f"has no {' and no '.join(missing)}; use resume=<the directory of a "
            "run that saved a checkpoint> (outputs/<date>/<time>)",
        )
    saved = load_run_config(cfg.resume)
    keeps = (
        "a resume keeps the algorithm, the networks' sizes and the environment's spaces that its "
        "checkpoint was made with: drop the override, or train a new run (without resume)"
    )
    checkpointed = [  # (group, setting, now, then), a group's option first: another option has other settings
        (group, f.name, _plain(cfg[group].get(f.name)), _plain(saved[group].get(f.name)))
        for options_first in (True, False)
        for group, (selector, _) in GROUPS.items()
        if saved.get(group) is not None
        for f in fields(option_schema(group, cfg[group]))
        if f.metadata.get("checkpointed") and (f.name == selector) == options_first
    ]
    for group, name, now, then in checkpointed:
        if now == then:
            continue
        if name == GROUPS[group][0]:
            raise ConfigError(group, now, f"the checkpoint in {cfg.resume} was made with {group}={then}; {keeps}")
        raise ConfigError(f"{group}.{name}", now, f"the checkpoint in {cfg.resume} holds {then!r}; {keeps}")


def _plain(value: Any) -> Any:
    return OmegaConf.to_container(value, resolve=True) if OmegaConf.is_config(value) else value


# ---------------------------------------------------------------- what the CLI checks besides the config
def key_of(override: str) -> str:
    """The setting an override sets (``+a.b=1`` -> ``a.b``)."""
    return override.split("=", 1)[0].lstrip("+~")


def check_overrides(overrides: list[str], algo: str) -> None:
    """Refuse an override of a setting this run would not read (``overrides``: as typed)."""
    if not learns_on_policy(algo):
        return
    for override in overrides:
        key, value = key_of(override), override.partition("=")[2]
        if key in OFF_POLICY_ONLY:
            raise ConfigError(
                key,
                value,
                f"is read by the off-policy loop only; algo={algo} learns from each batch of episodes as "
                "it comes (algo.epochs passes, weights pushed after each): drop it, or set algo.epochs, "
                "trajs_per_batch or sampler.episodes_per_batch",
            )


def check_launcher(launcher: str, collector: str, env_backend: str = "threading") -> None:
    """Refuse a Hydra launcher that cannot run this collector (``launcher``: its ``_target_``)."""
    if "joblib" in launcher.lower() and starts_processes(collector, env_backend):
        raise ConfigError(
            "hydra/launcher",
            "joblib",
            f"cannot start collector={collector}'s worker processes inside its jobs (they cannot pickle its "
            "shared memory); use hydra/launcher=parallel (each job its own process) or collector=sync",
        )
