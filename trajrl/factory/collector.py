"""Collector factory: each collector kind of ``trajrl.configuration.settings.COLLECTORS`` as a TorchRL
collector that, once ``start()``-ed, writes complete episodes into the buffer."""

from __future__ import annotations

from collections.abc import Callable

from torchrl.collectors import (
    AsyncBatchedCollector,
    AsyncCollector,
    BaseCollector,
    MultiAsyncCollector,
    MultiSyncCollector,
)
from torchrl.data import ReplayBuffer
from torchrl.weight_update import SharedMemWeightSyncScheme

from trajrl.collect.assembly import EpisodeCollector, StampTrajectoryIds
from trajrl.configuration.settings import CollectorSettings
from trajrl.configuration.topology import rollout_frames
from trajrl.replay.incoming import storage_layout_write


def collector_slots(kind: str, num_workers: int, num_envs: int) -> int:
    """How many environment factories the collector calls (one ``WorkerCounters`` slot each)."""
    return num_workers * num_envs if kind == "async_batched" else num_workers


def _workers() -> dict:
    """Worker processes: weights through shared memory, without waiting for the workers'
    acks (TorchRL's default waits with no timeout: a dead worker would hang the learner);
    one torch thread each (on a 2-core machine more only contend); each runs an
    EpisodeCollector (faster episode assembly)."""
    return dict(
        num_threads=1,
        weight_sync_schemes={"policy": SharedMemWeightSyncScheme(sync=False)},
        collector_class=EpisodeCollector,
    )


def _sync(env_fn, policy, c: CollectorSettings, slots, common, traj) -> BaseCollector:
    return EpisodeCollector(env_fn, policy, create_env_kwargs=slots[0], **common, **traj)


def _async(env_fn, policy, c: CollectorSettings, slots, common, traj) -> BaseCollector:
    return AsyncCollector(env_fn, policy, create_env_kwargs=slots[0], **_workers(), **common, **traj)


def _multi(cls: type) -> Callable:
    def build(env_fn, policy, c: CollectorSettings, slots, common, traj) -> BaseCollector:
        return cls([env_fn] * c.num_workers, policy, create_env_kwargs=slots, **_workers(), **common, **traj)

    return build


def _async_batched(env_fn, policy, c: CollectorSettings, slots, common, traj) -> BaseCollector:
    slots = [{**slot, "num_envs": 1} for slot in slots]
    episodes = bool(traj)  # else fixed frames: steps as they come, each stamped with its environment's slot
    return AsyncBatchedCollector(
        [env_fn] * len(slots),
        policy=policy,
        yield_completed_trajectories=episodes,
        env_backend=c.env_backend,
        postproc=StampTrajectoryIds() if episodes else None,
        create_env_kwargs=slots,
        **common,
    )


def _ray(env_fn, policy, c: CollectorSettings, slots, common, traj) -> BaseCollector:
    from trajrl.collect.ray_actors import RayEpisodes

    return RayEpisodes(
        env_fn,
        policy,
        common["replay_buffer"],
        num_workers=c.num_workers,
        frames_per_batch=common["frames_per_batch"],
        trajs_per_batch=traj["trajs_per_batch"],
        address=c.address,
    )


#: How each collector kind of the registry is built.
BUILDERS: dict[str, Callable] = {
    "sync": _sync,
    "async": _async,
    "multi_sync": _multi(MultiSyncCollector),
    "multi_async": _multi(MultiAsyncCollector),
    "async_batched": _async_batched,
    "ray": _ray,
}


def build_collector(
    settings: CollectorSettings,
    env_fn: Callable,
    policy,
    buffer: ReplayBuffer | None,
    *,
    trajs_per_batch: int | None,
    seed: int,
    traj_format: str = "cat",
    num_envs: int = 1,
) -> BaseCollector:
    """A collector that, once ``start()``-ed, writes into ``buffer`` until shut down;
    without a buffer, iterating it yields the batches.

    With ``trajs_per_batch`` only complete (done-terminated) episodes leave it,
    ``traj_format="cat"`` flat one after the other, ``"padded"`` as ``[N, T]`` with
    ``("collector", "mask")`` (the buffer stores their valid steps, each episode
    contiguous). ``total_frames`` is left open (-1): the training loop decides
    when to stop.

    ``env_fn`` makes ``num_envs`` environments at once (a vector, batch
    ``[num_envs]``), each worker one; ``frames_per_batch`` is rounded up to
    whole steps of the vector. ``async_batched`` batches single environments
    itself: it gets ``num_workers * num_envs`` of them.
    """
    kind, workers = settings.kind, settings.num_workers
    traj = dict(trajs_per_batch=trajs_per_batch, traj_format=traj_format) if trajs_per_batch else {}
    frames_per_batch = rollout_frames(kind, workers, num_envs, settings.frames_per_batch)
    common = dict(frames_per_batch=frames_per_batch, total_frames=-1, replay_buffer=buffer)
    slots = [{"slot": index} for index in range(collector_slots(kind, workers, num_envs))]
    if kind == "ray":
        traj = {"trajs_per_batch": trajs_per_batch}
    with storage_layout_write(buffer):
        collector = BUILDERS[kind](env_fn, policy, settings, slots, common, traj)
    collector.set_seed(seed)
    if kind == "sync":  # its first episode, begun as it was made, from the seeded environment instead
        collector.reset()
    return collector
