"""Collector factory: the five TorchRL collectors, each writing complete episodes into the buffer."""
from __future__ import annotations

import logging
import threading
from typing import Callable

import torch
from tensordict import TensorDictBase
from torchrl.collectors import (
    AsyncBatchedCollector,
    AsyncCollector,
    BaseCollector,
    MultiAsyncCollector,
    MultiSyncCollector,
)
from torchrl.data import ReplayBuffer
from torchrl.weight_update import SharedMemWeightSyncScheme

from trajrl.data.episodes import TRAJ_KEY
from trajrl.factory.assembly import EpisodeCollector

#: Collectors whose workers are separate processes writing into a shared buffer.
PROCESS_COLLECTORS = ("async", "multi_sync", "multi_async")


class StampTrajectoryIds:
    """Post-processing for AsyncBatchedCollector, which writes one completed episode
    at a time but does not number them: gives each a fresh ``("collector", "traj_ids")``."""

    def __init__(self) -> None:
        self._next = 0
        self._lock = threading.Lock()

    def __call__(self, episode: TensorDictBase) -> TensorDictBase:
        with self._lock:
            traj_id, self._next = self._next, self._next + 1
        episode.set(TRAJ_KEY, torch.full(episode.shape, traj_id, dtype=torch.int64))
        return episode


def collector_slots(kind: str, num_workers: int, num_envs: int) -> int:
    """How many environment factories the collector calls (one ``WorkerCounters`` slot each)."""
    return num_workers * num_envs if kind == "async_batched" else num_workers


def build_collector(
    kind: str,
    env_fn: Callable,
    policy,
    buffer: ReplayBuffer | None,
    *,
    num_workers: int,
    frames_per_batch: int,
    trajs_per_batch: int | None,
    seed: int,
    traj_format: str = "cat",
    env_backend: str = "threading",
    ray_address: str | None = None,
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
    traj = dict(trajs_per_batch=trajs_per_batch, traj_format=traj_format) if trajs_per_batch else {}
    step = num_envs * (num_workers if kind == "multi_sync" else 1)  # frames of one step of every vector
    frames_per_batch = -(-frames_per_batch // step) * step
    common = dict(frames_per_batch=frames_per_batch, total_frames=-1, replay_buffer=buffer)
    slots = [{"slot": index} for index in range(collector_slots(kind, num_workers, num_envs))]
    if kind == "sync":
        collector = EpisodeCollector(env_fn, policy, create_env_kwargs=slots[0], **common, **traj)
    elif kind in PROCESS_COLLECTORS:
        # Weights go through shared memory; not waiting for the workers' acks means a
        # dead worker cannot hang the learner (TorchRL's default waits with no timeout).
        # Each worker runs an EpisodeCollector (faster episode assembly).
        workers = dict(num_threads=1, weight_sync_schemes={"policy": SharedMemWeightSyncScheme(sync=False)},
                       collector_class=EpisodeCollector)
        if kind == "async":
            collector = AsyncCollector(env_fn, policy, create_env_kwargs=slots[0], **workers, **common, **traj)
        else:
            cls = MultiSyncCollector if kind == "multi_sync" else MultiAsyncCollector
            # One torch thread per worker: on a 2-core machine more threads only contend.
            collector = cls([env_fn] * num_workers, policy, create_env_kwargs=slots, **workers, **common, **traj)
    elif kind == "ray":
        from trajrl.factory.ray_collector import RayEpisodes

        collector = RayEpisodes(env_fn, policy, buffer, num_workers=num_workers, frames_per_batch=frames_per_batch,
                                trajs_per_batch=trajs_per_batch, address=ray_address, slots=ray_address is None)
    elif kind == "async_batched":
        slots = [{**slot, "num_envs": 1} for slot in slots]
        collector = AsyncBatchedCollector(
            [env_fn] * len(slots), policy=policy, yield_completed_trajectories=True,
            env_backend=env_backend, postproc=StampTrajectoryIds(), create_env_kwargs=slots, **common,
        )
    else:  # validated before; kept for direct callers
        raise ValueError(f"collector kind {kind!r}")
    collector.set_seed(seed)
    return collector


def close_collector(collector: BaseCollector) -> None:
    """Shut a collector down, its weight-sync schemes included.

    TorchRL leaves multi-process collectors' ``SharedMemWeightSyncScheme`` to its
    ``__del__``, which puts to a multiprocessing queue; run at interpreter exit,
    that put can wait forever on its feeder thread (a process that never exits).
    """
    try:
        collector.shutdown()
    except Exception as err:  # already shut down, or a worker died: nothing left to release
        logging.getLogger("trajrl").debug("collector shutdown: %s", err)
    for scheme in (getattr(collector, "_weight_sync_schemes", None) or {}).values():
        scheme.shutdown()


class CollectorFailed(RuntimeError):
    """The collector's background work died, or wrote nothing for too long."""


class CollectorWatch:
    """Notices that a started collector failed, and why.

    TorchRL's single-process collector runs in a thread whose exception is only
    printed (``async_shutdown`` does not re-raise it); this catches it through
    ``threading.excepthook`` while the watch is open. ``AsyncBatchedCollector``
    keeps its writer's error; a dead worker process shows in its exit code.
    """

    def __init__(self, collector: BaseCollector):
        self.collector = collector
        self.thread_error: BaseException | None = None
        self._previous_hook = threading.excepthook
        threading.excepthook = self._hook

    def _hook(self, args) -> None:
        if args.thread is getattr(self.collector, "_thread", None):
            self.thread_error = args.exc_value
        self._previous_hook(args)

    def error(self) -> BaseException | None:
        if self.thread_error is not None:
            return self.thread_error
        replay_error = getattr(self.collector, "_replay_error", None)
        if replay_error is not None:
            return replay_error
        thread = getattr(self.collector, "_thread", None)
        if thread is not None and not thread.is_alive() and not getattr(self.collector, "_stop", False):
            return CollectorFailed("the collector's background thread stopped on its own")
        for index, proc in enumerate(getattr(self.collector, "procs", None) or []):
            try:
                alive = proc.is_alive()
            except ValueError:  # closed: TorchRL found a failed worker and shut them all down
                return CollectorFailed("collector workers shut down by TorchRL after one of them failed")
            if not alive:
                return CollectorFailed(f"collector worker {index} died (exit code {proc.exitcode})")
        return None

    def close(self) -> None:
        if threading.excepthook == self._hook:
            threading.excepthook = self._previous_hook
