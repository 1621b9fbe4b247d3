"""The types of every setting: one dataclass per config group option.

``typed(cfg)`` checks a composed config against them (OmegaConf's structured
configs): a value of the wrong type, or a setting the chosen option does not
have, is a ``ConfigError`` naming the setting, the value and what would work.
Values are converted where that is lossless (``algo.lr=1`` becomes ``1.0``).
The cross-field rules live in ``trajrl.config.validate``.
"""
from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any, Optional

from omegaconf import MISSING, DictConfig, OmegaConf
from omegaconf.errors import ConfigKeyError, OmegaConfBaseException, ValidationError

from trajrl.config import ConfigError


@dataclass
class Env:
    id: str = MISSING
    kwargs: dict[str, Any] = field(default_factory=dict)
    import_module: Optional[str] = None
    num_envs: int = 1
    vectorization: str = "sync"


@dataclass
class Collector:
    kind: str = MISSING
    num_workers: int = MISSING
    frames_per_batch: int = MISSING


@dataclass
class AsyncBatchedCollector(Collector):
    env_backend: str = "threading"


@dataclass
class RayCollector(Collector):
    address: Optional[str] = None  # null: a local Ray instance for the run; "auto" or "ray://host:10001": a cluster


@dataclass
class Storage:
    kind: str = MISSING
    capacity: int = MISSING
    ndim: Any = "auto"  # auto | 1


@dataclass
class MemmapStorage(Storage):
    scratch_dir: Optional[str] = None


@dataclass
class NoStorage:
    kind: str = "none"
    capacity: Optional[int] = None  # debug=smoke sets it for whichever storage is chosen; none has no use for it


@dataclass
class SliceSampler:
    kind: str = MISSING
    slices_per_batch: int = MISSING
    slice_len: int = MISSING
    burn_in: int = MISSING


@dataclass
class StepSliceSampler(SliceSampler):
    weighting: str = "step"


@dataclass
class PrioritizedSliceSampler(SliceSampler):
    alpha: float = MISSING
    beta: float = MISSING
    eta: float = MISSING


@dataclass
class EpisodeSampler:
    kind: str = "episode"
    episodes_per_batch: int = MISSING


@dataclass
class RandomSampler:
    kind: str = "random"
    transitions_per_batch: int = MISSING


@dataclass
class Recurrent:
    name: str = MISSING
    rnn: str = "lstm"
    hidden_size: int = MISSING
    encoder_sizes: list[int] = MISSING
    normalize_observations: bool = True
    gamma: float = MISSING
    lr: float = MISSING
    max_grad_norm: float = MISSING


@dataclass
class R2D2(Recurrent):
    n_step: int = MISSING
    initial_state: str = "stored"
    double_q: bool = True
    value_rescaling: bool = False
    target_tau: float = MISSING
    eps_start: float = MISSING
    eps_end: float = MISSING
    eps_decay_frames: int = MISSING
    eval_network: str = "online"
    lr_end: Optional[float] = None
    dueling: bool = False


@dataclass
class RSAC(Recurrent):
    initial_state: str = "stored"
    tau: float = MISSING
    init_alpha: float = MISSING
    target_entropy: Optional[float] = None


@dataclass
class PPO(Recurrent):
    recurrent: bool = False
    gae_lambda: float = MISSING
    clip_epsilon: float = MISSING
    epochs: int = MISSING
    anneal_lr: bool = True
    value_coef: float = MISSING
    entropy_coef: float = MISSING
    normalize_advantage: bool = True


@dataclass
class Logger:
    backends: list[str] = field(default_factory=lambda: ["csv"])
    wandb_mode: str = "offline"


@dataclass
class Loop:
    warmup_frames: int = MISSING
    updates_per_frame: float = MISSING
    max_update_lag: Optional[int] = None
    weight_sync_every: int = MISSING
    eval_every_frames: int = MISSING
    eval_episodes: int = MISSING
    log_every_frames: int = MISSING
    checkpoint_every_frames: int = MISSING
    stall_timeout_s: float = MISSING
    time_limit_s: Optional[float] = None


@dataclass
class Top:
    seed: int = 0
    device: str = "cpu"
    total_frames: int = MISSING
    trajs_per_batch: Optional[int] = None
    traj_format: str = "cat"
    audit: bool = False
    audit_every: int = MISSING
    resume: Optional[str] = None


#: The schema of each group, by the option that picks it (``kind`` or ``name``).
GROUPS: dict[str, tuple[str | None, dict[str, type]]] = {
    "env": (None, {"": Env}),
    "collector": ("kind", {"sync": Collector, "async": Collector, "multi_sync": Collector,
                           "multi_async": Collector, "async_batched": AsyncBatchedCollector,
                           "ray": RayCollector}),
    "storage": ("kind", {"lazy_tensor": Storage, "lazy_memmap": MemmapStorage, "none": NoStorage}),
    "sampler": ("kind", {"slice": StepSliceSampler, "slice_without_replacement": SliceSampler,
                         "prioritized_slice": PrioritizedSliceSampler, "episode": EpisodeSampler,
                         "random": RandomSampler}),
    "algo": ("name", {"r2d2": R2D2, "rsac": RSAC, "ppo": PPO}),
    "logger": (None, {"": Logger}),
    "loop": (None, {"": Loop}),
}


def typed(cfg: DictConfig) -> DictConfig:
    """``cfg`` checked against the schema and converted to its types (a plain, struct DictConfig)."""
    out = {}
    for group, (selector, options) in GROUPS.items():
        section = cfg.get(group)
        if not isinstance(section, DictConfig):
            raise ConfigError(group, section, f"must be a group of settings; pick one with {group}=<option>")
        choice = "" if selector is None else section.get(selector)
        if choice not in options:
            raise ConfigError(f"{group}.{selector}", choice, f"use one of {', '.join(options)}")
        out[group] = _merge(options[choice], section, group, f"{group}={choice}" if choice else group)
    rest = {k: v for k, v in cfg.items() if k not in GROUPS}
    out.update(_merge(Top, OmegaConf.create(rest), "", "the top level"))
    result = OmegaConf.create(out)
    OmegaConf.set_struct(result, True)
    return result


def _merge(schema: type, section: DictConfig, prefix: str, where: str) -> dict:
    known = {f.name for f in fields(schema)}
    for key in section.keys():
        if key not in known:
            raise ConfigError(_join(prefix, key), section.get(key),
                              f"{where} has no such setting; its settings are {', '.join(sorted(known))}")
    try:
        merged = OmegaConf.merge(OmegaConf.structured(schema), section)
    except ConfigKeyError as err:
        raise ConfigError(_join(prefix, err.full_key), "?",
                          f"{where} has no such setting; see python -m trajrl --cfg job") from None
    except ValidationError as err:
        expected = _expected(schema, str(err.full_key))
        raise ConfigError(_join(prefix, err.full_key), err.value if hasattr(err, "value") else "?",
                          f"must be {expected}") from None
    except OmegaConfBaseException as err:
        raise ConfigError(_join(prefix, getattr(err, "full_key", "?")), "?", str(err).splitlines()[0]) from None
    return OmegaConf.to_container(merged, resolve=True)


def _expected(schema: type, full_key: str) -> str:
    """How the schema's type of ``full_key`` reads to a user."""
    kind = {f.name: f.type for f in fields(schema)}.get(full_key.split(".")[0].split("[")[0])
    words = {"int": "an integer", "float": "a number", "bool": "true or false", "str": "a string",
             "Optional[int]": "an integer or null", "Optional[float]": "a number or null",
             "Optional[str]": "a string or null", "list[int]": "a list of integers",
             "list[str]": "a list of names", "dict[str, Any]": "a mapping of keyword arguments"}
    return words.get(str(kind), f"of type {kind}")


def _join(prefix: str, key: Any) -> str:
    return f"{prefix}.{key}" if prefix else str(key)

