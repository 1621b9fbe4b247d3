"""Compose the run configuration and check it, once, before anything is built.

``compose(overrides)`` is the config the CLI would run with (Hydra's compose API, over the
dataclasses of ``trajrl.configuration.settings`` that ``register`` puts in Hydra's ConfigStore).
``validate(cfg)`` merges each group into its option's dataclass (``typed``), runs every
check (``trajrl.configuration.checks``), fills in what ``auto`` stands for, and returns a read-only config
marked as checked, which ``build`` and ``train`` take without checking it again.
``explain`` turns an error Hydra raised while composing into trajrl's one line.
"""

from __future__ import annotations

import logging
import re
import typing
from dataclasses import fields, is_dataclass
from typing import Any

import yaml
from hydra import compose as hydra_compose
from hydra import initialize_config_dir
from hydra.core.config_store import ConfigStore
from hydra.errors import MissingConfigException
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import (
    ConfigAttributeError,
    ConfigKeyError,
    MissingMandatoryValue,
    OmegaConfBaseException,
    ValidationError,
)

from trajrl.algos.registry import algo_spec
from trajrl.base import internals
from trajrl.base.errors import ConfigError
from trajrl.configuration.checks import check, check_resume, state_every_problem, storage_layout
from trajrl.configuration.helptext import describe_groups, describe_settings
from trajrl.configuration.settings import (
    CONFIG_DIR,
    GROUPS,
    ORDERED_COLLECTOR,
    ORDERED_IN_PLACE_OF,
    RunSettings,
    bringing_options,
    brought_by,
    option_schema,
)

log = logging.getLogger("trajrl")
_CHECKED = "trajrl_checked"  # the flag validate() leaves on the config it returns


def register() -> None:
    """Put the settings dataclasses in Hydra's ConfigStore (``trajrl_<group>_<class>``, and
    ``trajrl_run`` for the top level), where the YAML files of ``configs/`` extend them, what an
    option brings to the rest of the run (``trajrl_brought_<group>_<option>``, which its file
    includes at the top level: ``brought_by``), and
    ``--help``'s list of every setting where ``configs/config.yaml`` asks for it (``${trajrl_settings:}``)."""
    if not OmegaConf.has_resolver("trajrl_settings"):
        OmegaConf.register_new_resolver("trajrl_settings", describe_settings)
        OmegaConf.register_new_resolver("trajrl_groups", describe_groups)
    store = ConfigStore.instance()
    store.store(name="trajrl_run", node=RunSettings)
    for group, (_, options) in GROUPS.items():
        for schema in set(options.values()):
            store.store(name=f"trajrl_{group}_{schema.__name__}", node=schema)
    for group, option in bringing_options():
        node = OmegaConf.create()
        for key, value in brought_by(group, option).items():
            OmegaConf.update(node, key, value, force_add=True)
        store.store(name=f"trajrl_brought_{group}_{option}", node=node)


register()


def compose(overrides: list[str] | None = None) -> DictConfig:
    """The configuration the CLI would run with these overrides (Hydra's compose API)."""
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
        return hydra_compose(config_name="config", overrides=list(overrides or []))


def is_checked(cfg: DictConfig) -> bool:
    return OmegaConf.is_readonly(cfg) and bool(internals.config_flag(cfg, _CHECKED))


def validate(cfg: DictConfig) -> DictConfig:
    """Check every setting and the ones that depend on each other; raise ConfigError.

    Returns the config converted to the schema's types, with ``storage.ndim``,
    ``sampler.slices_per_batch`` and ``sampler.state_every`` resolved from ``auto``, read-only.
    Makes one instance of the environment (gymnasium only) to check its id, spaces and episode
    step limit.
    """
    if is_checked(cfg):
        return cfg
    from trajrl.envs.gym_envs import import_env_module

    env = cfg.get("env")  # first: the module may register an option (a sampler, a memory core)
    import_env_module(env.get("import_module") if isinstance(env, DictConfig) else None)
    cfg = typed(cfg)
    order_collection(cfg)
    check(cfg)
    resolve_auto(cfg)
    check_resume(cfg)  # against the run's config.yaml, which holds what auto stood for
    internals.set_config_flag(cfg, _CHECKED, True)
    OmegaConf.set_readonly(cfg, True)
    return cfg


def order_collection(cfg: DictConfig) -> None:
    """``deterministic=true``: a collector that steps in a fixed order with learning. A process
    collector (``ORDERED_IN_PLACE_OF``) becomes ``collector=sync`` over as many environments (as one
    vector, ``env.num_envs``), and the log says so; one that cannot be ordered is refused."""
    if not cfg.deterministic or cfg.collector.kind == ORDERED_COLLECTOR:
        return
    kind, workers = cfg.collector.kind, int(cfg.collector.num_workers)
    if kind not in ORDERED_IN_PLACE_OF:
        raise ConfigError(
            "collector",
            kind,
            f"deterministic=true needs collection in a fixed order with learning, and collector={kind} runs "
            f"its environments on its own clock; use collector={ORDERED_COLLECTOR} or one it stands in for "
            f"({', '.join(ORDERED_IN_PLACE_OF)}), or deterministic=false",
        )
    envs = workers * int(cfg.env.num_envs)
    cfg.collector.kind, cfg.collector.num_workers, cfg.env.num_envs = ORDERED_COLLECTOR, 1, envs
    log.info(
        "deterministic=true: collector=%s (%d worker%s) replaced by collector=%s over %d environment%s, "
        "stepped in turn with the updates",
        kind,
        workers,
        "s" * (workers > 1),
        ORDERED_COLLECTOR,
        envs,
        "s" * (envs > 1),
    )


def resolve_auto(cfg: DictConfig) -> None:
    """What ``auto`` stands for, in a checked config. ``sampler.state_every``: ``slice_len - burn_in``
    (the most that leaves no step unlearnt) where slices can start at kept states only
    (``state_every_problem``), else null. ``sampler.slices_per_batch``: the algorithm's
    (``AlgoSpec.slices_per_batch``). ``storage.ndim``: the collector's layout (``storage_layout``).
    ``env.observe_time``: whether the task's episodes end by a clock (``ends_by_clock``)."""
    if cfg.sampler.get("slices_per_batch") == "auto":
        cfg.sampler.slices_per_batch = algo_spec(cfg.algo.name).slices_per_batch
    if cfg.sampler.get("state_every") == "auto":
        most = cfg.sampler.slice_len - cfg.sampler.burn_in  # at least 1: check_burn_in
        cfg.sampler.state_every = most if state_every_problem(cfg) is None else None
    if cfg.storage.kind != "none":
        cfg.storage.ndim = storage_layout(cfg)[0]
    if cfg.env.get("observe_time") == "auto":
        from trajrl.envs.gym_envs import ends_by_clock

        cfg.env.observe_time = ends_by_clock(cfg.env, cfg.loop.stall_timeout_s)


# ---------------------------------------------------------------- types
def typed(cfg: DictConfig) -> DictConfig:
    """``cfg`` merged into its options' schemas (a plain config from a file gets its
    types too): a value of the wrong type, or a key the option does not have, is a
    ``ConfigError`` naming the setting, the value and what would work."""
    out = {}
    for group, (selector, _) in GROUPS.items():
        section = cfg.get(group)
        if not isinstance(section, DictConfig):
            raise ConfigError(group, section, f"must be a group of settings; pick one with {group}=<option>")
        where = f"{group}={section.get(selector)}" if selector else group
        out[group] = _merge(option_schema(group, section), section, group, where)
    rest = {k: v for k, v in cfg.items() if k not in GROUPS}
    top = _merge(RunSettings, OmegaConf.create(rest), "", "the top level", skip=GROUPS)
    result = OmegaConf.create({**top, **out})
    OmegaConf.set_struct(result, True)
    return result


def _merge(schema: type, section: DictConfig, prefix: str, where: str, skip=()) -> dict:
    """``section`` over ``schema``'s defaults and types, as a dict; OmegaConf's errors, read
    from their fields (``full_key``, ``value``), as ``ConfigError``s."""
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
        raise ConfigError(_join(prefix, err.full_key), err.value, f"must be {expected(schema, err.full_key)}") from None
    except ConfigKeyError as err:
        raise ConfigError(_join(prefix, err.full_key), "?", f"{where} has no such setting") from None
    except OmegaConfBaseException as err:
        raise ConfigError(
            _join(prefix, err.full_key or "?"),
            "?" if err.value is None else err.value,
            (err.msg or str(err)).splitlines()[0],
        ) from None


def expected(schema: type | None, full_key: str) -> str:
    """How the declared type of setting ``full_key`` reads to a user (``schema``: its
    dataclass, if known; otherwise found through the registry from the key's group)."""
    key = str(full_key)
    name = key.split(".")[-1].split("[")[0]
    group = key.split(".")[0] if "." in key else ""
    candidates = [schema] if is_dataclass(schema) else []
    candidates += list(GROUPS[group][1].values()) if group in GROUPS else [RunSettings]
    for candidate in candidates:
        hints = typing.get_type_hints(candidate)
        if name in hints:
            return in_words(hints[name])
    return "of the setting's type"


def in_words(kind: Any) -> str:
    """A declared type as a user reads it (``int | None``: ``an integer or null``)."""
    args = typing.get_args(kind)
    if type(None) in args:
        return f"{in_words(next(a for a in args if a is not type(None)))} or null"
    if typing.get_origin(kind) is list:
        return {int: "a list of integers", str: "a list of names"}.get(args[0], "a list")
    if typing.get_origin(kind) is dict:
        return "a mapping of keyword arguments"
    if is_dataclass(kind):
        return "a group of settings"
    words = {int: "an integer", float: "a number", bool: "true or false", str: "a string"}
    return words.get(kind, f"of type {getattr(kind, '__name__', kind)}")


# ---------------------------------------------------------------- Hydra's composition errors
#: Configs of Hydra plugins the sweep extra installs (``hydra/launcher=parallel`` and ``slurm`` use them).
SWEEP_EXTRA = ("hydra/launcher/submitit_local", "hydra/launcher/submitit_slurm", "hydra/sweeper/optuna")


def explain(err: BaseException) -> ConfigError | None:
    """Hydra's composition error as trajrl's one line, where the cause is an option no group
    has, a value of the wrong type or a key no option has (``None``: Hydra's own message says
    it best). Read from the fields the exceptions carry (OmegaConf's ``full_key``, ``value``,
    ``object_type``; Hydra's ``missing_cfg_file``, ``options``), along the chain of causes."""
    missing = _cause(err, MissingConfigException)
    if missing is not None:
        return _missing_option(missing)
    cause = _cause(err, (ValidationError, ConfigKeyError, ConfigAttributeError))
    if cause is None:
        return None
    key = str(cause.full_key or cause.key or "")
    if isinstance(cause, ValidationError):
        return ConfigError(key, cause.value, f"must be {expected(cause.object_type, key)}")
    return _unknown_key(err, cause, key)


def _cause(err: BaseException, kinds: type | tuple[type, ...]) -> Any:
    """The first exception of ``kinds`` along ``err``'s chain of causes."""
    cause: BaseException | None = err
    while cause is not None and not isinstance(cause, kinds):
        cause = cause.__cause__ or cause.__context__
    return cause


def _missing_option(err: MissingConfigException) -> ConfigError | None:
    """``group=option`` where the group has no such option (``options``: the ones it has),
    or a config file that needs a plugin's config which is not installed (``options`` None)."""
    if err.missing_cfg_file is None:  # the primary config: Hydra's message says where it looked
        return None
    group, _, option = err.missing_cfg_file.rpartition("/")
    extra = err.missing_cfg_file in SWEEP_EXTRA
    needs = "the sweep launchers and the Optuna sweeper are an optional extra: pip install 'trajrl[sweep]'"
    if err.options is None:
        return ConfigError(group, option, f"is not installed (a Hydra plugin's); {needs}") if extra else None
    return ConfigError(group, option, f"use one of {', '.join(err.options)}" + (f" ({needs})" if extra else ""))


def _unknown_key(err: BaseException, cause: OmegaConfBaseException, setting: str) -> ConfigError | None:
    """A key the option's dataclass (``cause.object_type``) does not have, set by an override or a config file."""
    schema = cause.object_type
    if not is_dataclass(schema):
        return None
    group = setting.split(".")[0] if "." in setting else ""
    name = str(cause.key or setting.split(".")[-1])
    names = sorted(f.name for f in fields(schema) if f.name not in GROUPS)
    options = [option for option, cls in GROUPS[group][1].items() if cls is schema] if group in GROUPS else []
    where = (f"{group}={options[0]}" if len(options) == 1 and options[0] else group) or "the top level"
    # Hydra writes the config file that set the key only into its message ("In '<file>': ..."):
    # ConfigCompositionException has no field for it.
    source = re.match(r"In '([^']+)'", str(err))
    return ConfigError(
        setting,
        _override_value(err, setting),
        f"{where} has no such setting; its settings are {', '.join(names)}{_elsewhere(group, name)}",
        source=f"{source.group(1)}.yaml" if source else None,
    )


def _override_value(err: BaseException, setting: str) -> Any:
    """The value an override gave ``setting`` (``?`` if Hydra's message does not say). Read from
    the text: Hydra keeps the override only in its message ("To append to your config use
    +<key>=<value>"), and OmegaConf's error for a key it does not have carries no value."""
    found = re.search(rf"{re.escape(setting)}=(\S+)", str(err))
    if not found:
        return "?"
    try:
        return yaml.safe_load(found.group(1))
    except yaml.YAMLError:
        return found.group(1)


def _elsewhere(group: str, key: str) -> str:
    """Which options of ``group`` have setting ``key`` (the user may have meant one of them)."""
    if group not in GROUPS:
        return ""
    having = [name for name, cls in GROUPS[group][1].items() if key in {f.name for f in fields(cls)}]
    return f" ({group}.{key} is a setting of {group}={', '.join(having)})" if having else ""


def _join(prefix: str, key: Any) -> str:
    return f"{prefix}.{key}" if prefix else str(key)
