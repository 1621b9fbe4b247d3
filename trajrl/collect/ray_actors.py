"""``collector=ray``: TorchRL's ``RayCollector`` (one remote ``Collector`` actor per
worker, on a local Ray instance started for the run or on an existing cluster) with
the complete episodes it yields written into the learner's replay buffer.

TorchRL's own path for remote actors writing into a buffer needs a Ray-hosted
buffer (``service_backend="ray"``), which every statistic, sampler and audit of the
loop would then reach through remote calls. Here the actors send their batches of
complete episodes (padded ``[N, T]`` + mask) through Ray's object store, and a
thread of the learner's process writes them as they arrive: the buffer stays a
local TorchRL buffer, and ``WholeEpisodes`` gives the episodes fresh ids (each actor
numbers its own from 0). Fixed-frame batches (``trajs_per_batch=null``) go the same
way, each step stamped with its actor's slot, into that actor's storage lanes. To the
loop it is a collector like the others: ``start()``,
``pause()``, ``update_policy_weights_()``, ``async_shutdown()``.
"""

from __future__ import annotations

import contextlib
import os
import socket
import threading
from collections.abc import Callable, Iterator

from torchrl.data import ReplayBuffer

from trajrl.base.errors import CollectorFailed
from trajrl.collect.assembly import EpisodeCollector

FOREVER = 2**62  # RayCollector stops at total_frames; the loop decides when to stop


def check_reachable(address: str, timeout_s: float = 5.0) -> None:
    """Fail with one line if nothing answers at ``collector.address`` (``ray://host:port``
    or ``host:port``; ``auto`` is Ray's to find: it says itself when it finds nothing)."""
    if address == "auto":
        return
    host, _, port = address.split("://", 1)[-1].rpartition(":")  # its form is checked with the config
    try:
        socket.create_connection((host, int(port)), timeout=timeout_s).close()
    except OSError as err:
        raise CollectorFailed(
            f"collector.address={address}: nothing answers at {host}:{port} within "
            f"{timeout_s:g} s ({err.strerror or err}); start the cluster there (ray start "
            "--head), or set collector.address=null for a Ray instance of the run's own"
        ) from None


class RayEpisodes:
    """Remote collector actors, whose batches (complete episodes, or fixed frames with
    ``trajs_per_batch=None``) a thread writes into ``buffer``."""

    def __init__(
        self,
        env_fn: Callable,
        policy,
        buffer: ReplayBuffer,
        *,
        num_workers: int,
        frames_per_batch: int,
        trajs_per_batch: int | None,
        address: str | None,
    ):
        if address is not None:
            check_reachable(address)  # before Ray is started: an address nobody answers at ends the run now
        import ray
        from torchrl.collectors.distributed import RayCollector

        self.buffer = buffer
        self.started_ray = address is None and not ray.is_initialized()
        init = (
            {"address": address}
            if address
            else {"num_cpus": max(os.cpu_count() or 1, num_workers), "include_dashboard": False, "log_to_driver": False}
        )
        episodes = {"traj_format": "padded"} if trajs_per_batch else {}  # else fixed frames, stamped with the slot
        per_worker = [{**episodes, "create_env_kwargs": {"slot": i}} for i in range(num_workers)]
        self.collector = RayCollector(
            [env_fn] * num_workers,
            policy,
            collector_class=EpisodeCollector,
            num_collectors=num_workers,
            collector_kwargs=per_worker,
            frames_per_batch=frames_per_batch,
            total_frames=FOREVER,
            trajs_per_batch=trajs_per_batch,
            sync=False,
            ray_init_config=init,
        )
        self.policy = policy
        self._thread: threading.Thread | None = None
        self._stop = False
        self._writing = threading.Lock()  # held while pausing: the thread writes nothing meanwhile
        self._replay_error: BaseException | None = None  # read by CollectorWatch

    def start(self) -> None:
        self.collector.update_policy_weights_(self.policy)  # the actors act with the learner's weights from the start
        self._stop = False
        self._thread = threading.Thread(target=self._write, name="ray-episodes", daemon=True)
        self._thread.start()

    def _write(self) -> None:
        try:
            for batch in self.collector:
                if self._stop:
                    break
                with self._writing:
                    self.buffer.extend(batch)
        except BaseException as err:  # an actor or its environment failed: the loop reports it
            if not self._stop:
                self._replay_error = err

    @contextlib.contextmanager
    def pause(self) -> Iterator[None]:
        """Nothing is written meanwhile (the actors finish the batch under way, then wait)."""
        with self._writing:
            yield

    def update_policy_weights_(self, weights=None) -> None:
        self.collector.update_policy_weights_(weights)

    def set_seed(self, seed: int) -> None:
        self.collector.set_seed(seed)

    def async_shutdown(self) -> None:
        self.shutdown()

    def shutdown(self) -> None:
        """Stop writing, stop the actors, and stop Ray if this run started it: only once
        the writing thread has ended (a thread inside a Ray call when Ray stops makes
        Ray end the whole process)."""
        self._stop = True
        try:
            self.collector.shutdown(timeout=10, shutdown_ray=False)
        finally:
            if self._thread is not None:
                self._thread.join(timeout=10)
            if self.started_ray:
                import ray

                ray.shutdown()
