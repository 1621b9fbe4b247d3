"""Every setting of trajrl, in one place: its type, default, range or choices and a
one-line description, as dataclass fields, one dataclass per option of each config group.

These dataclasses are the schema Hydra composes with (each option's YAML file under
``configs/`` extends its dataclass; ``trajrl.configuration.compose`` registers them in Hydra's ConfigStore),
and the objects the code reads: the factory hands ``R2D2Settings`` to ``R2D2``,
``LoopSettings`` to the loops (``settings_of``). The registries (``GROUPS``) list each
group's options; the choices, ``--help`` (``trajrl.configuration.helptext``), the range checks
(``trajrl.configuration.checks``) and the factory's dispatch derive from them. A new hyperparameter is
one field here plus its use.

Nothing here imports torch: a config is checked in about a second.
"""

from __future__ import annotations

from dataclasses import MISSING, dataclass, field, fields
from pathlib import Path
from typing import Any, ClassVar, Protocol

from trajrl.algos import ppo, r2d2, rsac  # noqa: F401 (each registers itself: trajrl.algos.registry)
from trajrl.algos.registry import ALGOS, SPECS
from trajrl.base.declare import (  # noqa: F401 (how a setting is declared, also imported from here)
    ANY_NUMBER,
    FRACTION,
    Range,
    above,
    at_least,
    between,
    default_of,
    option,
    setting,
)
from trajrl.base.errors import ConfigError
from trajrl.base.kinds import HER_STRATEGIES

#: The config files Hydra composes (``configs/config.yaml`` and a folder for each group's options).
CONFIG_DIR = Path(__file__).resolve().parents[2] / "configs"


# ---------------------------------------------------------------- env
@dataclass
class EnvSettings:
    id: str = setting(
        MISSING,
        "gymnasium id of the environment (trajrl's ids: trajrl/CartPoleNoVel-v1, "
        "trajrl/PendulumNoVel-v1; the travel suite's trajrl/PointMassNoVel-v0, trajrl/RepeatPrevious-v0, "
        "trajrl/RepeatPreviousHard-v0, trajrl/RepeatPreviousPair-v0, trajrl/RecallSequence-v0, "
        "trajrl/RepeatFirst-v0, trajrl/RunningSum-v0)",
        checkpointed=True,
        main="gymnasium id of the environment (env=gym: any registered one)",
    )
    kwargs: dict[str, Any] = setting(
        {},
        "keyword arguments for gymnasium.make (+env.kwargs.<name>=<value>)",
        checkpointed=True,
    )
    import_module: str | None = setting(
        None,
        "module to import first, in the learner's process and in every worker (on the command line: before the "
        "config is composed): where third-party ids register, and memory cores and samplers "
        "(trajrl.algos.memory.register_core, trajrl.factory.replay.register_sampler)",
        main="a module imported first, in every process: where your environment registers its id",
    )
    num_envs: int = setting(
        1,
        "environments each collector worker steps together as one gymnasium vector env "
        "(with collector=async_batched: num_workers x num_envs single environments)",
        range=at_least(1),
    )
    vectorization: str = setting(
        "sync",
        "sync: the vector steps its environments in the worker's process; async: each in a process of its own",
        choices=("sync", "async"),
    )
    stepping: str = setting(
        "lean",
        "how the collector steps its environments: lean: trajrl steps gymnasium itself "
        "and keeps the episode bookkeeping in bulk (what torchrl writes, faster); "
        "torchrl: TorchRL's GymWrapper and transforms",
        choices=("lean", "torchrl"),
    )
    previous_action: bool = setting(
        False,
        "observe the action taken at the step before as well (one-hot for "
        "discrete actions; zeros at an episode's first step), as POPGym and "
        "Ni et al. (2022) feed recurrent agents (algo=rsac: observed; recurrent SAC learns "
        "CartPole without velocities with it, docs/results.md)",
        checkpointed=True,
    )
    previous_reward: bool = setting(
        False, "observe the reward of the step before as well (0 at an episode's first step)", checkpointed=True
    )
    observe_time: Any = setting(
        False,
        "observe the steps t since the episode began as well, as tanh(t / s) for each s of time_scales, "
        "so that an agent can foresee the end of a task that stops at a fixed step (Pardo et al., 2018); "
        "auto: where a task's episodes end by such a clock (random actions: every episode terminated, "
        "not truncated, at one length; algo=rsac's)",
        choices=("true", "false", "auto"),
        null=False,
        checkpointed=True,
    )
    time_scales: list[float] = setting(
        [16.0, 64.0],
        "env.observe_time: the scales s of tanh(t / s), in steps (each resolves times up to about 2 s; "
        "the default: fine near step 16, coarse to step 128)",
        range=above(0),
        checkpointed=True,
    )
    reward_scale: float = setting(
        1.0,
        "every reward multiplied by this, in collection and evaluation alike (returns and stop_at_return "
        "are on the scaled rewards): how an algorithm copes with another scale of rewards",
        range=above(0),
        checkpointed=True,
    )


# ---------------------------------------------------------------- collect
@dataclass
class CollectorSettings:
    kind: str = option("sync")
    num_workers: int = setting(
        1,
        "collector worker processes (actors with collector=ray)",
        range=at_least(1),
        main="collector worker processes",
    )
    frames_per_batch: int = setting(
        200, "frames each worker steps per rollout (rounded up to whole vector steps)", range=at_least(1)
    )
    max_restarts: int = setting(
        5,
        "restarts of one collector environment that raised (rebuilt, its episode "
        "dropped), within restart_window_s, before the run ends; 0: the first "
        "error ends the run (debug=smoke)",
        range=at_least(0),
    )
    restart_window_s: float = setting(3600.0, "the window max_restarts counts restarts in, in seconds", range=above(0))
    bad_steps: str = setting(
        "stop",
        "a collector environment's step whose reward or observation is not finite, or not of its declared "
        "shape and dtype: stop (the run ends, naming it), drop (its episode is dropped and counted in "
        "collect/episodes_dropped_bad_steps; the config check's first steps do not refuse it either) or "
        "unchecked (steps are not checked: a trusted environment's last percent of speed; the replay buffer "
        "still refuses a non-finite value, the learner a non-finite loss)",
        choices=("stop", "drop", "unchecked"),
    )
    worker_niceness: int = setting(
        10,
        "added to the niceness (os.nice) of the worker processes a collector starts on this machine "
        "(async, multi_sync, multi_async; async_batched with env_backend=multiprocessing): where the learner and "
        "the workers want more cores than there are, the learner keeps its own and the workers share what "
        "is left; 0: the learner's priority",
        range=between(0, 19),
    )


@dataclass
class AsyncBatchedCollectorSettings(CollectorSettings):
    env_backend: str = setting("threading", "where the environments run", choices=("threading", "multiprocessing"))


@dataclass
class RayCollectorSettings(CollectorSettings):
    address: str | None = setting(
        None, 'null: a local Ray instance for the run; "auto" or "ray://<head>:10001": join that cluster'
    )


#: Collectors on this machine (threads and worker processes), and the one on Ray.
COLLECTORS: dict[str, type] = {
    "sync": CollectorSettings,
    "async": CollectorSettings,
    "multi_sync": CollectorSettings,
    "multi_async": CollectorSettings,
    "async_batched": AsyncBatchedCollectorSettings,
    "ray": RayCollectorSettings,
}
LOCAL_COLLECTORS = tuple(kind for kind in COLLECTORS if kind != "ray")
#: Collectors whose workers are separate processes writing into a shared buffer.
PROCESS_COLLECTORS = ("async", "multi_sync", "multi_async")
#: Collectors that hand PPO episodes of the policy it is learning (the others run ahead with older weights).
ON_POLICY_COLLECTORS = ("sync", "multi_sync")
#: ``deterministic=true``: the collector that steps in a fixed order with learning (in the learner's thread,
#: a batch of frames, then the updates it pays for), and those it stands in for (with their environments).
ORDERED_COLLECTOR = "sync"
ORDERED_IN_PLACE_OF = PROCESS_COLLECTORS


# ---------------------------------------------------------------- replay: storage and sampler
@dataclass
class StorageSettings:
    kind: str = option("lazy_tensor")
    capacity: int = setting(
        100_000,
        "frames the buffer holds; the oldest are overwritten first",
        range=at_least(1),
        main="frames the replay buffer holds (the oldest overwritten first)",
    )
    ndim: Any = setting(
        "auto",
        "storage dimensions: auto derives them from the collector: 1 for complete "
        "episodes (trajs_per_batch set); fixed frames (trajs_per_batch=null) keep one lane "
        "per environment, 1 + (num_workers > 1) + (env.num_envs > 1)",
        choices=("auto", "1", "2", "3"),
    )


@dataclass
class MemmapStorageSettings(StorageSettings):
    scratch_dir: str | None = setting(None, "where the memory-mapped files go (null: <run dir>/buffer)")


@dataclass
class NoStorageSettings:
    kind: str = option("none")
    capacity: int | None = setting(
        None, "unused (debug=smoke sets it for whichever storage is chosen)", range=at_least(1), shown=False
    )


STORAGES: dict[str, type] = {
    "lazy_tensor": StorageSettings,
    "lazy_memmap": MemmapStorageSettings,
    "none": NoStorageSettings,
}


def her_ratio() -> Any:
    return setting(
        0.0,
        "share of sampled slices (or episodes) given a goal their own episode achieved, the rewards "
        "recomputed for it (Hindsight Experience Replay; goal environments only); 0: off",
        range=FRACTION,
    )


def her_strategy() -> Any:
    return setting(
        "future",
        "where a substituted goal comes from: future: what was achieved at a step at or after "
        "the slice's end; final: at the episode's last step; episode: at any step of it",
        choices=HER_STRATEGIES,
    )


def her_state() -> Any:
    return setting(
        "recompute",
        "recurrent state a relabelled slice starts from: recompute: the current network's "
        "over the episode's steps before the slice, the new goal shown (what a policy "
        "pursuing it would have had); zero: a zero state, warmed over burn_in steps",
        choices=("recompute", "zero"),
    )


#: What a sampler's batches are (its settings' ``batches``), which the checks and the buffer read, never
#: its name: ``slices`` (``[N, slice_len]`` rows inside episodes, padded, with burn-in: ``slice_len``
#: and ``burn_in`` among its settings), ``episodes`` (``[N, T]`` rows of whole episodes, padded),
#: ``tape`` (``[1, N]``: whole episodes end to end, each closed by a masked cell, ``is_init`` at each
#: start: ``trajrl.replay.tapes``) or ``transitions`` (``[N, 1]`` single steps). What each learner
#: reads of a batch is in the batch itself (``trajrl.algos.sequences``).
BATCHES = ("slices", "episodes", "tape", "transitions")


class SamplerOption(Protocol):
    """What a sampler's settings dataclass is (``SAMPLERS``; ``trajrl.factory.replay.register_sampler``
    adds one): its option's name and what its batches are (``BATCHES``), then its settings."""

    batches: ClassVar[str]
    kind: str


@dataclass
class SliceSamplerSettings:
    batches: ClassVar[str] = "slices"
    kind: str = option("slice_without_replacement")
    slices_per_batch: Any = setting(
        "auto",
        "slices in each [N, T] training batch; auto: the algorithm's (algo=rsac: 4, its update costing about "
        "0.44x as much as with 16 for as much learnt a frame; the others: 16)",
        range=at_least(1),
        auto=True,
        null=False,
    )
    slice_len: int = setting(
        40,
        "steps of each slice (T); shorter episodes come back whole, padded",
        range=at_least(1),
        main="steps of each sampled slice (T)",
    )
    burn_in: int = setting(
        10,
        "first steps of a slice that starts mid-episode which only warm the recurrent "
        "state (no loss); a slice that starts its episode learns from every step",
        range=at_least(0),
        main="first steps of a mid-episode slice that only warm the recurrent state",
    )
    her_ratio: float = her_ratio()
    her_strategy: str = her_strategy()
    her_state: str = her_state()


def state_every() -> Any:
    return setting(
        "auto",
        "keep the recurrent state only at every k-th step of each episode (k, 2k, ...; zero at "
        "its first step) and start slices only there, at the one at or before a drawn step "
        "(R2D2's stored sequence starts); a slice ends at its episode's end; null: every step; "
        "auto: slice_len - burn_in (slices overlap by their burn-in) where slices read a stored "
        "state from complete episodes, else null",
        range=at_least(1),
        auto=True,
    )


@dataclass
class StepSliceSamplerSettings(SliceSamplerSettings):
    kind: str = option("slice")
    weighting: str = setting(
        "step",
        "step: every stored step equally likely to start a slice (long episodes get "
        "their share); episode: every stored episode equally likely (TorchRL's "
        "SliceSampler)",
        choices=("step", "episode"),
    )
    state_every: Any = state_every()


@dataclass
class PrioritizedSliceSamplerSettings(SliceSamplerSettings):
    kind: str = option("prioritized_slice")
    alpha: float = setting(0.6, "priority exponent (0: uniform)", range=at_least(0))
    beta: float = setting(0.4, "importance-sampling exponent", range=FRACTION)
    eta: float = setting(0.9, "priority of a sequence: eta * max |td| + (1 - eta) * mean |td| (R2D2)", range=FRACTION)
    state_every: Any = state_every()


@dataclass
class EpisodeSamplerSettings:
    batches: ClassVar[str] = "episodes"
    kind: str = option("episode")
    episodes_per_batch: int = setting(
        8,
        "whole episodes per batch (algo=ppo: per minibatch)",
        range=at_least(1),
        main="whole episodes per batch (algo=ppo: per minibatch)",
    )
    her_ratio: float = her_ratio()
    her_strategy: str = her_strategy()


@dataclass
class RandomSamplerSettings:
    batches: ClassVar[str] = "transitions"
    kind: str = option("random")
    transitions_per_batch: int = setting(
        256, "single transitions per batch (no burn-in: nothing before them)", range=at_least(1)
    )


@dataclass
class TapeSamplerSettings:
    batches: ClassVar[str] = "tape"
    kind: str = option("tape")
    tape_frames: int = setting(
        1000,
        "steps in each batch: whole stored episodes drawn at random, each at most once, laid end to end "
        "into one sequence (the last one cut there); no padding, no burn-in, no stored state: the "
        "memory core restarts at each episode start inside it (algo.rnn=lru or ffm)",
        range=between(1, 1_000_000),
    )


SAMPLERS: dict[str, type[SamplerOption]] = {
    "slice": StepSliceSamplerSettings,
    "slice_without_replacement": SliceSamplerSettings,
    "prioritized_slice": PrioritizedSliceSamplerSettings,
    "episode": EpisodeSamplerSettings,
    "random": RandomSamplerSettings,
    "tape": TapeSamplerSettings,
}


def batches_of(sampler: Any) -> str:
    """What the batches of the sampler a config's ``sampler`` section picks are (``BATCHES``)."""
    return SAMPLERS[sampler.kind].batches


# ---------------------------------------------------------------- report
@dataclass
class LoggerSettings:
    backends: list[str] = setting(
        ["csv"],
        "csv (metrics.csv, always written), tensorboard, wandb; several at once",
        choices=("csv", "tensorboard", "wandb"),
        main="csv (always written), tensorboard, wandb",
    )
    wandb_mode: str = setting(
        "offline", "wandb without an account or network unless online", choices=("offline", "online")
    )
    plots: bool = setting(
        True,
        "the CLI draws the run's metrics into <run dir>/plots at its end (trajrl plot <run dir> draws them any time)",
    )


# ---------------------------------------------------------------- the loop and the run
@dataclass
class LoopSettings:
    warmup_frames: int = setting(
        2_000,
        "off-policy: frames stored before the first update",
        range=at_least(0),
    )
    updates_per_frame: float = setting(
        0.5,
        "off-policy: gradient updates per stored frame (update-to-data ratio)",
        range=above(0),
    )
    max_update_lag: int | None = setting(
        200,
        "off-policy: pause collection while the learner is this many updates behind the ratio (null: never); "
        "keep it above collector.frames_per_batch x updates_per_frame",
        range=at_least(1),
    )
    weight_sync_every: int = setting(
        10, "off-policy: push the learner's weights every this many updates", range=at_least(1)
    )
    eval_every_frames: int = setting(
        5_000,
        "evaluate (deterministic policy) every this many frames; 0: only at the end",
        range=at_least(0),
        main="evaluate the greedy policy every this many frames",
    )
    eval_episodes: int = setting(
        10,
        "episodes averaged in each evaluation; 0: no evaluation",
        range=at_least(0),
        main="episodes averaged in each evaluation (0: none)",
    )
    log_every_frames: int = setting(
        2_000, "a progress line and a metrics row every this many frames", range=at_least(1)
    )
    checkpoint_every_frames: int = setting(
        10_000, "save checkpoints/latest.pt every this many frames (0: only at the end)", range=at_least(0)
    )
    stall_timeout_s: float = setting(
        120.0,
        "give up when nothing is stored (PPO: no batch) for this long, or an "
        "environment call or an update waits this long",
        range=at_least(1),
    )
    time_limit_s: float | None = setting(
        None,
        "stop after this many seconds as if total_frames were reached (null: no limit)",
        range=above(0),
    )
    stop_at_return: float | None = setting(
        None,
        "end the run at the first evaluation whose mean return is at least this (null: train to total_frames); "
        "it is the run's last evaluation, best.pt and latest.pt are saved as at any end",
        range=ANY_NUMBER,
        main="end the run at the first evaluation whose mean return reaches this",
    )


#: Settings only the off-policy loop reads (algo=r2d2, rsac).
OFF_POLICY_ONLY = ("loop.warmup_frames", "loop.updates_per_frame", "loop.max_update_lag", "loop.weight_sync_every")


@dataclass
class RunSettings:
    """The top level; each group (env, collector, ...) is one of its options' dataclasses."""

    seed: int = setting(
        0,
        "seed of torch, the environments and evaluation",
        range=at_least(0),
        main="seed of torch, the environments and evaluation",
    )
    device: str = setting(
        "cpu",
        "where the learner trains: cpu, cuda (refused without a CUDA device) or auto "
        "(cuda where there is one); collectors and evaluation act on CPU copies",
        choices=("cpu", "cuda", "auto"),
        main="where the learner trains: cpu, cuda or auto (collectors act on CPU copies)",
    )
    total_frames: int = setting(
        60_000,
        "frames stored (PPO: learnt from) before the run stops; the step axis (algo=rsac's: CartPole without "
        "velocities reaches 475 in about 9,000: docs/results.md)",
        range=at_least(1),
        main="frames stored (PPO: learnt from) before the run stops",
    )
    trajs_per_batch: int | None = setting(
        4,
        "complete episodes a collector gathers per write (or PPO batch); null: fixed-frame batches (algo=rsac, "
        "collector=async_batched: each episode written as soon as it ends; algo=ppo: a minibatch of "
        "sampler.episodes_per_batch at least)",
        range=at_least(1),
        brought={"collector=async_batched": 1},
    )
    traj_format: str = setting(
        "cat",
        "cat: episodes one after the other; padded: [N, T] with ('collector', 'mask'), stored as valid steps "
        "(algo=ppo's: episodes reach its learner as [N, T] and a mask)",
        choices=("cat", "padded"),
    )
    deterministic: bool = setting(
        False,
        "the same seed on the same machine repeats its run (metrics, checkpoints): collection and learning take "
        "turns in the learner's thread, process collectors become collector=sync over as many environments "
        "(async_batched, ray: refused); costs the overlap, about 0.9x the default's frames/s (docs/configuration.md)",
        main="the same seed on the same machine repeats its run, to the bit (slower: docs/configuration.md)",
    )
    audit: bool = setting(False, "check the trajectory invariants while training (audit/... metrics)")
    audit_every: int = setting(
        100, "audit every this many sampled batches, and the whole buffer at the end", range=at_least(1)
    )
    resume: str | None = setting(
        None,
        "continue a stopped run from its directory's last checkpoint",
    )
    loop: LoopSettings = field(default_factory=LoopSettings)
    env: Any = None  # each group: set by its option (configs/<group>/<option>.yaml)
    collector: Any = None
    storage: Any = None
    sampler: Any = None
    algo: Any = None
    logger: Any = None


#: Each group: the field naming its option, and the option's dataclass by name.
GROUPS: dict[str, tuple[str | None, dict[str, type]]] = {
    "env": (None, {"": EnvSettings}),
    "collector": ("kind", COLLECTORS),
    "storage": ("kind", STORAGES),
    "sampler": ("kind", SAMPLERS),
    "algo": ("name", ALGOS),
    "logger": (None, {"": LoggerSettings}),
    "loop": (None, {"": LoopSettings}),
}


def brought_by(group: str, option: str) -> dict[str, Any]:
    """``{dotted key: value}`` of every setting picking ``group=option`` brings a value for: an algorithm's
    ``AlgoSpec.brings``, else each setting whose declaration says so (``setting(..., brought=...)``).
    They are in Hydra's ConfigStore (``trajrl_brought_<group>_<option>``), where the option includes
    them; ``--help`` names the option as their source."""
    if group == "algo" and option in SPECS:
        return dict(SPECS[option].brings)
    spec = f"{group}={option}"
    return {key: brought[spec] for key, brought in _brought_values() if spec in brought}


def bringing_options() -> list[tuple[str, str]]:
    """``(group, option)`` of every option some setting declares a ``brought`` value for (an algorithm's
    are stored where it registers: ``trajrl.algos.registry.register_algo``)."""
    return sorted({tuple(spec.split("=", 1)) for _, brought in _brought_values() for spec in brought})


def _brought_values() -> list[tuple[str, dict[str, Any]]]:
    """``(dotted key, its brought values)`` of every setting: the top level's, the loop's, each option's."""
    schemas = [("", RunSettings), ("loop.", LoopSettings)]
    schemas += [(f"{g}.", schema) for g, (_, options) in GROUPS.items() for schema in options.values()]
    return [(prefix + f.name, f.metadata.get("brought", {})) for prefix, schema in schemas for f in fields(schema)]


# ---------------------------------------------------------------- a group's option: its dataclass
def option_schema(group: str, section: Any) -> type:
    """The dataclass of the option ``section`` (a group of a composed config) is."""
    selector, options = GROUPS[group]
    choice = "" if selector is None else section.get(selector)
    if choice not in options:
        raise ConfigError(f"{group}.{selector}", choice, f"use one of {', '.join(options)}")
    return options[choice]


def settings_of(cfg: Any, group: str) -> Any:
    """The dataclass instance of a checked config's group (``settings_of(cfg, "algo")``: an ``R2D2Settings``)."""
    return section_settings(group, cfg.get(group))


def section_settings(group: str, section: Any) -> Any:
    """The dataclass instance of one group's section of a checked config."""
    from omegaconf import OmegaConf

    return option_schema(group, section)(**OmegaConf.to_container(section, resolve=True))


# ---------------------------------------------------------------- a run's saved config
#: Settings trajrl no longer has (the lab notebook, notebook/learning/tuning.md, says why), by
#: option (``group=option``) and key, with the value that is now what trajrl
#: always does (``ANY``: every value did the same). A saved run that holds one at that value loads
#: without it; at another, it is refused: its agent was made by code trajrl no longer carries.
ANY = object()
RETIRED: dict[str, dict[str, Any]] = {
    "algo=*": {
        "forget_bias": None,
        "chrono_horizon": None,
        "chrono_spread": ANY,
        "observation_stats": "fixed",
        "observation_rate": ANY,
        "squash_observations": False,
        "rnn_lr": None,
        "layer_norm": False,
        "lr_end": None,
        "refresh_states_every": None,
    },
    "algo=r2d2": {"eval_network": "online", "advantage_learning": 0.0},
    "algo=rsac": {
        "critic_core": "separate",
        "soft_target": True,
        "huber_delta": 1.0,
        "dueling": False,
        "learner_threads": ANY,
        "twin_value": "min",
        "q_clip": None,
        "entropy_penalty": 0.0,
    },
    "sampler=*": {"terminal_share": 0.0},
}


def load_run_config(run_dir: Any) -> Any:
    """A run directory's ``config.yaml``, without the settings trajrl no longer has (``RETIRED``) where
    they hold what trajrl now always does; ``ConfigError`` where one holds something else."""
    from omegaconf import OmegaConf

    saved = OmegaConf.load(Path(run_dir) / "config.yaml")
    for group, (selector, _) in GROUPS.items():
        section = saved.get(group)
        if selector is None or not OmegaConf.is_dict(section):
            continue
        retired = {**RETIRED.get(f"{group}=*", {}), **RETIRED.get(f"{group}={section.get(selector)}", {})}
        for key, kept in retired.items():
            if key not in section:
                continue
            value = OmegaConf.to_container(section, resolve=True)[key]
            if kept is not ANY and value != kept:
                raise ConfigError(
                    f"{group}.{key}",
                    value,
                    f"{run_dir} was made with a setting trajrl no longer has (the code that read it is gone, "
                    f"{'unset' if kept is None else kept!r} is what trajrl does now): evaluate or resume it with "
                    "the version of trajrl it was made with",
                )
            del section[key]
    return saved
