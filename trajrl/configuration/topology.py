"""How a collector lays out its work: which collectors start processes, how many frames a
rollout steps, and the lanes fixed-frame batches are written in (``storage.ndim``).

Arithmetic on the collector's settings only, shared by the checks (``trajrl.configuration.checks``), the
CLI and the factory; nothing here imports torch.
"""

from __future__ import annotations

from trajrl.configuration.settings import PROCESS_COLLECTORS


def starts_processes(collector: str, env_backend: str | None = None) -> bool:
    """Whether ``collector`` runs in worker processes of its own: its workers (``PROCESS_COLLECTORS``)
    or, for ``async_batched``, its environments (``collector.env_backend=multiprocessing``)."""
    return collector in PROCESS_COLLECTORS or (collector == "async_batched" and env_backend == "multiprocessing")


def rollout_frames(kind: str, num_workers: int, num_envs: int, frames_per_batch: int) -> int:
    """``frames_per_batch`` rounded up to whole steps of every vector a rollout steps at once."""
    step = num_envs * (num_workers if kind == "multi_sync" else 1)
    return -(-frames_per_batch // step) * step


def fixed_frame_lanes(kind: str, num_workers: int, num_envs: int, frames_per_batch: int) -> tuple[int, int, int]:
    """``(workers, environments per worker, steps per write)`` of fixed-frame batches:
    each worker writes ``[num_envs, T]`` (``[T]`` for one environment); a multi_sync
    rollout is shared among its workers. ``async_batched`` steps ``num_workers x
    num_envs`` single environments, each its own writer of ``T`` steps on average (a
    batch holds whichever steps came first)."""
    if kind == "async_batched":
        singles = num_workers * num_envs
        return singles, 1, max(1, frames_per_batch // singles)
    workers = 1 if kind in ("sync", "async") else num_workers
    frames = rollout_frames(kind, num_workers, num_envs, frames_per_batch)
    per_worker = frames // num_workers if kind == "multi_sync" else frames
    return workers, num_envs, per_worker // num_envs


def lane_ndim(workers: int, envs: int) -> int:
    """``storage.ndim`` of fixed-frame lanes: time, then the workers (if more than one),
    then each worker's vector of environments (if more than one)."""
    return 1 + (workers > 1) + (envs > 1)
