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

import math
from dataclasses import MISSING, Field, dataclass, field, fields
from typing import Any, ClassVar, Protocol

from trajrl.base.errors import ConfigError


# ---------------------------------------------------------------- how a setting is declared
@dataclass(frozen=True)
class Range:
    """The numbers a setting admits (always finite): ``low``/``high`` bounds, open or closed."""

    low: float | None = None
    high: float | None = None
    low_open: bool = False
    high_open: bool = False

    def admits(self, value: float) -> bool:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            return False
        if self.low is not None and (value <= self.low if self.low_open else value < self.low):
            return False
        return self.high is None or (value < self.high if self.high_open else value <= self.high)

    def __str__(self) -> str:
        low = None if self.low is None else f"{'>' if self.low_open else '>='} {self.low:g}"
        high = None if self.high is None else f"{'<' if self.high_open else '<='} {self.high:g}"
        if low and high and self.low_open == self.high_open:
            return f"{'strictly ' if self.low_open else ''}between {self.low:g} and {self.high:g}"
        if low and high:
            return f"{low} and {high}"
        return low or high or "a finite number"


def at_least(low: float) -> Range:
    return Range(low)


def above(low: float) -> Range:
    return Range(low, low_open=True)


def between(low: float, high: float, low_open: bool = False, high_open: bool = False) -> Range:
    return Range(low, high, low_open, high_open)


ANY_NUMBER = Range()
FRACTION = between(0, 1)


def setting(
    default: Any,
    help: str,
    *,
    range: Range | None = None,
    choices: tuple[str, ...] | None = None,
    auto: bool = False,
    null: bool = True,
    checkpointed: bool = False,
    brought: dict[str, Any] | None = None,
) -> Any:
    """A dataclass field with its description and its range (numbers) or choices (names);
    ``brought``: the value a run gets where it picks a group's option (``{"algo=rsac": 16_000}``:
    ``python -m trajrl algo=rsac`` runs 16,000 frames), the later group in ``configs/config.yaml``'s
    defaults list winning where two chosen options bring one (``brought_by``);
    ``auto``: the value "auto" is admitted too (trajrl derives it from other settings);
    ``null=False``: a field typed ``Any`` (a number or auto) refuses null, which its type cannot;
    ``checkpointed``: what a checkpoint holds was made with it (the networks' shapes, the
    environment's spaces), so a resume keeps it (``trajrl.configuration.checks.check_resume``).
    A list default is copied for each instance."""
    metadata = {
        "help": help,
        "range": range,
        "choices": choices,
        "auto": auto,
        "null": null,
        "checkpointed": checkpointed,
        "brought": dict(brought or {}),
    }
    if isinstance(default, (list, dict)):
        return field(default_factory=lambda: type(default)(default), metadata=metadata)
    return field(default=default, metadata=metadata)


def option(name: str, checkpointed: bool = False) -> Any:
    """The field that names a group's option (``kind`` or ``name``); the registry sets its choices.
    ``checkpointed``: a resume keeps the option (``setting``)."""
    metadata = {"help": "the option of this group", "range": None, "choices": None, "checkpointed": checkpointed}
    return field(default=name, metadata=metadata)


def default_of(f: Field) -> Any:
    """The default a field declares (a fresh copy of a list); ``MISSING`` where it is required."""
    return f.default_factory() if f.default_factory is not MISSING else f.default


# ---------------------------------------------------------------- env
@dataclass
class EnvSettings:
    id: str = setting(
        MISSING,
        "gymnasium id of the environment (trajrl's ids: trajrl/CartPoleNoVel-v1, "
        "trajrl/PendulumNoVel-v1; the travel suite's trajrl/PointMassNoVel-v0, trajrl/RepeatPrevious-v0, "
        "trajrl/RepeatFirst-v0, trajrl/RunningSum-v0)",
        checkpointed=True,
    )
    kwargs: dict[str, Any] = setting(
        {}, "keyword arguments for gymnasium.make (+env.kwargs.<name>=<value>)", checkpointed=True
    )
    import_module: str | None = setting(
        None,
        "module to import first, in the learner's process and in every worker (on the command line: before the "
        "config is composed): where third-party ids register, and memory cores and samplers "
        "(trajrl.algos.memory.register_core, trajrl.factory.replay.register_sampler)",
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
        brought={"algo=rsac": True},
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
        brought={"algo=rsac": "auto"},
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
    num_workers: int = setting(1, "collector worker processes (actors with collector=ray)", range=at_least(1))
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
    capacity: int = setting(100_000, "frames the buffer holds; the oldest are overwritten first", range=at_least(1))
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
        None, "unused (debug=smoke sets it for whichever storage is chosen)", range=at_least(1)
    )


STORAGES: dict[str, type] = {
    "lazy_tensor": StorageSettings,
    "lazy_memmap": MemmapStorageSettings,
    "none": NoStorageSettings,
}


#: Hindsight Experience Replay: where a substituted goal comes from (``trajrl.replay.hindsight``).
HER_STRATEGIES = ("future", "final", "episode")


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
        "slices in each [N, T] training batch; auto: 4 with algo=rsac (its update costs about 0.44x as much as "
        "with 16 and learns as much a frame: docs/benchmarks/learning/tuning.md), 16 otherwise",
        range=at_least(1),
        auto=True,
        null=False,
    )
    slice_len: int = setting(40, "steps of each slice (T); shorter episodes come back whole, padded", range=at_least(1))
    burn_in: int = setting(
        10,
        "first steps of a slice that starts mid-episode which only warm the recurrent "
        "state (no loss); a slice that starts its episode learns from every step",
        range=at_least(0),
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
    terminal_share: float = setting(
        0.0,
        "the share of each batch's slices that end where a stored episode terminated (the episode drawn "
        "uniformly among those; the others drawn as weighting says): a policy's rare failures learnt from "
        "that often however rare they become (weighting=step, complete episodes)",
        range=FRACTION,
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
    episodes_per_batch: int = setting(8, "whole episodes per batch (algo=ppo: per minibatch)", range=at_least(1))
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


# ---------------------------------------------------------------- learn: algorithms
#: Memory cores (``algo.rnn``; ``trajrl.algos.memory``): torch's, stepped one step after another,
#: then the linear ones, whose whole sequence is one parallel pass that restarts inside it at each
#: episode start (``sampler=tape`` needs one). ``trajrl.algos.memory.register_core`` adds a linear one
#: to both lists (the choices of ``algo.rnn`` are the list itself).
LINEAR_CORES: list[str] = ["lru", "ffm"]
MEMORY_CORES: list[str] = ["lstm", "gru", *LINEAR_CORES]


@dataclass
class NetworkSettings:
    name: str = option("r2d2", checkpointed=True)
    rnn: str = setting(
        "lstm",
        "memory core: lstm, gru (stepped through a sequence) | lru (Linear Recurrent Unit), ffm (Fast and "
        "Forgetful Memory): linear, a whole sequence in one pass, restarting inside it at each episode "
        "start (what sampler=tape needs)",
        choices=MEMORY_CORES,
        checkpointed=True,
    )
    hidden_size: int = setting(64, "recurrent cells (the memory core's outputs)", range=at_least(1), checkpointed=True)
    memory_size: int = setting(
        64,
        "rnn=lru: complex state channels of each layer; rnn=ffm: length of its trace (one decay rate each)",
        range=between(1, 4096),
        checkpointed=True,
    )
    memory_context: int = setting(
        4, "rnn=ffm: frequencies each element of the trace turns at", range=between(1, 256), checkpointed=True
    )
    memory_layers: int = setting(1, "rnn=lru: blocks stacked", range=between(1, 16), checkpointed=True)
    forget_bias: float | None = setting(
        None,
        "rnn=lstm: every cell's forget-gate bias at initialisation (1: Gers et al., 2000; Jozefowicz et al., "
        "2015): a new core keeps sigmoid(b) of what it holds each step instead of about half; rnn=gru: its "
        "update gate's, to the same end; null: torch's initialisation",
        range=between(-10, 10),
        checkpointed=True,
    )
    chrono_horizon: int | None = setting(
        None,
        "rnn=lstm: Tallec & Ollivier (2018)'s chrono initialisation: each cell's forget-gate bias drawn as "
        "log U(1, T - 1) and its input gate's the opposite, T this many steps (the longest dependency to learn): "
        "a new core's cells keep their content over a spread of time scales up to T instead of about a step; "
        "null: torch's initialisation (or forget_bias's)",
        range=at_least(3),
        checkpointed=True,
    )
    chrono_spread: str = setting(
        "uniform",
        "rnn=lstm with chrono_horizon: how the time scales u are drawn: uniform in [1, T - 1] (Tallec & Ollivier's: "
        "most cells long) | log: log-uniform over it, the forget biases log u uniform in [0, log(T - 1)] (as many "
        "cells keep about a step as keep the whole horizon)",
        choices=("uniform", "log"),
        checkpointed=True,
    )
    encoder_sizes: list[int] = setting(
        [64], "MLP layers before the recurrent core (or the head)", range=at_least(1), checkpointed=True
    )
    normalize_observations: bool = setting(
        True, "standardise inputs with statistics of 2,000 random-policy steps", checkpointed=True
    )
    observation_stats: str = setting(
        "fixed",
        "fixed: standardise with the statistics measured at the start; "
        "running: they follow the observations the learner trains on (the "
        "mean over every batch, then a moving one, rate observation_rate)",
        choices=("fixed", "running"),
    )
    observation_rate: float = setting(
        1e-3, "observation_stats=running: the least weight of each batch", range=between(0, 1)
    )
    squash_observations: bool = setting(
        False,
        "symlog the standardised inputs: states a learnt policy reaches far "
        "outside a random policy's statistics stay within a few units",
    )
    gamma: float = setting(0.99, "discount", range=FRACTION)
    lr: float = setting(1e-3, "learning rate (Adam)", range=above(0))
    rnn_lr: float | None = setting(
        None,
        "learning rate of the memory core (algo.rnn), which RESeL (Luo et al., "
        "2024) trains far slower than the rest; null: lr",
        range=above(0),
        checkpointed=True,  # null or not: one group of parameters in the optimiser, or two
    )
    max_grad_norm: float = setting(10.0, "gradient norm clipping", range=above(0))
    layer_norm: bool = setting(
        False,
        "layer-normalise each encoder's output, and the recurrent features of the Q-network and the critics",
        checkpointed=True,
    )


@dataclass
class ReplayLearnerSettings(NetworkSettings):
    """What the learners that train from the replay buffer (recurrent DQN and SAC) have in common."""

    lr_end: float | None = setting(
        None,
        "decay lr linearly to this over the run's planned updates, rnn_lr in the same proportion (the "
        "temperature's rate stays); null: constant",
        range=at_least(0),
    )


@dataclass
class R2D2Settings(ReplayLearnerSettings):
    """Recurrent DQN, R2D2-style."""

    n_step: int = setting(3, "rewards summed before bootstrapping", range=at_least(1))
    initial_state: str = setting(
        "stored", "state at a slice's first step: stored (the one the policy used) | zero", choices=("stored", "zero")
    )
    refresh_states_every: int | None = setting(
        None,
        "recompute the recurrent state stored with every step with the current network every this many "
        "updates (null: never; the state stored by the acting network ages as the network learns)",
        range=at_least(1),
    )
    double_q: bool = setting(True, "the online network picks the next action, the target network scores it")
    value_rescaling: bool = setting(False, "h(x) = sign(x)(sqrt(|x|+1)-1) + 1e-3 x on targets")
    target_tau: float = setting(
        0.002,
        "share of the way the target network moves toward the online one at each sync (1: a copy)",
        range=between(0, 1, low_open=True),
    )
    target_sync_every: int = setting(
        1,
        "updates between two target syncs (1: a soft update every step; with "
        "target_tau=1, a hard copy every this many updates, as DQN's target network)",
        range=at_least(1),
    )
    eps_start: float = setting(1.0, "epsilon-greedy exploration at the start", range=FRACTION)
    eps_end: float = setting(0.05, "epsilon after eps_decay_frames", range=FRACTION)
    eps_decay_frames: int = setting(20_000, "frames over which epsilon anneals", range=at_least(0))
    eps_spread: float = setting(
        0.0,
        "each collecting environment its own epsilon (Ape-X, R2D2): environment i of the N "
        "(collector.num_workers x env.num_envs) explores with epsilon^(1 + eps_spread x i / (N - 1)), so some "
        "keep exploring while others act almost greedily (R2D2: 7, with eps_start=eps_end=0.4); "
        "0: every environment the same epsilon",
        range=at_least(0),
    )
    eval_network: str = setting(
        "online", "network that acts in evaluation: online | target (a slow average)", choices=("online", "target")
    )
    dueling: bool = setting(False, "Q = V + A - mean(A) instead of one linear head", checkpointed=True)
    advantage_learning: float = setting(
        0.0,
        "alpha of advantage learning (Bellemare et al., 2016): each target less alpha x (max_b Q'(s,b) - "
        "Q'(s,a)), which widens the gap between the best action and the others so that small errors in Q "
        "do not flip the greedy action (0: off)",
        range=between(0, 1, high_open=True),
    )


@dataclass
class RSACSettings(ReplayLearnerSettings):
    """Recurrent SAC (continuous actions; SAC-discrete for Discrete ones)."""

    name: str = option("rsac", checkpointed=True)
    hidden_size: int = setting(128, "recurrent cells (the memory core's outputs)", range=at_least(1), checkpointed=True)
    lr: float = setting(3e-4, "learning rate (Adam; Ni et al., 2022's for recurrent SAC)", range=above(0))
    initial_state: str = setting(
        "stored",
        "actor's state at a slice's first step: stored | zero (critics start at zero)",
        choices=("stored", "zero"),
    )
    refresh_states_every: int | None = setting(
        None,
        "recompute the actor's recurrent state stored with every step with the current actor every this "
        "many updates (null: never)",
        range=at_least(1),
    )
    n_step: int = setting(
        1,
        "rewards summed before the critics' target bootstraps with the soft value (the entropy of the "
        "steps between is not added)",
        range=at_least(1),
    )
    critic_core: str = setting(
        "separate",
        "the twin critics' encoder and recurrent core: separate (one each) | shared (one read by both Q "
        "heads: one sequence pass for the critics and one for their targets, where separate takes two each) "
        "| acting (shared, and it is also the actor's: trained by the critics' loss alone, the actor's head "
        "reading it without gradient; it acts and stores its state, so the critics start each slice from "
        "that state, not from zero, and the actor's own core is gone)",
        choices=("separate", "shared", "acting"),
        checkpointed=True,
    )
    tau: float = setting(
        0.02,
        "share of the way the target critics move toward the critics at each sync (1: a copy); the values "
        "approach their fixed point with a time constant of 1 / (tau (1 - gamma)) updates: 5,000 at 0.02 and "
        "gamma 0.99, 20,000 at SAC's 0.005",
        range=between(0, 1, low_open=True),
    )
    target_sync_every: int = setting(
        1,
        "updates between two target syncs (1: a soft update every step; with tau=1, "
        "a hard copy every this many updates)",
        range=at_least(1),
    )
    soft_target: bool = setting(
        True,
        "the critics' target adds the next step's entropy bonus (SAC's soft value); false: the policy's "
        "expected Q of the next step alone, the entropy kept in the actor's objective only (decoupled, as in "
        "'Dissecting Discrete SAC', 2025): values on the rewards' scale, not the temperature's",
    )
    soft_target_fade: int | None = setting(
        10000,
        "soft_target only: the level of the bonus in the critics' target (alpha x the target entropy a step) fades "
        "linearly to nothing over this many updates, the bonus alpha (H - the target entropy) after them: the "
        "values keep how the next step's entropy differs from the target, not the level that moves with the "
        "temperature (the level teaches the travel suite's 3-step recall early; its moves with the temperature "
        "slow the first-observation recall late); null: the level stays (with algo.soft_target=false: null)",
        range=at_least(1),
    )
    critic_loss: str = setting(
        "huber",
        "the critics' loss per step: huber (the squared TD error up to an error of 1 (algo.huber_delta), "
        "then linear: an outlying error, a burst of the critics' loss, moves them by a bounded step, as the "
        "recurrent DQN's loss does; what teaches the travel suite's 3-step recall) | mse (the squared TD "
        "error: terminal steps' large errors count in full) | huber_bootstrapped (Huber's where the target "
        "bootstraps, the squared error where the episode terminates within the target's steps: foreseeable "
        "ends are learnt as with mse, and so are unforeseeable ones: CartPole 2/2, the 3-step recall at chance)",
        choices=("mse", "huber", "huber_bootstrapped"),
    )
    huber_delta: float = setting(
        1.0,
        "critic_loss=huber or huber_bootstrapped: the TD error past which the loss grows linearly. The values "
        "are on the scale of the "
        "rewards (after algo.reward_scaling) times about 1 / (1 - gamma), plus the entropy bonus: on CartPole "
        "100-260, where an error of 1 mutes a terminal step's error of 150 as much as an outlier's",
        range=above(0),
    )
    dueling: bool = setting(
        False,
        "Discrete actions only: each critic's head is Q = V + A - mean(A) (Wang et al., 2016), the value "
        "common to the actions learnt apart from their differences, which are all the policy reads",
        checkpointed=True,
    )
    learner_threads: int = setting(
        1,
        "threads an update runs on: 2 runs the actor's pass, the target critics' and the second critic's "
        "backward on a second thread beside the first (two cores at once, each update the same bits as with 1; "
        "inside the default run 1.15x the learner's steps a second of one thread, the run 0.88x the time; not the "
        "default: both confirmations with it ended fewer seeds at 475, 6/10 and 6/10: docs/performance.md)",
        range=between(1, 2),
    )
    twin_value: str = setting(
        "min",
        "how the twin critics' values combine in the targets and the actor's loss: min (clipped double Q, "
        "Fujimoto et al., 2018) | mean (Zhou et al., 2022's double average: min underestimates, and more so "
        "over a categorical policy's every action)",
        choices=("min", "mean"),
    )
    q_clip: float | None = setting(
        None,
        "Zhou et al. (2022)'s Q-clip: each step's critic loss is the larger of its own and that of the target "
        "critic's value moved at most q_clip towards the critic's (in the rewards' unit after reward_scaling), "
        "so a critic gains nothing from moving further than q_clip from its target an update; null: off",
        range=above(0),
    )
    entropy_penalty: float = setting(
        0.0,
        "Discrete actions only: beta of Zhou et al. (2022)'s penalty beta * (H_acting - H)^2 on the actor's loss, "
        "each step's entropy held near the one the policy acted with there (stored with each step): the "
        "policy's entropy cannot swing from one update to the next; 0: off",
        range=at_least(0),
        checkpointed=True,  # 0 or not: the stored steps (the checkpoint's buffer) hold policy_entropy or do not
    )
    init_alpha: float = setting(1.0, "initial entropy temperature (learnt)", range=above(0))
    alpha_lr: float | None = setting(
        None,
        "learning rate of the temperature's log (Adam: it moves about this much an update, so reaching a "
        "temperature k times the initial one takes about ln(k) / alpha_lr updates); null: lr",
        range=above(0),
    )
    reward_scaling: str = setting(
        "rms",
        "rms: the learner divides rewards by their running root mean square, so that a task's rewards times "
        "any constant train as the task's own and the temperature meets rewards of one scale whatever the "
        "task pays (the logged returns stay in the task's units; rewards all 1, as CartPole's, are unchanged); "
        "none: the learner takes rewards as the task gives them",
        choices=("none", "rms"),
    )
    target_entropy: float | None = setting(
        None,
        "entropy the temperature aims at (null: -action size for "
        "continuous actions, target_entropy_fraction for Discrete ones)",
        range=ANY_NUMBER,
    )
    target_entropy_fraction: float | None = setting(
        None,
        "Discrete actions only: the target entropy as a fraction of log |A|, the uniform policy's (null: 0.7)",
        range=between(0, 1, low_open=True),
    )


@dataclass
class PPOSettings(NetworkSettings):
    """Episodic PPO (optionally recurrent)."""

    name: str = option("ppo", checkpointed=True)
    recurrent: bool = setting(False, "LSTM/GRU actor and critic over whole episodes", checkpointed=True)
    encoder_sizes: list[int] = setting(
        [64, 64], "MLP layers (tanh) before the recurrent core or the head", range=at_least(1), checkpointed=True
    )
    max_grad_norm: float = setting(0.5, "gradient norm clipping", range=above(0))
    gae_lambda: float = setting(0.95, "GAE lambda", range=FRACTION)
    clip_epsilon: float = setting(
        0.2, "ratio clipping of the surrogate objective", range=between(0, 1, low_open=True, high_open=True)
    )
    clip_epsilon_end: float | None = setting(
        None,
        "clip_epsilon decays linearly to this over total_frames, so the policy moves less and less (RL Baselines3 "
        "Zoo's CartPole recipes: 0); null: constant",
        range=between(0, 1, high_open=True),
    )
    epochs: int = setting(10, "passes over each batch of episodes", range=at_least(1))
    target_kl: float | None = setting(
        None,
        "stop a batch's passes at the first minibatch whose approximate KL from the acting policy exceeds "
        "1.5x this, before its step (Stable-Baselines3's target_kl: no batch moves the policy far); null: every pass",
        range=above(0),
    )
    anneal_lr: bool = setting(True, "lr decays linearly to 0 over total_frames")
    value_coef: float = setting(0.5, "weight of the value loss", range=at_least(0))
    entropy_coef: float = setting(0.0, "weight of the entropy bonus", range=at_least(0))
    normalize_advantage: bool = setting(True, "standardise advantages over the valid steps of each minibatch")
    normalize_rewards: bool = setting(
        False,
        "divide rewards by the running std of the discounted return "
        "(value targets at unit scale whatever the task's reward scale)",
    )
    on_policy: str = setting(
        "mixed",
        "strict: learn only from episodes every step of which the current weights "
        "took (an episode a weight push cut is dropped: batch/episodes_dropped_stale); "
        "mixed: every complete episode, some begun before the last push",
        choices=("mixed", "strict"),
    )


ALGOS: dict[str, type] = {"r2d2": R2D2Settings, "rsac": RSACSettings, "ppo": PPOSettings}
#: Algorithms that learn on-policy from each batch of complete episodes (the episodic loop);
#: the others learn off-policy from a replay buffer.
ON_POLICY_ALGOS = ("ppo",)


# ---------------------------------------------------------------- report
@dataclass
class LoggerSettings:
    backends: list[str] = setting(
        ["csv"],
        "csv (metrics.csv, always written), tensorboard, wandb; several at once",
        choices=("csv", "tensorboard", "wandb"),
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
        brought={"algo=rsac": 1_000},
    )
    updates_per_frame: float = setting(
        0.5,
        "off-policy: gradient updates per stored frame (update-to-data ratio)",
        range=above(0),
        brought={"algo=rsac": 1.0},
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
        brought={"algo=rsac": 2_000},
    )
    eval_episodes: int = setting(10, "episodes averaged in each evaluation; 0: no evaluation", range=at_least(0))
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
        None, "stop after this many seconds as if total_frames were reached (null: no limit)", range=above(0)
    )
    stop_at_return: float | None = setting(
        None,
        "end the run at the first evaluation whose mean return is at least this (null: train to total_frames); "
        "it is the run's last evaluation, best.pt and latest.pt are saved as at any end",
        range=ANY_NUMBER,
    )


#: Settings only the off-policy loop reads (algo=r2d2, rsac).
OFF_POLICY_ONLY = ("loop.warmup_frames", "loop.updates_per_frame", "loop.max_update_lag", "loop.weight_sync_every")


@dataclass
class RunSettings:
    """The top level; each group (env, collector, ...) is one of its options' dataclasses."""

    seed: int = setting(0, "seed of torch, the environments and evaluation", range=at_least(0))
    device: str = setting(
        "cpu",
        "where the learner trains: cpu, cuda (refused without a CUDA device) or auto "
        "(cuda where there is one); collectors and evaluation act on CPU copies",
        choices=("cpu", "cuda", "auto"),
    )
    total_frames: int = setting(
        60_000,
        "frames stored (PPO: learnt from) before the run stops; the step axis (algo=rsac's: CartPole without "
        "velocities reaches 475 in about 9,000: docs/results.md)",
        range=at_least(1),
        brought={"algo=rsac": 16_000},
    )
    trajs_per_batch: int | None = setting(
        4,
        "complete episodes a collector gathers per write (or PPO batch); null: fixed-frame batches (algo=rsac, "
        "collector=async_batched: each episode written as soon as it ends; algo=ppo: a minibatch of "
        "sampler.episodes_per_batch at least)",
        range=at_least(1),
        brought={"collector=async_batched": 1, "algo=rsac": 1, "algo=ppo": 8},
    )
    traj_format: str = setting(
        "cat",
        "cat: episodes one after the other; padded: [N, T] with ('collector', 'mask'), stored as valid steps "
        "(algo=ppo's: episodes reach its learner as [N, T] and a mask)",
        choices=("cat", "padded"),
        brought={"algo=ppo": "padded"},
    )
    deterministic: bool = setting(
        False,
        "the same seed on the same machine repeats its run (metrics, checkpoints): collection and learning take "
        "turns in the learner's thread, process collectors become collector=sync over as many environments "
        "(async_batched, ray: refused); costs the overlap, about 0.9x the default's frames/s (docs/configuration.md)",
    )
    audit: bool = setting(False, "check the trajectory invariants while training (audit/... metrics)")
    audit_every: int = setting(
        100, "audit every this many sampled batches, and the whole buffer at the end", range=at_least(1)
    )
    resume: str | None = setting(None, "continue a stopped run from its directory's last checkpoint")
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
    """``{dotted key: value}`` of every setting whose declaration says picking ``group=option`` brings a
    value (``setting(..., brought=...)``): the top level's, the loop's and each group's.
    ``trajrl.configuration.compose`` puts them in Hydra's ConfigStore (``trajrl_brought_<group>_<option>``),
    where the option's file includes them; ``--help`` names the option as their source."""
    spec = f"{group}={option}"
    return {key: brought[spec] for key, brought in _brought_values() if spec in brought}


def bringing_options() -> list[tuple[str, str]]:
    """``(group, option)`` of every option some setting declares a ``brought`` value for."""
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
