"""Replay buffer factory: the storage and the sampler of ``trajrl.configuration.settings.STORAGES`` and
``SAMPLERS`` in a TorchRL buffer, and the ``SequenceSampler`` that draws [N, T] batches from it."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from torchrl.data import LazyMemmapStorage, LazyTensorStorage, TensorDictReplayBuffer
from torchrl.data.replay_buffers.samplers import RandomSampler, Sampler, SliceSampler, SliceSamplerWithoutReplacement
from torchrl.envs.transforms import ExcludeTransform

from trajrl.base.keys import TRAJ_KEY
from trajrl.collect.faults import DropFaultedEpisodes
from trajrl.configuration.settings import SAMPLERS, SamplerOption, section_settings
from trajrl.replay.batches import SequenceSampler
from trajrl.replay.episodes import EpisodeSampler
from trajrl.replay.hindsight import HindsightGoals
from trajrl.replay.incoming import ActionRange, WholeEpisodes
from trajrl.replay.lanes import LaneSliceSampler, LaneWriter, PrioritizedLaneSliceSampler
from trajrl.replay.slices import StepSliceSampler
from trajrl.replay.states import SparseStates
from trajrl.replay.tapes import TapeSampler
from trajrl.replay.writer import EpisodeWriter, counters_without_locks

#: What every step carries that the buffer does not store, since what it stores
#: gives it: the done flags before the step (those after the step before it), and
#: after the step ``is_init``, ``step_count`` and ``episode_reward`` (the step's own
#: plus one, and plus its reward).
DERIVED = ["done", "terminated", "truncated", ("next", "is_init"), ("next", "step_count"), ("next", "episode_reward")]


def _memmap(s, run_dir: Path | None, reuse_files: bool) -> LazyMemmapStorage:
    scratch = s.scratch_dir or (str(Path(run_dir) / "buffer") if run_dir else None)
    return LazyMemmapStorage(s.capacity, scratch_dir=scratch, ndim=int(s.ndim), existsok=reuse_files)


#: How each storage of the registry is built (``none``: no buffer at all, see ``trajrl.factory.build``).
STORAGE_BUILDERS: dict[str, Callable] = {
    "lazy_tensor": lambda s, run_dir, reuse_files: LazyTensorStorage(s.capacity, ndim=int(s.ndim)),
    "lazy_memmap": _memmap,
}


def build_storage(storage_cfg, run_dir: Path | None, reuse_files: bool = False):
    """``reuse_files``: a memory-mapped storage may take over the files in its
    directory (a resumed run's own buffer); otherwise existing files are an error."""
    settings = section_settings("storage", storage_cfg)
    return STORAGE_BUILDERS[settings.kind](settings, run_dir, reuse_files)


def _slices(sampler: Sampler, s) -> tuple[Sampler, int]:
    return sampler, s.slices_per_batch * s.slice_len  # the buffer's batch size is in stored steps


def _uniform_slices(s, capacity: int) -> tuple[Sampler, int]:
    if s.weighting == "step":  # trajrl's: each stored step equally likely to start a slice
        return _slices(StepSliceSampler(capacity, s.slice_len), s)
    # TorchRL's: each stored episode equally likely. Slices never cross an episode (boundaries
    # come from the trajectory ids); episodes shorter than slice_len come back whole.
    return _slices(SliceSampler(slice_len=s.slice_len, traj_key=TRAJ_KEY, strict_length=False), s)


#: How each sampler of the registry is built: ``(TorchRL sampler, buffer batch size)``.
SAMPLER_BUILDERS: dict[str, Callable] = {
    "slice": _uniform_slices,
    "slice_without_replacement": lambda s, capacity: _slices(
        SliceSamplerWithoutReplacement(slice_len=s.slice_len, traj_key=TRAJ_KEY, strict_length=False), s
    ),
    "prioritized_slice": lambda s, capacity: _slices(StepSliceSampler(capacity, s.slice_len, s.alpha, s.beta), s),
    "episode": lambda s, capacity: (EpisodeSampler(), s.episodes_per_batch),
    "random": lambda s, capacity: (RandomSampler(), s.transitions_per_batch),
    "tape": lambda s, capacity: (TapeSampler(capacity), s.tape_frames),
}


def register_sampler(settings: type[SamplerOption], build: Callable[[Any, int], tuple[Sampler, int]]) -> None:
    """Add the sampler ``sampler=<kind>`` from a module of its own (``env.import_module=<module>`` on the
    command line imports it before anything is composed). ``settings``: the dataclass of its settings,
    ``kind: str = option("<kind>")`` first, each other field a ``setting(...)`` (``trajrl.configuration.settings``), and
    the class attribute ``batches``, what its samples are (``trajrl.configuration.settings.BATCHES``; ``slices`` need
    ``slice_len``, ``burn_in`` and ``slices_per_batch`` among the settings; settings with ``eta`` are
    prioritised: the learner's TD errors go back to the sampler's ``update_priority``). ``build(settings,
    capacity)``: the TorchRL sampler and the buffer's batch size (stored steps, or episodes, a sample).
    Registering the same pair again does nothing; another under a taken kind is an error."""
    from hydra.core.config_store import ConfigStore

    from trajrl.configuration.settings import BATCHES

    kind = settings.kind
    if SAMPLERS.get(kind) is settings and SAMPLER_BUILDERS.get(kind) is build:
        return
    if kind in SAMPLERS:
        raise ValueError(f"sampler={kind} is registered already ({SAMPLERS[kind].__name__})")
    if getattr(settings, "batches", None) not in BATCHES:
        raise ValueError(f"{settings.__name__}.batches must be one of {', '.join(BATCHES)}")
    SAMPLERS[kind], SAMPLER_BUILDERS[kind] = settings, build
    ConfigStore.instance().store(group="sampler", name=kind, node=settings)


def build_sampler(sampler_cfg, capacity: int) -> tuple[Sampler, int]:
    """The TorchRL sampler and the buffer batch size (in stored steps or episodes)."""
    settings = section_settings("sampler", sampler_cfg)
    return SAMPLER_BUILDERS[settings.kind](settings, capacity)


def build_buffer(
    storage_cfg,
    sampler_cfg,
    shared: bool,
    run_dir: Path | None = None,
    reuse_files: bool = False,
    not_stored: list = (),
    journal_dir: str | None = None,
    lanes: tuple[int, int] | None = None,
    hindsight: HindsightGoals | None = None,
    state_shapes: dict[str, tuple[int, ...]] | None = None,
    actions: ActionRange | None = None,
    refusals_to: str | None = None,
) -> SequenceSampler:
    """A TensorDictReplayBuffer (shared with worker processes when they write into it).

    Flat complete episodes are stored as written; padded ``[N, T]`` batches with
    ``("collector", "mask")`` are stored as their valid steps; whatever writes, episodes are
    checked complete and numbered afresh (``trajrl.replay.incoming.WholeEpisodes``).
    ``lanes=(workers, environments per worker)``: fixed-frame batches, each
    environment's steps in a lane of their own (``trajrl.replay.lanes``).
    ``not_stored``: keys the policy writes that learning never reads; they, and what
    ``DERIVED`` lists, are dropped on write. ``journal_dir``: where each write is
    journalled (``trajrl.replay.writer``; for worker processes that write).
    ``hindsight``: the sampler draws substituted goals, the batches are relabelled with
    them (``trajrl.replay.hindsight``; slice and episode samplers of complete episodes).
    ``state_shapes``: the recurrent state's keys and shapes, kept apart every
    ``sampler.state_every`` steps when that is set (``trajrl.replay.states.SparseStates``).
    ``actions``: the task's, refused outside (with any value that is not finite) on write;
    ``refusals_to``: the fault log a worker's refused write is reported in (``WholeEpisodes``).
    """
    storage = build_storage(storage_cfg, run_dir, reuse_files)
    if lanes is not None:
        return _lane_buffer(storage, sampler_cfg, shared, lanes, not_stored, journal_dir)
    sampler, batch_size = build_sampler(sampler_cfg, int(storage_cfg.capacity))
    every = sampler_cfg.get("state_every")
    states = (
        SparseStates(state_shapes, int(storage_cfg.capacity), int(every), shared=shared)
        if every is not None and state_shapes
        else None
    )
    # EpisodeWriter: TorchRL's round-robin writer (its TensorDict writer also stores each step's
    # position, "index") giving each episode a fresh id; journalled where worker processes write.
    buffer = TensorDictReplayBuffer(
        storage=storage,
        sampler=sampler,
        writer=EpisodeWriter(journal_dir, states),
        batch_size=batch_size,
        shared=shared,
    )
    if shared:
        counters_without_locks(buffer)  # a worker killed while moving one cannot block the learner
    if states is not None:
        sampler.states = states  # config.py allows state_every only with trajrl's step slice samplers
    if isinstance(sampler, StepSliceSampler):
        sampler.follow(buffer.writer)  # the writer counts every write, in whichever process
    if hindsight is not None:
        sampler.hindsight = hindsight  # config.py allows it only with samplers that keep an episode index
    # Transforms run on writes in the reverse order of these lines: what is never stored is dropped,
    # then every episode a fault ended, then the rest is checked and stored as complete episodes.
    buffer.append_transform(
        WholeEpisodes(actions, refusals_to)
    )  # rb.extend(flat, or padded [N, T] + mask): complete episodes or refused
    buffer.append_transform(DropFaultedEpisodes())  # no episode a fault ended is stored
    buffer.append_transform(ExcludeTransform(*DERIVED, *not_stored), invert=True)  # run by rb.extend
    batches = SAMPLERS[sampler_cfg.kind].batches  # what its samples are, laid out as the learner's batches
    return SequenceSampler(
        buffer,
        transitions=batches == "transitions",
        horizon={"transitions": 1, "slices": sampler_cfg.get("slice_len")}.get(batches),
        priority_eta=sampler_cfg.get("eta"),
        hindsight=hindsight,
        tape=batches == "tape",
    )


def _lane_buffer(
    storage, sampler_cfg, shared: bool, lanes: tuple[int, int], not_stored, journal_dir
) -> SequenceSampler:
    """Fixed-frame lanes: slices (uniformly or by priority; ``sampler=random``: single transitions)
    inside one lane and episode."""
    transitions, prioritized = sampler_cfg.kind == "random", sampler_cfg.kind == "prioritized_slice"
    slice_len = 1 if transitions else int(sampler_cfg.slice_len)
    sampler = (
        PrioritizedLaneSliceSampler(slice_len, float(sampler_cfg.alpha), float(sampler_cfg.beta))
        if prioritized
        else LaneSliceSampler(slice_len)
    )
    batch_size = (
        int(sampler_cfg.transitions_per_batch) if transitions else int(sampler_cfg.slices_per_batch) * slice_len
    )
    # dim_extend=0: a worker's [B, T] batch reaches the writer as it is (TorchRL would put time first)
    buffer = TensorDictReplayBuffer(
        storage=storage,
        sampler=sampler,
        writer=LaneWriter(*lanes, journal_dir),
        batch_size=batch_size,
        shared=shared,
        dim_extend=0,
    )
    if shared:
        counters_without_locks(buffer)
    sampler.follow(buffer.writer)
    buffer.append_transform(ExcludeTransform(*DERIVED, *not_stored), invert=True)
    return SequenceSampler(
        buffer, transitions=transitions, horizon=slice_len, priority_eta=float(sampler_cfg.eta) if prioritized else None
    )
