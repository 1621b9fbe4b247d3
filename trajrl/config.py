"""Compose the run configuration and check it, once, before anything is built.

``validate(cfg)`` converts each group to its option's dataclass schema
(``trajrl.settings``), checks every value against the range or choices declared
beside it, then the rules that tie settings together, then the environment. It
returns a read-only config marked as checked, which ``build`` and ``train`` take
without checking it again.
"""

from __future__ import annotations

import importlib.util
import os
import re
from dataclasses import fields, is_dataclass
from pathlib import Path
from typing import Any

import yaml
from hydra import compose as hydra_compose
from hydra import initialize_config_dir
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import (
    ConfigAttributeError,
    ConfigKeyError,
    MissingMandatoryValue,
    OmegaConfBaseException,
    ValidationError,
)

from trajrl import settings as S
from trajrl.errors import ConfigError
from trajrl.spaces import DISCRETE

CONFIG_DIR = Path(__file__).resolve().parent.parent / "configs"
_CHECKED = "trajrl_checked"  # the flag validate() leaves on the config it returns

S.register()


def compose(overrides: list[str] | None = None) -> DictConfig:
    """The configuration the CLI would run with these overrides (Hydra's compose API)."""
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
        return hydra_compose(config_name="config", overrides=list(overrides or []))


def is_checked(cfg: DictConfig) -> bool:
    return OmegaConf.is_readonly(cfg) and bool(cfg._get_flag(_CHECKED))


def validate(cfg: DictConfig) -> DictConfig:
    """Check every setting and the ones that depend on each other; raise ConfigError.

    Returns the config converted to the schema's types, with ``storage.ndim`` and
    ``sampler.state_every`` resolved from ``auto``, read-only. Makes one instance of the environment
    (gymnasium only) to check its id, spaces and episode step limit.
    """
    if is_checked(cfg):
        return cfg
    from trajrl.envs import env_spaces

    cfg = typed(cfg)
    S.check_ranges(cfg)
    _resolve_state_every(cfg)
    _check_device(cfg.device)
    _check_collector(cfg)
    if cfg.algo.name in S.ON_POLICY_ALGOS:
        _check_ppo(cfg)
    else:
        _check_off_policy(cfg)
    _check_algo(cfg)
    _check_stop(cfg)
    spaces = env_spaces(cfg.env, cfg.algo.name)
    _check_against_env(cfg, spaces)
    _check_actions(cfg, spaces)
    _check_hindsight(cfg, spaces)
    if cfg.resume is not None:
        _check_resume(cfg.resume)
    if cfg.storage.kind != "none":
        cfg.storage.ndim = storage_layout(cfg)[0]
    cfg._set_flag(_CHECKED, True)
    OmegaConf.set_readonly(cfg, True)
    return cfg


# ---------------------------------------------------------------- types
def typed(cfg: DictConfig) -> DictConfig:
    """``cfg`` merged into its options' schemas (a plain config from a file gets its
    types too): a value of the wrong type, or a key the option does not have, is a
    ``ConfigError`` naming the setting, the value and what would work."""
    out = {}
    for group in S.GROUPS:
        section = cfg.get(group)
        if not isinstance(section, DictConfig):
            raise ConfigError(group, section, f"must be a group of settings; pick one with {group}=<option>")
        schema = S.option_schema(group, section)
        selector = S.GROUPS[group][0]
        out[group] = _merge(schema, section, group, f"{group}={section.get(selector)}" if selector else group)
    rest = {k: v for k, v in cfg.items() if k not in S.GROUPS}
    top = _merge(S.RunSettings, OmegaConf.create(rest), "", "the top level", skip=S.GROUPS)
    result = OmegaConf.create({**top, **out})
    OmegaConf.set_struct(result, True)
    return result


def _merge(schema: type, section: DictConfig, prefix: str, where: str, skip=()) -> dict:
    known = {f.name for f in fields(schema)}
    for key in section.keys():
        if key not in known:
            raise ConfigError(
                _join(prefix, key),
                section.get(key),
                f"{where} has no such setting; its settings are {', '.join(sorted(known - set(skip)))}"
                f"{_elsewhere(prefix, key)}",
            )
    try:
        merged = OmegaConf.to_container(
            OmegaConf.merge(OmegaConf.structured(schema), section), resolve=True, throw_on_missing=True
        )
        return {key: value for key, value in merged.items() if key not in skip}
    except MissingMandatoryValue as err:
        key = _join(prefix, err.full_key)
        raise ConfigError(key, "???", f"{key} is required (for example {key}=CartPole-v1)") from None
    except ValidationError as err:
        raise ConfigError(
            _join(prefix, err.full_key), _value_of(err), f"must be {expected(schema, err.full_key)}"
        ) from None
    except ConfigKeyError as err:
        raise ConfigError(_join(prefix, err.full_key), "?", f"{where} has no such setting") from None
    except OmegaConfBaseException as err:
        raise ConfigError(_join(prefix, getattr(err, "full_key", "?")), "?", str(err).splitlines()[0]) from None


def _value_of(err: OmegaConfBaseException) -> Any:
    found = re.match(r"Value '(.*?)' (of type|could not)", str(err))
    return found.group(1) if found else getattr(err, "value", "?")


def expected(schema: type | None, full_key: str) -> str:
    """How the declared type of setting ``full_key`` reads to a user (``schema``: its
    dataclass, if known; otherwise found through the registry from the key's group)."""
    key = str(full_key)
    name = key.split(".")[-1].split("[")[0]
    group = key.split(".")[0] if "." in key else ""
    candidates = [schema] if is_dataclass(schema) else []
    candidates += list(S.GROUPS[group][1].values()) if group in S.GROUPS else [S.RunSettings]
    kind = next((f.type for c in candidates for f in fields(c) if f.name == name), None)
    words = {
        "int": "an integer",
        "float": "a number",
        "bool": "true or false",
        "str": "a string",
        "Optional[int]": "an integer or null",
        "Optional[float]": "a number or null",
        "Optional[str]": "a string or null",
        "list[int]": "a list of integers",
        "list[str]": "a list of names",
        "dict[str, Any]": "a mapping of keyword arguments",
        "LoopSettings": "a group of settings",
    }
    return words.get(str(kind), f"of type {kind}")


def explain(err: BaseException) -> ConfigError | None:
    """Hydra's composition error as trajrl's one line, where the cause is a value of the
    wrong type or a key no option has (``None``: Hydra's own message says it best)."""
    cause: BaseException | None = err
    while cause is not None and not isinstance(cause, (ValidationError, ConfigKeyError, ConfigAttributeError)):
        cause = cause.__cause__ or cause.__context__
    if cause is None:
        return None
    key = str(getattr(cause, "full_key", "") or "")
    schema = getattr(cause, "object_type", None)
    group = key.split(".")[0] if "." in key else ""
    if isinstance(cause, ValidationError):
        return ConfigError(key, _value_of(cause), f"must be {expected(schema, key)}")
    if not is_dataclass(schema):
        return None
    missing = str(getattr(cause, "key", "") or key.split(".")[-1])
    setting = f"{key.rsplit('.', 1)[0]}.{missing}" if "." in key else missing
    names = sorted(f.name for f in fields(schema) if f.name not in S.GROUPS)
    options = [name for name, cls in S.GROUPS[group][1].items() if cls is schema] if group in S.GROUPS else []
    where = (f"{group}={options[0]}" if len(options) == 1 and options[0] else group) or "the top level"
    source = re.match(r"In '([^']+)'", str(err))
    return ConfigError(
        setting,
        _override_value(err, setting),
        f"{where} has no such setting; its settings are {', '.join(names)}{_elsewhere(group, missing)}",
        source=f"{source.group(1)}.yaml" if source else None,
    )


def _elsewhere(group: str, key: str) -> str:
    """Which options of ``group`` have setting ``key`` (the user may have meant one of them)."""
    if group not in S.GROUPS:
        return ""
    selector, options = S.GROUPS[group]
    having = [name for name, cls in options.items() if key in {f.name for f in fields(cls)}]
    return f" ({group}.{key} is a setting of {group}={', '.join(having)})" if having else ""


def _override_value(err: BaseException, setting: str) -> Any:
    """The value given to ``setting`` in the message Hydra wrote, if it says (``?`` otherwise)."""
    found = re.search(rf"{re.escape(setting)}=(\S+)", str(err))
    if not found:
        return "?"
    try:
        return yaml.safe_load(found.group(1))
    except yaml.YAMLError:
        return found.group(1)


def _join(prefix: str, key: Any) -> str:
    return f"{prefix}.{key}" if prefix else str(key)


# ---------------------------------------------------------------- rules that tie settings together
def _check_device(device: str) -> None:
    if device != "cuda":
        return
    import torch  # only here: a refused setting is reported without waiting for torch's import

    if not torch.cuda.is_available():
        raise ConfigError(
            "device",
            device,
            "this machine has no CUDA device that torch "
            f"{torch.__version__} can use; use device=cpu, or device=auto (cuda where there is one)",
        )


def _check_collector(cfg: DictConfig) -> None:
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
    if kind == "ray":
        if importlib.util.find_spec("ray") is None:
            raise ConfigError(
                "collector",
                "ray",
                "needs Ray, an optional extra: pip install 'trajrl[ray]' "
                "(or use collector=multi_async on this machine)",
            )
        address = cfg.collector.get("address")
        if address is not None and address != "auto" and not re.fullmatch(r"(ray://)?[^:/\s]+:\d+", str(address)):
            raise ConfigError(
                "collector.address",
                address,
                'give "ray://<head>:10001", "<head>:6379", "auto" '
                "(the cluster this machine belongs to) or null (a Ray instance of the run's own)",
            )


def _check_ppo(cfg: DictConfig) -> None:
    collector, storage, sampler = cfg.collector.kind, cfg.storage.kind, cfg.sampler.kind
    if collector not in S.ON_POLICY_COLLECTORS:
        raise ConfigError(
            "collector",
            collector,
            "algo=ppo learns on-policy from complete episodes of its current policy, and this collector runs "
            f"ahead with older weights; use collector={' or collector='.join(S.ON_POLICY_COLLECTORS)}",
        )
    if cfg.trajs_per_batch is None:
        raise ConfigError("trajs_per_batch", None, "algo=ppo needs complete-episode batches; set trajs_per_batch=8")
    if storage != "none":
        raise ConfigError(
            "storage",
            storage,
            "algo=ppo keeps no replay storage (it learns from each batch, then drops it); use storage=none",
        )
    if sampler != "episode":
        raise ConfigError(
            "sampler",
            sampler,
            "algo=ppo learns from whole episodes; use sampler=episode "
            "(sampler.episodes_per_batch episodes per minibatch)",
        )


def _check_off_policy(cfg: DictConfig) -> None:
    collector, storage, sampler, trajs = cfg.collector.kind, cfg.storage.kind, cfg.sampler.kind, cfg.trajs_per_batch
    if storage == "none":
        raise ConfigError(
            "storage",
            "none",
            f"algo={cfg.algo.name} learns from a replay buffer; use storage=lazy_tensor or storage=lazy_memmap",
        )
    if cfg.storage.capacity is None:
        raise ConfigError("storage.capacity", None, "set the frames the buffer holds, e.g. storage.capacity=100000")
    if trajs is None:
        _check_fixed_frames(cfg)
    if collector == "async_batched" and trajs not in (1, None):
        raise ConfigError(
            "trajs_per_batch",
            trajs,
            "collector=async_batched writes each episode as it completes; use trajs_per_batch=1 (or null: "
            "fixed-frame batches), or collector=multi_async to batch episodes",
        )
    ndim, why = storage_layout(cfg)
    if str(cfg.storage.ndim) not in ("auto", str(ndim)):
        raise ConfigError("storage.ndim", cfg.storage.ndim, f"{why}; use storage.ndim=auto or {ndim}")
    if sampler in S.SLICE_SAMPLERS and cfg.sampler.burn_in >= cfg.sampler.slice_len:
        slice_len = cfg.sampler.slice_len
        raise ConfigError(
            "sampler.burn_in",
            cfg.sampler.burn_in,
            f"leaves no step to learn from in slices of {slice_len}; "
            f"use sampler.burn_in<={slice_len - 1} or a longer sampler.slice_len",
        )
    if cfg.loop.warmup_frames >= cfg.total_frames:
        raise ConfigError(
            "loop.warmup_frames",
            cfg.loop.warmup_frames,
            f"must be below total_frames={cfg.total_frames}, or no update ever runs",
        )
    _check_state_every(cfg)
    refresh = cfg.algo.get("refresh_states_every")
    if refresh is not None and (cfg.algo.initial_state == "zero" or sampler == "episode"):
        why = (
            "algo.initial_state=zero starts every slice from a zero state"
            if cfg.algo.initial_state == "zero"
            else "sampler=episode starts every sequence at its episode's first step, from a zero state"
        )
        raise ConfigError(
            "algo.refresh_states_every",
            refresh,
            f"{why}: no stored state is read; leave it null or use the stored states",
        )


def _resolve_state_every(cfg: DictConfig) -> None:
    """``sampler.state_every=auto``: ``slice_len - burn_in`` (the most that leaves no step
    unlearnt) where slices can start at kept states only (``_state_every_problem``), else null."""
    if cfg.sampler.get("state_every") != "auto":
        return
    most = cfg.sampler.slice_len - cfg.sampler.burn_in
    cfg.sampler.state_every = most if most >= 1 and _state_every_problem(cfg) is None else None


def _state_every_problem(cfg: DictConfig) -> str | None:
    """Why slices cannot start only where the state is kept every k steps, apart from the
    storage (None: they can): that needs trajrl's step slice samplers over complete episodes,
    and a recurrent learner that reads the stored state."""
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
    if cfg.algo.get("refresh_states_every") is not None:
        return "algo.refresh_states_every recomputes every step's stored state; set it to null"
    if cfg.algo.get("recurrent", True) is False:
        return "the network is not recurrent: it keeps no state; leave it null"
    return None


def _check_state_every(cfg: DictConfig) -> None:
    """``sampler.state_every``: allowed where ``_state_every_problem`` finds none, and at most
    ``slice_len - burn_in``."""
    every = cfg.sampler.get("state_every")
    if every is None:
        return
    why = _state_every_problem(cfg)
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


def storage_layout(cfg: DictConfig) -> tuple[int, str]:
    """The storage's ``ndim`` for this collector and ``trajs_per_batch``, and why."""
    if cfg.trajs_per_batch is not None:
        return 1, f"trajs_per_batch={cfg.trajs_per_batch} writes complete episodes flat, one after the other"
    c = cfg.collector
    workers, envs, steps = S.fixed_frame_lanes(c.kind, c.num_workers, cfg.env.num_envs, c.frames_per_batch)
    if c.kind == "async_batched":
        lanes = f"[N={workers}, T]" if workers > 1 else "[T]"
        return S.lane_ndim(workers, envs), (
            f"collector=async_batched steps {workers} single environment"
            f"{'s' * (workers > 1)} (num_workers x env.num_envs) and writes "
            f"their steps as they come (trajs_per_batch=null) into {lanes} lanes, "
            "one per environment"
        )
    shape = ", ".join([f"W={workers}"] * (workers > 1) + [f"B={envs}"] * (envs > 1) + [f"T={steps}"])
    who = f"collector={c.kind}" + (f" with {workers} workers" if workers > 1 else "")
    envs_said = f"env.num_envs={envs}" if envs > 1 else "one environment each"
    return S.lane_ndim(workers, envs), (
        f"{who} and {envs_said} writes fixed-frame [{shape}] batches "
        "(trajs_per_batch=null), one storage lane per environment"
    )


def _check_fixed_frames(cfg: DictConfig) -> None:
    """Fixed-frame batches (``trajs_per_batch=null``): what lanes of steps can serve."""
    c, sampler = cfg.collector, cfg.sampler
    if sampler.kind not in ("slice", "prioritized_slice", "random") or sampler.get("weighting", "step") != "step":
        setting = "sampler.weighting" if sampler.kind == "slice" else "sampler"
        value = sampler.weighting if sampler.kind == "slice" else sampler.kind
        raise ConfigError(
            setting,
            value,
            "fixed-frame batches (trajs_per_batch=null) are sampled by stored step: "
            "use sampler=slice (sampler.weighting=step), sampler=prioritized_slice or sampler=random, "
            "or set trajs_per_batch=4 to store complete episodes",
        )
    workers, envs, steps = S.fixed_frame_lanes(c.kind, c.num_workers, cfg.env.num_envs, c.frames_per_batch)
    lanes = workers * envs
    need = max(steps, sampler.get("slice_len", 1))
    if cfg.storage.capacity // lanes < need:
        raise ConfigError(
            "storage.capacity",
            cfg.storage.capacity,
            f"gives each of the {lanes} lanes (one per environment) {cfg.storage.capacity // lanes} "
            f"steps, fewer than the {need} a lane must hold (a write of {steps} steps, a slice of "
            f"{sampler.get('slice_len', 1)}); use storage.capacity>={need * lanes}",
        )
    if cfg.algo.get("refresh_states_every") is not None:
        raise ConfigError(
            "algo.refresh_states_every",
            cfg.algo.refresh_states_every,
            "recomputes the stored states of complete episodes; with fixed-frame batches "
            "(trajs_per_batch=null) leave it null, or set trajs_per_batch=4",
        )


def _check_algo(cfg: DictConfig) -> None:
    """Settings of the algorithm that need another one."""
    if cfg.algo.get("rnn_lr") is not None and cfg.algo.name == "ppo" and not cfg.algo.recurrent:
        raise ConfigError(
            "algo.rnn_lr",
            cfg.algo.rnn_lr,
            "is the learning rate of the recurrent core, and "
            "algo.recurrent=false has none: set algo.recurrent=true, or algo.rnn_lr=null",
        )
    every = cfg.algo.get("target_sync_every", 1)
    for tau in ("target_tau", "tau"):
        if tau in cfg.algo and every > 1 and cfg.algo[tau] < 1:
            raise ConfigError(
                "algo.target_sync_every",
                every,
                f"syncs the target every {every} updates and "
                f"algo.{tau}={cfg.algo[tau]:g} would move it only part of the way there: set "
                f"algo.{tau}=1 (a hard copy, as DQN's), or algo.target_sync_every=1 (a soft update "
                "every step)",
            )


def _check_against_env(cfg: DictConfig, spaces) -> None:
    """Settings that only make sense for episodes of at most ``spaces.step_limit`` steps."""
    limit = spaces.step_limit
    if cfg.storage.kind != "none" and cfg.trajs_per_batch is not None and cfg.storage.capacity < limit:
        raise ConfigError(
            "storage.capacity",
            cfg.storage.capacity,
            f"cannot hold one whole episode of {cfg.env.id} (up to {limit} steps); use storage.capacity>={limit}",
        )
    if cfg.algo.name != "ppo" and "slice_len" in cfg.sampler and cfg.sampler.slice_len > limit:
        raise ConfigError(
            "sampler.slice_len",
            cfg.sampler.slice_len,
            f"is longer than any episode of {cfg.env.id} (at most {limit} steps): no slice could be full, "
            f"each would be a whole episode and padding; use sampler.slice_len<={limit}",
        )


def _check_stop(cfg: DictConfig) -> None:
    """A run that stops when solved must evaluate on the way."""
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
            f"stops the run at an evaluation, and "
            f"loop.eval_every_frames={loop.eval_every_frames} evaluates only at the end of "
            f"total_frames={cfg.total_frames}: set loop.eval_every_frames between 1 and "
            f"{cfg.total_frames - 1}, or loop.stop_at_return=null",
        )


def _check_actions(cfg: DictConfig, spaces) -> None:
    """Settings of one kind of actions only."""
    fraction = cfg.algo.get("target_entropy_fraction")
    if fraction is None:
        return
    if spaces.action_kind != DISCRETE:
        raise ConfigError(
            "algo.target_entropy_fraction",
            fraction,
            f"sets SAC-discrete's target entropy, and "
            f"{cfg.env.id} has continuous actions: set algo.target_entropy (e.g. -{spaces.actions}, "
            "minus the action size: the default), or algo.target_entropy_fraction=null",
        )
    if cfg.algo.get("target_entropy") is not None:
        raise ConfigError(
            "algo.target_entropy_fraction",
            fraction,
            f"and algo.target_entropy="
            f"{cfg.algo.target_entropy:g} both set the target entropy: keep one, the other null",
        )


def _check_hindsight(cfg: DictConfig, spaces) -> None:
    """Hindsight relabelling (``sampler.her_ratio`` > 0): replayed complete episodes of a
    goal environment, drawn by a sampler that keeps trajrl's episode index."""
    ratio = cfg.sampler.get("her_ratio", 0.0)
    if not ratio:
        return
    what = f"hindsight relabelling (sampler.her_ratio={ratio:g})"
    if cfg.algo.name in S.ON_POLICY_ALGOS:
        raise ConfigError(
            "sampler.her_ratio",
            ratio,
            f"algo={cfg.algo.name} learns on-policy from the episodes its "
            "current policy collects; relabelled goals need replay: use algo=r2d2 or algo=rsac, "
            "or sampler.her_ratio=0",
        )
    if cfg.trajs_per_batch is None:
        raise ConfigError(
            "trajs_per_batch", None, f"{what} draws goals from complete stored episodes; set trajs_per_batch=4"
        )
    if cfg.sampler.kind == "slice_without_replacement" or cfg.sampler.get("weighting", "step") != "step":
        setting = "sampler" if cfg.sampler.kind != "slice" else "sampler.weighting"
        value = cfg.sampler.kind if cfg.sampler.kind != "slice" else cfg.sampler.weighting
        raise ConfigError(
            setting,
            value,
            f"{what} draws goals from trajrl's episode index, which this TorchRL "
            "sampler does not keep: use sampler=slice (sampler.weighting=step), "
            "sampler=prioritized_slice or sampler=episode",
        )
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
            f"{what} recomputes rewards for new goals, and a reward "
            "observed at the next step would still be the old goal's: use env.previous_reward=false "
            "(env.previous_action=true is fine), or sampler.her_ratio=0",
        )
    if cfg.sampler.get("her_state") == "recompute" and cfg.algo.initial_state == "zero":
        raise ConfigError(
            "sampler.her_state",
            "recompute",
            "recomputes the state a relabelled slice starts from, "
            "and algo.initial_state=zero starts every slice from a zero state: use "
            "sampler.her_state=zero, or algo.initial_state=stored",
        )


def _check_resume(resume: str) -> None:
    run_dir = Path(resume)
    missing = [name for name in ("config.yaml", "checkpoints/latest.pt") if not (run_dir / name).exists()]
    if missing:
        raise ConfigError(
            "resume",
            resume,
            f"has no {' and no '.join(missing)}; use resume=<the directory of a "
            "run that saved a checkpoint> (outputs/<date>/<time>)",
        )


# ---------------------------------------------------------------- what the CLI checks besides the config
def key_of(override: str) -> str:
    """The setting an override sets (``+a.b=1`` -> ``a.b``)."""
    return override.split("=", 1)[0].lstrip("+~")


def check_overrides(overrides: list[str], algo: str) -> None:
    """Refuse an override of a setting this run would not read (``overrides``: as typed)."""
    if algo != "ppo":
        return
    for override in overrides:
        key, value = key_of(override), override.partition("=")[2]
        if key in S.OFF_POLICY_ONLY:
            raise ConfigError(
                key,
                value,
                "is read by the off-policy loop only; algo=ppo learns from each batch of episodes as "
                "it comes (algo.epochs passes, weights pushed after each): drop it, or set algo.epochs, "
                "trajs_per_batch or sampler.episodes_per_batch",
            )


def check_launcher(launcher: str, collector: str, env_backend: str = "threading") -> None:
    """Refuse a Hydra launcher that cannot run this collector (``launcher``: its ``_target_``)."""
    if "joblib" in launcher.lower() and S.starts_processes(collector, env_backend):
        raise ConfigError(
            "hydra/launcher",
            "joblib",
            f"cannot start collector={collector}'s worker processes inside its jobs (they cannot pickle its "
            "shared memory); use hydra/launcher=parallel (each job its own process) or collector=sync",
        )
