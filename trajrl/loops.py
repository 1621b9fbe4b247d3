"""The training loops. They run objects built by the factory and never read the config."""
from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass
from typing import Callable

import torch
from tensordict import TensorDict

from trajrl.data.audit import LiveAudit
from trajrl.data.episodes import MASK_KEY, as_sequences
from trajrl.factory.algo import PolicyVersion
from trajrl.factory.collector import CollectorFailed, CollectorWatch, close_collector
from trajrl.factory.env import WorkerCounters
from trajrl.interrupts import RunInterrupted, critical, raise_after
from trajrl.metrics import (
    MaskTally,
    MetricsLog,
    Rates,
    StoredEpisodeStats,
    WorkerStats,
    buffer_stats,
    episode_stats,
)
from trajrl.progress import Progress


def stalled(watch: CollectorWatch, timeout: float, what: str) -> CollectorFailed:
    """The error of a collector that gave nothing for ``timeout`` seconds, or, if a
    worker has died (e.g. holding the buffer's write lock), of that death. Made when
    the time is up, before anything is shut down (shutting down ends workers too)."""
    stall = CollectorFailed(f"{what} for {timeout:g} s (loop.stall_timeout_s={timeout:g}): an environment is stuck, "
                            "or slower than that; raise loop.stall_timeout_s if it is only slow")
    died = watch.error()
    return collection_failed(died, stall) if died is not None else stall


def time_split(elapsed: float, timings: dict[str, float]) -> dict[str, float]:
    """Where the learner's wall-clock went: seconds and fractions per activity, the
    rest (``wait``) spent waiting for data."""
    wait = max(0.0, elapsed - sum(timings.values()))
    split = {**timings, "wait": wait}
    return {**{f"time/{k}_s": v for k, v in split.items()},
            **{f"time/{k}_frac": v / max(elapsed, 1e-9) for k, v in split.items()}}


def progress_line(frames: int, row: dict[str, float]) -> str:
    """The line printed with each metrics row: frames, speed, updates, returns, and
    the algorithm's headline statistics where the row has them."""
    parts = [f"frames {frames:>9,}", f"{row['time/frames_per_s']:7.0f} fps", f"updates {int(row['train/updates']):>7,}"]
    if "episode/return" in row:
        parts.append(f"train return {row['episode/return']:7.1f}")
    if "eval/return" in row:
        parts.append(f"eval return {row['eval/return']:7.1f}")
    for name in ("loss", "critic_loss", "alpha", "kl"):
        if f"train/{name}" in row:
            parts.append(f"{name} {row[f'train/{name}']:.4f}")
    if "collect/epsilon" in row:
        parts.append(f"eps {row['collect/epsilon']:.2f}")
    return " | ".join(parts)


def out_of_time(start: float, limit_s: float | None) -> bool:
    return limit_s is not None and time.monotonic() - start >= limit_s


def next_multiple(frames: int, every: int) -> int | None:
    """The first multiple of ``every`` above ``frames`` (None: ``every`` is 0, never)."""
    return (frames // every + 1) * every if every > 0 else None


#: Saves a checkpoint: ``save(frames, loop_state)`` (``trajrl.checkpoint.Checkpointer``).
SaveCheckpoint = Callable[[int, dict], object]


def collection_failed(error: BaseException, noticed: BaseException | None = None) -> CollectorFailed:
    """The run's error for a collector that failed with ``error`` (and its root cause);
    ``noticed``: what the loop ran into because of it (TorchRL's report, if any)."""
    root = error
    while root.__cause__ is not None:  # TorchRL wraps the real cause
        root = root.__cause__
    cause = f"{type(error).__name__}: {error}" + (f" <- {type(root).__name__}: {root}" if root is not error else "")
    if noticed is not None:
        cause += f" ({type(noticed).__name__}: {str(noticed).splitlines()[0] if str(noticed) else ''})"
    return CollectorFailed(f"collection failed: {cause}")


class Checkpoints:
    """Saves the run every ``every`` frames (``due``, then ``save``), at the end and
    when it is interrupted; a signal waits until the checkpoint is written."""

    def __init__(self, save: SaveCheckpoint | None, every: int, start_frames: int = 0):
        self._save, self.every = save, every
        self.next = next_multiple(start_frames, every)

    def due(self, frames: int) -> bool:
        return self._save is not None and self.next is not None and frames >= self.next

    def save(self, frames: int, loop_state: dict) -> None:
        if self._save is None:
            return
        if self.next is not None and frames >= self.next:
            self.next = next_multiple(frames, self.every)
        with critical():
            self._save(frames, loop_state)


@dataclass
class OffPolicySettings:
    total_frames: int          # stop once this many frames are stored
    warmup_frames: int         # frames stored before the first update
    updates_per_frame: float   # gradient updates per stored frame (update-to-data ratio)
    weight_sync_every: int     # push weights to the collector every this many updates
    eval_every_frames: int     # 0: only at the end
    log_every_frames: int
    stall_timeout_s: float     # no new frame for this long is an error
    max_update_lag: int | None = None  # pause collection when the learner is this far behind (None: never)
    checkpoint_every_frames: int = 0   # 0: only at the end
    time_limit_s: float | None = None  # stop (as at total_frames) after this long


class OffPolicyLoop:
    """collector.start() fills the buffer in the background; the learner samples
    ``[N, T]`` batches at the configured update-to-data ratio, pushes weights every
    K updates and evaluates every E frames; the collector is shut down at the end
    or on any error."""

    def __init__(self, collector, sequences, algo, behaviour_policy, exploration, evaluate: Callable[[], dict] | None,
                 log: MetricsLog, settings: OffPolicySettings, progress: Progress | None = None,
                 audit: LiveAudit | None = None, counters: WorkerCounters | None = None,
                 version: PolicyVersion | None = None, checkpoint: SaveCheckpoint | None = None,
                 start: dict | None = None):
        self.collector, self.sequences, self.algo = collector, sequences, algo
        self.buffer = sequences.buffer
        # Where a resumed run left off (``trajrl.checkpoint.restore``): the buffer holds its frames.
        self.start_state = start or {}
        self.start_frames = self.buffer.write_count
        self.checkpoint = Checkpoints(checkpoint, settings.checkpoint_every_frames, self.start_frames)
        self.behaviour_policy, self.exploration, self.evaluate = behaviour_policy, exploration, evaluate
        self.log, self.settings, self.audit, self.version = log, settings, audit, version
        self.progress = progress or Progress(settings.total_frames)
        self.episodes = StoredEpisodeStats(self.buffer, int(self.start_state.get("episodes", 0)))
        self.workers = (WorkerStats(counters, self.start_frames, self.episodes.episodes)
                        if counters is not None else None)
        self.samples = MaskTally("sample")
        self.rates = Rates(self.start_frames, int(self.start_state.get("updates", 0)))
        self.recent_return: float | None = None
        # The live parameters and buffers (epsilon included) of the behaviour policy.
        self.weights = TensorDict.from_module(behaviour_policy)
        # The environments wait at the counters' gate (any collector whose environments
        # count their steps); otherwise TorchRL's pause, which the single-process
        # Collector lacks and which waits for the workers to finish their rollouts.
        self.gate = counters
        self.can_pause = counters is not None or type(collector).pause.__qualname__ != "BaseCollector.pause"

    def run(self) -> dict[str, float]:
        """Train until ``total_frames`` are stored; return the final metrics."""
        self.start, self.train_stats = time.monotonic(), {}
        self.updates = int(self.start_state.get("updates", 0))
        self.timings = {"sample": 0.0, "update": 0.0, "eval": 0.0, "paused": 0.0}
        self.best_eval = float(self.start_state.get("best_eval", float("-inf")))
        self.last_write = time.monotonic()
        self.watch = watch = CollectorWatch(self.collector)
        self.collector.start()
        try:
            self._collect_and_learn(watch)
        except BaseException as stop:
            # Shut down, but let the error that stopped the run be the one reported: a
            # worker's death, rather than what it broke on the way (e.g. a pause).
            failed = None if isinstance(stop, (CollectorFailed, RunInterrupted)) else watch.error()
            watch.close()
            with contextlib.suppress(Exception):
                self.collector.async_shutdown()
            if isinstance(stop, RunInterrupted):  # signals wait for updates: the learner is whole
                self._save_checkpoint(self.buffer.write_count)
            if failed is not None:
                raise collection_failed(failed, stop) from stop
            raise
        finally:
            self.progress.close()  # the terminal's status line, before any message
        watch.close()
        self.collector.async_shutdown()

        if self.audit is not None:
            self.audit.check_buffer(self.buffer)
        last_eval = self._evaluate(collecting=False) if self.evaluate is not None else {}
        final = self._log(self.buffer.write_count, last_eval, closing=True)
        final["eval/best_return"] = self.best_eval if last_eval else float("nan")
        self._save_checkpoint(self.buffer.write_count)
        return final

    def _save_checkpoint(self, frames: int) -> None:
        self.checkpoint.save(frames, {"updates": self.updates, "best_eval": self.best_eval,
                                      "episodes": self.episodes.episodes})

    def _collect_and_learn(self, watch: CollectorWatch) -> None:
        s = self.settings
        frames_seen = last_frames = self.start_frames
        last_eval: dict[str, float] = {}
        next_log, next_eval = next_multiple(frames_seen, s.log_every_frames), next_multiple(frames_seen, s.eval_every_frames)
        while True:
            frames = self.buffer.write_count
            if frames != last_frames:
                self.last_write, last_frames = time.monotonic(), frames
            self._check_collector(watch)
            if frames > frames_seen:
                if self.exploration is not None:
                    self.exploration.step(frames - frames_seen)
                frames_seen = frames
            if frames >= s.total_frames or out_of_time(self.start, s.time_limit_s):
                break
            self.progress.status(frames, self.recent_return)
            self._learn(frames)
            if self.episodes.due():
                self.episodes.read()
            if self.checkpoint.due(frames):
                with self._paused():
                    self._save_checkpoint(frames)
            if next_eval is not None and frames >= next_eval and self.evaluate is not None:
                next_eval += s.eval_every_frames
                last_eval = self._evaluate()
            if frames >= next_log:
                next_log = (frames // s.log_every_frames + 1) * s.log_every_frames
                self._log(frames, last_eval)
                last_eval = {}

    def _check_collector(self, watch: CollectorWatch) -> None:
        error = watch.error()
        if error is not None:
            raise collection_failed(error) from error
        timeout = self.settings.stall_timeout_s
        if time.monotonic() - self.last_write > timeout:
            raise stalled(watch, timeout, "no frame stored")

    def _learn(self, frames: int) -> None:
        """Run the updates the ratio asks for; pause collection while far behind."""
        s = self.settings

        def due() -> float:
            return (self.buffer.write_count - s.warmup_frames) * s.updates_per_frame

        if frames < s.warmup_frames or self.updates >= due():
            time.sleep(0.005)
            return
        if self.can_pause and s.max_update_lag is not None and due() - self.updates > s.max_update_lag:
            with self._paused():
                while self.updates < due():
                    self._update()
        else:
            self._update()

    @contextlib.contextmanager
    def _paused(self):
        """Collection waits (where the collector can pause) for the learner."""
        if not self.can_pause:
            yield
            return
        t0 = time.monotonic()
        if self.gate is not None:
            self.gate.close_gate()
            try:
                yield
            finally:
                self.gate.open_gate()
        else:
            with self.collector.pause():
                yield
        self.timings["paused"] += time.monotonic() - t0
        self.last_write = time.monotonic()

    def _update(self) -> None:
        # Sampling waits for the buffer's write lock, which a worker killed while writing never releases.
        timeout = self.settings.stall_timeout_s
        waited = "an update waited on the replay buffer or a weight push"
        with raise_after(timeout, lambda: stalled(self.watch, timeout, waited)):
            self._sample_and_update()

    def _sample_and_update(self) -> None:
        t0 = time.monotonic()
        batch = self.sequences.sample()
        if self.audit is not None:
            self.audit.check_batch(batch)
        self.samples.add(batch, int(self.version.version) if self.version is not None else None)
        t1 = time.monotonic()
        with critical():  # a signal waits for the update and its weight push
            self.train_stats = self.algo.update(batch)
            self.sequences.update_priority(batch)
            self.updates += 1
            if self.updates % self.settings.weight_sync_every == 0:
                if self.version is not None:
                    self.version.bump()
                self.collector.update_policy_weights_(self.weights)
        self.timings["sample"] += t1 - t0
        self.timings["update"] += time.monotonic() - t1

    def _evaluate(self, collecting: bool = True) -> dict[str, float]:
        """Deterministic evaluation; collection is paused meanwhile, so it does not
        compete for the cores (it stalled learning in hand-wired TorchRL loops)."""
        t0 = time.monotonic()
        with self._paused() if collecting else contextlib.nullcontext():
            stats = {f"eval/{k}": v for k, v in self.evaluate().items()}
        self.timings["eval"] += time.monotonic() - t0
        self.best_eval = max(self.best_eval, stats["eval/return"])
        return stats

    def _log(self, frames: int, eval_stats: dict[str, float], closing: bool = False) -> dict[str, float]:
        elapsed, updates = time.monotonic() - self.start, self.updates
        sample_s = self.timings["sample"]
        episodes = self.episodes.update()
        row = {
            **episodes,
            **(self.workers.update() if self.workers is not None else {}),
            **self.samples.stats(),
            **{f"train/{k}": v for k, v in self.train_stats.items()},
            **eval_stats,
            "train/updates": float(updates),
            "train/updates_per_frame": updates / max(1, frames - self.settings.warmup_frames),
            **({"train/policy_version": float(self.version.version)} if self.version is not None else {}),
            **({"collect/epsilon": float(self.exploration.eps)} if self.exploration is not None else {}),
            **buffer_stats(self.buffer),
            "time/elapsed_s": elapsed,
            "time/frames_per_s": (frames - self.start_frames) / max(elapsed, 1e-9),
            **self.rates.update(frames, updates),
            "time/sample_ms": 1000 * sample_s / max(1, updates),
            **time_split(elapsed, self.timings),
            **(self.audit.metrics() if self.audit is not None else {}),
            **(self.workers.in_flight(frames, self.episodes.episodes)
               if closing and self.workers is not None else {}),
        }
        row = self.log.log(frames, row)
        self.log.histogram("episode/lengths", self.episodes.lengths, frames)
        self.recent_return = row.get("episode/return", self.recent_return)
        self.progress.row(progress_line(frames, row))
        return row


@dataclass
class EpisodicSettings:
    total_frames: int        # stop once the learner has seen this many frames
    eval_every_frames: int   # 0: only at the end
    log_every_frames: int
    stall_timeout_s: float   # waiting this long for a batch is an error
    checkpoint_every_frames: int = 0  # 0: only at the end
    time_limit_s: float | None = None  # stop (as at total_frames) after this long


class EpisodicLoop:
    """On-policy, episodic: the collector yields ``trajs_per_batch`` complete episodes
    of the current policy; each batch is learnt from at once (``algo.update``), and
    the new weights reach the collector before the next one."""

    def __init__(self, collector, algo, policy, evaluate: Callable[[], dict] | None, log: MetricsLog,
                 settings: EpisodicSettings, progress: Progress | None = None, audit: LiveAudit | None = None,
                 counters: WorkerCounters | None = None, version: PolicyVersion | None = None,
                 checkpoint: SaveCheckpoint | None = None, start: dict | None = None):
        self.collector, self.algo, self.evaluate, self.log = collector, algo, evaluate, log
        # Where a resumed run left off (``trajrl.checkpoint.restore``).
        start = start or {}
        self.start_frames, self.start_episodes = int(start.get("frames", 0)), int(start.get("episodes", 0))
        self.start_best_eval = float(start.get("best_eval", float("-inf")))
        self.checkpoint = Checkpoints(checkpoint, settings.checkpoint_every_frames, self.start_frames)
        self.settings, self.audit, self.version = settings, audit, version
        self.progress = progress or Progress(settings.total_frames)
        self.workers = (WorkerStats(counters, self.start_frames, self.start_episodes)
                        if counters is not None else None)
        self.weights = TensorDict.from_module(policy)
        self.batches = MaskTally("batch")
        self.rates = Rates(self.start_frames, int(algo.updates))
        self.lengths: list = []
        self.recent_return: float | None = None

    def run(self) -> dict[str, float]:
        """Train until ``total_frames`` frames of complete episodes were learnt from."""
        s = self.settings
        self.start = time.monotonic()
        self.timings = {"collect": 0.0, "update": 0.0, "eval": 0.0}
        self.frames, self.episodes, self.best_eval = self.start_frames, self.start_episodes, self.start_best_eval
        next_log = next_multiple(self.frames, s.log_every_frames)
        next_eval = next_multiple(self.frames, s.eval_every_frames)
        stats: dict[str, float] = {}
        last_eval: dict[str, float] = {}
        watch = CollectorWatch(self.collector)
        batches = iter(self.collector)
        stall = lambda: stalled(watch, s.stall_timeout_s, "no batch of complete episodes")  # noqa: E731
        try:
            t0 = time.monotonic()
            while True:
                with raise_after(s.stall_timeout_s, stall):
                    batch = next(batches, None)
                if batch is None:
                    break
                if batch.batch_dims == 1:  # traj_format="cat": episodes one after the other
                    batch = as_sequences(batch, batch.get("is_init"))
                self.timings["collect"] += time.monotonic() - t0
                if self.audit is not None:
                    self.audit.check_batch(batch, whole_episodes=True)
                self.batches.add(batch, int(self.version.version) if self.version is not None else None)
                self.lengths.append(batch.get(MASK_KEY).sum(-1))
                self.frames += int(batch.get(MASK_KEY).sum())
                self.episodes += batch.shape[0]
                t1 = time.monotonic()
                with critical():  # a signal waits for the update and its weight push
                    stats = {**episode_stats(batch), **{f"train/{k}": v for k, v in self.algo.update(batch).items()}}
                    if self.version is not None:
                        self.version.bump()
                    self.collector.update_policy_weights_(self.weights)
                self.timings["update"] += time.monotonic() - t1
                self.recent_return = stats["episode/return"]
                self.progress.status(self.frames, self.recent_return)
                if self.checkpoint.due(self.frames):
                    self._save_checkpoint()
                if self.frames >= s.total_frames or out_of_time(self.start, s.time_limit_s):
                    break
                if next_eval is not None and self.frames >= next_eval and self.evaluate is not None:
                    next_eval = (self.frames // s.eval_every_frames + 1) * s.eval_every_frames
                    last_eval = self._evaluate()
                if self.frames >= next_log:
                    next_log = (self.frames // s.log_every_frames + 1) * s.log_every_frames
                    self._log({**stats, **last_eval})
                    last_eval = {}
                t0 = time.monotonic()
        except RunInterrupted:
            close_collector(self.collector)
            self._save_checkpoint()  # signals wait for updates: the learner is whole
            raise
        except Exception as stop:
            failed = None if isinstance(stop, CollectorFailed) else watch.error()
            if failed is not None:  # a worker died: that is the cause, not how the iteration broke
                raise collection_failed(failed, stop) from stop
            raise
        finally:
            watch.close()
            close_collector(self.collector)
            self.progress.close()
        final_eval = self._evaluate() if self.evaluate is not None else {}
        final = self._log({**stats, **final_eval}, closing=True)
        final["eval/best_return"] = self.best_eval if final_eval else float("nan")
        self._save_checkpoint()
        return final

    def _save_checkpoint(self) -> None:
        self.checkpoint.save(self.frames, {"episodes": self.episodes, "best_eval": self.best_eval})

    def _evaluate(self) -> dict[str, float]:
        t0 = time.monotonic()
        stats = {f"eval/{k}": v for k, v in self.evaluate().items()}
        self.timings["eval"] += time.monotonic() - t0
        self.best_eval = max(self.best_eval, stats["eval/return"])
        return stats

    def _log(self, values: dict[str, float], closing: bool = False) -> dict[str, float]:
        elapsed = time.monotonic() - self.start
        row = {
            **values,
            **(self.workers.update() if self.workers is not None else {}),
            **self.batches.stats(),
            "episode/completed": float(self.episodes),
            "train/updates": float(self.algo.updates),
            **({"train/policy_version": float(self.version.version)} if self.version is not None else {}),
            "time/elapsed_s": elapsed,
            "time/frames_per_s": (self.frames - self.start_frames) / max(elapsed, 1e-9),
            **self.rates.update(self.frames, int(self.algo.updates)),
            **time_split(elapsed, self.timings),
            **(self.audit.metrics() if self.audit is not None else {}),
            **(self.workers.in_flight(self.frames, self.episodes) if closing and self.workers is not None else {}),
        }
        row = self.log.log(self.frames, row)
        if self.lengths:
            self.log.histogram("episode/lengths", torch.cat(self.lengths), self.frames)
            self.lengths = []
        self.progress.row(progress_line(self.frames, row))
        return row
