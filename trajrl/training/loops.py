"""The training loops. They run objects the factory built and never read the config.

``Loop`` is what both share: the cadence of logging, evaluation and checkpoints,
supervision of the collector (shut down on every way out, its failures reported as
the cause), evaluation, the columns every metrics row has, and the state a
checkpoint saves. Each loop's own steps read top to bottom in ``collect_and_learn``:

- ``OffPolicyLoop`` (recurrent DQN, recurrent SAC): the collector fills the buffer in
  the background; the learner samples ``[N, T]`` batches at the update-to-data ratio
  and pushes weights every K updates;
- ``EpisodicLoop`` (PPO): the collector yields ``trajs_per_batch`` complete episodes
  of the current policy; each batch is learnt from at once, then the weights are pushed.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, replace

import torch
from tensordict import TensorDict, TensorDictBase

from trajrl.algos.networks import CpuCopies, PolicyVersion
from trajrl.checkpoint import LoopState
from trajrl.collect.counters import WorkerCounters
from trajrl.collect.faults import RestartLimit, without_faulted
from trajrl.collect.watch import CollectorWatch, close_collector, collection_failed, end_workers, shutdown_args, stalled
from trajrl.errors import CollectorFailed, CollectorStalled, RunInterrupted
from trajrl.keys import MASK_KEY, TRAJ_KEY
from trajrl.replay.audit import LiveAudit
from trajrl.replay.episodes import as_sequences, buffer_locked, without_stale
from trajrl.replay.states import StateRefresh
from trajrl.replay.writer import redo_unfinished_writes
from trajrl.settings import LoopSettings
from trajrl.signals import critical, raise_after
from trajrl.training.metrics import (
    MaskTally,
    MetricsLog,
    Rates,
    StoredEpisodeStats,
    WorkerStats,
    buffer_stats,
    episode_stats,
)
from trajrl.training.progress import Progress

log = logging.getLogger("trajrl")


@dataclass
class RunParts:
    """What a loop runs, built by the factory (``trajrl.training.run`` gathers them)."""

    collector: object  # a TorchRL collector (or trajrl's Ray one)
    algo: object  # R2D2 | RSAC | PPO: ``update(batch)``, ``updates``
    policy: torch.nn.Module  # the behaviour policy whose weights are pushed
    log: MetricsLog
    progress: Progress
    evaluate: Callable[[], dict] | None = None
    audit: LiveAudit | None = None
    counters: WorkerCounters | None = None  # what the environments stepped; their gate
    version: PolicyVersion | None = None
    new_collector: Callable[[int], object] | None = None  # a collector like ``collector`` (its restart number)
    restart_limit: RestartLimit | None = None  # how often a worker may be replaced
    checkpoint: Callable[[LoopState], object] | None = None  # saves the run (``Checkpointer``)
    keep_best: Callable[[LoopState], object] | None = None  # saves the agent at a new best evaluation
    acting: CpuCopies | None = None  # its networks: the learner's weights are pulled into them to push
    evaluated: CpuCopies | None = None  # ``evaluate``'s networks: pulled before each evaluation


def next_multiple(frames: int, every: int) -> int | None:
    """The first multiple of ``every`` above ``frames`` (None: ``every`` is 0, never)."""
    return (frames // every + 1) * every if every > 0 else None


class Every:
    """A cadence in frames: ``due(frames)`` is true once per multiple of ``every`` passed."""

    def __init__(self, every: int, start_frames: int):
        self.every, self.next = every, next_multiple(start_frames, every)

    def due(self, frames: int) -> bool:
        if self.next is None or frames < self.next:
            return False
        self.next = next_multiple(frames, self.every)
        return True


def time_split(elapsed: float, timings: dict[str, float]) -> dict[str, float]:
    """Where the learner's wall-clock went: seconds and fractions per activity, the
    rest (``wait``) spent waiting for data."""
    wait = max(0.0, elapsed - sum(timings.values()))
    split = {**timings, "wait": wait}
    return {
        **{f"time/{k}_s": v for k, v in split.items()},
        **{f"time/{k}_frac": v / max(elapsed, 1e-9) for k, v in split.items()},
    }


def progress_line(frames: int, row: dict[str, float]) -> str:
    """The line printed with each metrics row: frames, speed, updates, returns, and
    the algorithm's headline statistics where the row has them."""
    parts = [f"frames {frames:>9,}", f"{row['time/frames_per_s']:7.0f} fps", f"updates {int(row['train/updates']):>7,}"]
    if "episode/return" in row:
        parts.append(f"train return {row['episode/return']:7.1f}")
    if "eval/return" in row:
        parts.append(f"eval return {row['eval/return']:7.1f}")
    if "eval/success" in row:
        parts.append(f"eval success {row['eval/success']:.2f}")
    for name in ("loss", "critic_loss", "alpha", "kl"):
        if f"train/{name}" in row:
            parts.append(f"{name} {row[f'train/{name}']:.4f}")
    if "collect/epsilon" in row:
        parts.append(f"eps {row['collect/epsilon']:.2f}")
    return " | ".join(parts)


class Loop:
    """The skeleton: ``run()`` supervises ``collect_and_learn()`` (each loop's own steps),
    then evaluates, logs and saves once more at the end."""

    timings: dict[str, float]

    def __init__(self, parts: RunParts, settings: LoopSettings, total_frames: int, start: LoopState | None = None):
        self.parts, self.settings, self.total_frames = parts, settings, total_frames
        self.collector, self.algo, self.log, self.progress = parts.collector, parts.algo, parts.log, parts.progress
        self.state = start or LoopState()
        self.start_frames = self.state.frames
        self.log_every = Every(settings.log_every_frames, self.start_frames)
        self.eval_every = Every(settings.eval_every_frames if parts.evaluate is not None else 0, self.start_frames)
        self.checkpoint_every = Every(settings.checkpoint_every_frames, self.start_frames)
        self.workers = (
            WorkerStats(parts.counters, self.start_frames, self.state.episodes) if parts.counters is not None else None
        )
        self.rates = Rates(self.start_frames, int(self.algo.updates))
        self.weights = TensorDict.from_module(parts.policy)  # live parameters and buffers (epsilon too)
        self.train_stats: dict[str, float] = {}
        self.pending_eval: dict[str, float] = {}  # an evaluation's results, until the next row
        self.recent_return: float | None = None
        self.collector_restarts = 0
        self.solved: dict[str, float] | None = None  # the evaluation at loop.stop_at_return, once there is one

    # ------------------------------------------------------------ the run
    def run(self) -> dict[str, float]:
        """Train until ``total_frames`` (or ``loop.time_limit_s``, or an evaluation at ``loop.stop_at_return``);
        return the final metrics row."""
        self.started = time.monotonic()
        self.watch = CollectorWatch(self.collector, self.parts.counters.fault_log if self.parts.counters else None)
        try:
            self.collect_and_learn()
        except BaseException as stop:
            # Shut down, but let the error that stopped the run be the one reported: a
            # worker's death, rather than what it broke on the way (e.g. a pause).
            failed = None if isinstance(stop, (CollectorFailed, RunInterrupted)) else self.watch.error()
            self.shut_down(stuck=isinstance(stop, CollectorStalled))
            if isinstance(stop, RunInterrupted):  # signals wait for updates: the learner is whole
                self.save_checkpoint()
            if failed is not None:
                raise collection_failed(failed, stop) from stop
            raise
        finally:
            self.watch.close()
            self.progress.close()  # the terminal's status line, before any message
        self.shut_down()
        self.state.frames = self.frames_now()
        if self.parts.audit is not None:
            self.audit_buffer(self.parts.audit)
        if self.solved is not None:  # the evaluation that solved the task is the last one
            last_eval = self.solved
        else:
            last_eval = self.evaluate(collecting=False) if self.parts.evaluate is not None else {}
        final = self.write_row(last_eval, closing=True)
        final["eval/best_return"] = self.state.best_eval if last_eval else float("nan")
        self.save_checkpoint()
        return final

    def collect_and_learn(self) -> None:  # each loop's own steps
        raise NotImplementedError

    def shut_down(self, stuck: bool = False) -> None:
        """Stop the collector (``stuck``: it stalled, its workers are not waited for long)."""
        with contextlib.suppress(Exception):
            self.collector.async_shutdown(**shutdown_args(self.collector, stuck))

    def audit_buffer(self, audit: LiveAudit) -> None:
        """At the end, with the audit on: the whole buffer (a loop without one has nothing to check)."""

    def frames_now(self) -> int:
        """Frames the run has (stored, or learnt from), as of now."""
        return self.state.frames

    def finished(self) -> bool:
        limit = self.settings.time_limit_s
        return (
            self.state.frames >= self.total_frames
            or self.solved is not None
            or (limit is not None and time.monotonic() - self.started >= limit)
        )

    def restart_collector(self, failure: CollectorFailed) -> None:
        """A worker died (or the collector failed otherwise): shut the collector down,
        count what its workers had in flight as lost, and start a new one with the
        current weights.
        Past ``collector.max_restarts`` for that worker (or without a way to make a
        new collector, or after an environment raised past its own limit) the run
        ends with ``failure``, as it does without restarts."""
        parts, worker, counters = self.parts, self.watch.dead_worker(), self.parts.counters
        past = self.watch.past_restart_limit()
        if past is not None:
            raise collection_failed(past)
        if parts.new_collector is None or parts.restart_limit is None:
            raise failure
        key = worker if worker is not None else "collector"
        restarts = parts.restart_limit.record(key)
        if not parts.restart_limit.allows(restarts):
            raise failure
        cause = str(self.watch.error() or failure).splitlines()[0]
        self.watch.close()
        close_collector(self.collector)  # its other workers end too
        redone, (frames_now, episodes_now) = self.kept()
        lost = 0
        if counters is not None:
            frames, episodes = self.generation_start
            lost = counters.retire(frames_now - frames, episodes_now - episodes)
            counters.fault_log.add(
                what="worker" if worker is not None else "collector",
                slot=key,
                time=time.time(),
                restarts=restarts,
                cause=f"{cause} ({lost:,} frames in flight lost"
                + (", its unfinished write redone" if redone else "")
                + ")",
            )
        log.warning(
            "%s; started a new collector (restart %d of %s within collector.restart_window_s), "
            "%d frames in flight lost%s",
            cause,
            restarts,
            "that worker" if worker is not None else "it",
            lost,
            ", its unfinished write redone" if redone else "",
        )
        self.collector_restarts += 1
        self.collector = parts.new_collector(self.collector_restarts)
        self.watch = CollectorWatch(self.collector, parts.counters.fault_log if parts.counters else None)
        self.generation_start = frames_now, episodes_now
        self.start_collector()
        self.push_weights()

    def kept(self) -> tuple[bool, tuple[int, int]]:
        """Once the collector is shut down: whether a write it died in was redone, and
        the frames and episodes handed over so far (``handed_over``)."""
        return False, self.handed_over()

    def handed_over(self) -> tuple[int, int]:
        """The frames and episodes the collectors handed over (stored, or learnt from)."""
        return self.state.frames, self.state.episodes

    def start_collector(self) -> None:
        """Start collecting with ``self.collector`` (a new one after a restart)."""
        self.collector.start()

    # ------------------------------------------------------------ what both loops do on the way
    def save_checkpoint(self) -> None:
        """Save the run (at the end, when interrupted, or when due); a signal waits for it."""
        if self.parts.checkpoint is not None:
            with critical():
                self.parts.checkpoint(replace(self.state, frames=self.frames_now()))

    @contextlib.contextmanager
    def paused(self):
        """Collection waits meanwhile, where the collector can (the off-policy loop's)."""
        yield

    def evaluate(self, collecting: bool = True) -> dict[str, float]:
        """Deterministic evaluation; collection is paused meanwhile, so that it does not
        compete for the cores (it stalled learning in hand-wired TorchRL loops)."""
        t0 = time.monotonic()
        if self.parts.evaluated is not None:
            self.parts.evaluated.pull()  # the learner's weights as they are now
        with self.paused() if collecting else contextlib.nullcontext():
            stats = {f"eval/{k}": v for k, v in self.parts.evaluate().items()}
        self.timings["eval"] += time.monotonic() - t0
        if stats["eval/return"] > self.state.best_eval:
            self.state.best_eval = stats["eval/return"]
            if self.parts.keep_best is not None:
                with critical():
                    self.parts.keep_best(replace(self.state, frames=self.frames_now()))
        stop_at = self.settings.stop_at_return
        if collecting and stop_at is not None and stats["eval/return"] >= stop_at and self.solved is None:
            self.solved = {**stats, "run/solved_at_frames": float(self.state.frames)}
        return stats

    def push_weights(self) -> None:
        """The learner's weights (and a new version stamp) to the collector's policy."""
        if self.parts.acting is not None:
            self.parts.acting.pull()
        if self.parts.version is not None:
            self.parts.version.bump()
        self.collector.update_policy_weights_(self.weights)

    def row(self) -> dict[str, float]:
        """This loop's own columns of a metrics row."""
        return {}

    def write_row(self, values: dict[str, float], closing: bool = False) -> dict[str, float]:
        """One metrics row: ``values``, this loop's columns and the ones every loop has."""
        frames, elapsed, updates = self.state.frames, time.monotonic() - self.started, int(self.algo.updates)
        parts = self.parts
        values, self.pending_eval = {**self.pending_eval, **values}, {}
        row = {
            **values,
            **self.row(),
            **(self.workers.update() if self.workers is not None else {}),
            **{f"train/{k}": v for k, v in self.train_stats.items()},
            "train/updates": float(updates),
            **({"train/policy_version": float(parts.version.version)} if parts.version is not None else {}),
            "time/elapsed_s": elapsed,
            "time/frames_per_s": (frames - self.start_frames) / max(elapsed, 1e-9),
            **self.rates.update(frames, updates),
            **time_split(elapsed, self.timings),
            **(parts.audit.metrics() if parts.audit is not None else {}),
            **(self.workers.in_flight(*self.handed_over()) if closing and self.workers is not None else {}),
        }
        row = self.log.log(frames, row)
        self.recent_return = row.get("episode/return", self.recent_return)
        self.progress.row(progress_line(frames, row))
        return row

    def log_eval_checkpoint(self) -> None:
        """Evaluate, write a row and save, each when its cadence says (collection paused
        for the checkpoint, so that the buffer it saves holds still)."""
        frames = self.state.frames
        last_eval = self.evaluate() if self.eval_every.due(frames) else {}
        if self.log_every.due(frames) and self.solved is None:  # solved: the closing row is next
            self.write_row(last_eval)
        elif last_eval:
            self.pending_eval = last_eval
        if self.checkpoint_every.due(frames):
            with self.paused():
                self.save_checkpoint()


class OffPolicyLoop(Loop):
    """``collector.start()`` fills the buffer in the background; the learner samples
    ``[N, T]`` batches at the configured update-to-data ratio, pushes weights every
    ``loop.weight_sync_every`` updates, and pauses collection while it is behind."""

    def __init__(
        self,
        parts: RunParts,
        sequences,
        exploration,
        settings: LoopSettings,
        total_frames: int,
        start: LoopState | None = None,
        state_refresh: StateRefresh | None = None,
    ):
        super().__init__(parts, settings, total_frames, start)
        self.sequences, self.exploration, self.state_refresh = sequences, exploration, state_refresh
        self.buffer = sequences.buffer
        self.state.frames = self.start_frames = self.buffer.write_count  # a resumed buffer holds its frames
        self.episodes = StoredEpisodeStats(self.buffer, self.state.episodes)
        self.samples = MaskTally("sample")
        self.timings = {"sample": 0.0, "update": 0.0, "eval": 0.0, "paused": 0.0}
        # The environments wait at the counters' gate (any collector whose environments
        # count their steps); otherwise TorchRL's pause, which the single-process
        # Collector lacks and which waits for the workers to finish their rollouts.
        self.gate = parts.counters
        self.can_pause = self.gate is not None or type(self.collector).pause.__qualname__ != "BaseCollector.pause"

    def collect_and_learn(self) -> None:
        self.last_write = time.monotonic()
        self.generation_start = (self.buffer.write_count, self.episodes.episodes)  # where this collector's writes begin
        self.collector.start()
        while True:
            try:
                if not self.collect_and_learn_once():
                    break
            except CollectorFailed as failure:  # a worker died, perhaps holding the buffer's lock
                self.restart_collector(failure)

    def collect_and_learn_once(self) -> bool:
        """One turn of the loop; False once the run is finished."""
        s = self.settings
        frames = self.buffer.write_count  # collect: workers write in the background
        if frames != self.state.frames:
            self.last_write = time.monotonic()
            if self.exploration is not None:
                self.exploration.step(frames - self.state.frames)  # epsilon anneals with frames
            self.state.frames = frames
        self.check_collector()
        if self.finished():
            return False
        self.progress.status(frames, self.recent_return)
        if frames < s.warmup_frames or self.algo.updates >= self.updates_due():
            time.sleep(0.005)  # ahead of the ratio: wait for data
        elif (
            self.can_pause
            and s.max_update_lag is not None
            and self.updates_due() - self.algo.updates > s.max_update_lag
        ):
            with self.paused():  # far behind: collection waits
                while self.algo.updates < self.updates_due():
                    self.update()
        else:
            self.update()  # sample, update, push weights
        if self.episodes.due():
            with self.waiting_on_buffer("reading the stored episodes waited on the replay buffer"):
                self.episodes.read()
        self.log_eval_checkpoint()
        return True

    def kept(self) -> tuple[bool, tuple[int, int]]:
        redone = redo_unfinished_writes(self.buffer)  # a write a dead worker left half done
        self.episodes.read()  # the episodes stored, exactly
        return bool(redone), (self.buffer.write_count, self.episodes.episodes)

    def start_collector(self) -> None:
        self.collector.start()
        self.last_write = time.monotonic()

    def shut_down(self, stuck: bool = False) -> None:
        """Stop the collector, and make sure that none of its workers writes after this:
        the closing row counts what the buffer holds (a worker TorchRL had not stopped
        yet is ended, and a write it was in the middle of is redone whole)."""
        super().shut_down(stuck)
        end_workers(self.collector)
        redo_unfinished_writes(self.buffer)

    def frames_now(self) -> int:
        return self.buffer.write_count  # what the saved buffer holds, whatever the loop last read

    def updates_due(self) -> float:
        return (self.buffer.write_count - self.settings.warmup_frames) * self.settings.updates_per_frame

    def check_collector(self) -> None:
        error = self.watch.error()
        if error is not None:
            raise collection_failed(error) from error
        timeout = self.settings.stall_timeout_s
        if time.monotonic() - self.last_write > timeout:
            raise stalled(self.watch, timeout, "no frame stored")

    def waiting_on_buffer(self, what: str, learning: bool = False):
        """A block that waits for the buffer's write lock, which a worker killed while
        writing never releases: it ends as soon as a worker is found dead (not while
        ``learning``: an update is never cut in the middle), or after
        ``loop.stall_timeout_s``, naming the dead worker (or the stall, ``what``)."""
        timeout = self.settings.stall_timeout_s
        died = lambda: collection_failed(self.watch.error()) if self.watch.dead_worker() is not None else None  # noqa: E731
        return raise_after(timeout, lambda: stalled(self.watch, timeout, what), check=None if learning else died)

    def update(self) -> None:
        """One sampled batch, one gradient update, and every K updates a weight push
        (the whole of it limited by ``loop.stall_timeout_s``: sampling takes the write lock)."""
        t0 = time.monotonic()
        with self.waiting_on_buffer("an update waited on the replay buffer"):
            batch = self.sequences.sample()
        if self.parts.audit is not None:
            self.parts.audit.check_batch(batch)
        self.samples.add(batch, int(self.parts.version.version) if self.parts.version is not None else None)
        t1 = time.monotonic()
        with self.waiting_on_buffer("an update waited on the replay buffer or a weight push", learning=True):
            with critical():  # a signal waits for the update and its weight push
                self.train_stats = self.algo.update(batch)
                self.sequences.update_priority(batch)
                if self.state_refresh is not None:  # stored states from the current network
                    self.state_refresh(self.algo.updates)
                if self.algo.updates % self.settings.weight_sync_every == 0:
                    self.push_weights()
            self.timings["sample"] += t1 - t0
            self.timings["update"] += time.monotonic() - t1

    @contextlib.contextmanager
    def paused(self):
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

    def save_checkpoint(self) -> None:
        """The buffer is saved under its write lock: first wait (limited) until the lock
        is free; collection is paused or over, so it stays free for the save, however long."""
        with self.waiting_on_buffer("a checkpoint waited on the replay buffer"), buffer_locked(self.buffer):
            pass
        self.state.episodes = self.episodes.episodes
        super().save_checkpoint()

    def audit_buffer(self, audit: LiveAudit) -> None:
        audit.check_buffer(self.buffer)

    def write_row(self, values: dict[str, float], closing: bool = False) -> dict[str, float]:
        row = super().write_row(values, closing)
        self.log.histogram("episode/lengths", self.episodes.lengths, self.state.frames)
        return row

    def row(self) -> dict[str, float]:
        frames, updates = self.state.frames, self.algo.updates
        with self.waiting_on_buffer("a metrics row waited on the replay buffer"):  # both read under the lock
            episodes, stored = self.episodes.update(), buffer_stats(self.buffer)
        row = {
            **episodes,
            **self.samples.stats(),
            "train/updates_per_frame": updates / max(1, frames - self.settings.warmup_frames),
            **({"collect/epsilon": float(self.exploration.eps)} if self.exploration is not None else {}),
            **({"buffer/state_refreshes": float(self.state_refresh.refreshes)} if self.state_refresh else {}),
            **stored,
            "time/sample_ms": 1000 * self.timings["sample"] / max(1, updates),
        }
        self.state.episodes = self.episodes.episodes
        return row


class EpisodicLoop(Loop):
    """On-policy, episodic: the collector yields ``trajs_per_batch`` complete episodes
    of the current policy; each batch is learnt from at once (``algo.update``), and
    the new weights reach the collector before the next one."""

    def __init__(
        self,
        parts: RunParts,
        settings: LoopSettings,
        total_frames: int,
        start: LoopState | None = None,
        strict_episodes: int | None = None,
    ):
        """``strict_episodes``: learn only from episodes of the current weights, this
        many at a time (``algo.on_policy=strict``; ``current_policy_only``)."""
        super().__init__(parts, settings, total_frames, start)
        self.strict_episodes = strict_episodes
        self.pending: list[TensorDictBase] = []  # strict: episodes of the current weights, not yet learnt from
        self.pending_episodes = 0
        self.dropped_episodes = self.dropped_frames = 0  # strict: episodes a weight push cut
        self.batches = MaskTally("batch")
        self.lengths: list[torch.Tensor] = []
        self.timings = {"collect": 0.0, "update": 0.0, "eval": 0.0}
        self.episode_stats: dict[str, float] = {}

    def start_collector(self) -> None:
        self.batches_of_episodes = iter(self.collector)
        self.pending, self.pending_episodes = [], 0  # a replaced collector's: counted lost with what it had in flight

    def handed_over(self) -> tuple[int, int]:
        """Learnt from, or (``algo.on_policy=strict``) dropped for a weight push."""
        return self.state.frames + self.dropped_frames, self.state.episodes + self.dropped_episodes

    def next_batch(self):
        """The collector's next batch of complete episodes (None: it has stopped)."""
        s = self.settings
        stall = lambda: stalled(self.watch, s.stall_timeout_s, "no batch of complete episodes")  # noqa: E731
        with raise_after(s.stall_timeout_s, stall):
            try:
                return next(self.batches_of_episodes, None)
            except CollectorFailed:  # the stall limit
                raise
            except Exception as error:  # a worker, or the single-process collector's environment
                raise collection_failed(self.watch.past_restart_limit() or error) from error

    def collect_and_learn(self) -> None:
        self.generation_start = self.handed_over()
        self.start_collector()
        t0 = time.monotonic()
        while True:
            try:
                batch = self.next_batch()  # collect: complete episodes of this policy
            except CollectorFailed as failure:  # a worker died: a new collector, if allowed
                self.restart_collector(failure)
                continue
            if batch is None:
                break
            batch = without_faulted(batch)  # episodes an environment fault ended
            if batch is not None and self.strict_episodes is not None:
                batch = self.current_policy_only(batch)  # strict: none a weight push cut
            if batch is None:
                continue
            if batch.batch_dims == 1:  # traj_format="cat": episodes one after the other
                batch = as_sequences(batch, batch.get("is_init"))
            self.timings["collect"] += time.monotonic() - t0
            if self.parts.audit is not None:
                self.parts.audit.check_batch(batch, whole_episodes=True)
            self.batches.add(batch, int(self.parts.version.version) if self.parts.version is not None else None)
            self.lengths.append(batch.get(MASK_KEY).sum(-1))
            self.state.frames += int(batch.get(MASK_KEY).sum())
            self.state.episodes += batch.shape[0]
            t1 = time.monotonic()
            with critical():  # learn, then push: a signal waits for both
                self.train_stats = self.algo.update(batch)
                self.push_weights()
            self.episode_stats = episode_stats(batch)
            self.timings["update"] += time.monotonic() - t1
            self.recent_return = self.episode_stats["episode/return"]
            self.progress.status(self.state.frames, self.recent_return)
            if self.finished():
                break
            self.log_eval_checkpoint()  # evaluate, log, save: each when due
            if self.solved is not None:  # that evaluation reached loop.stop_at_return
                break
            t0 = time.monotonic()

    def current_policy_only(self, batch: TensorDictBase) -> TensorDictBase | None:
        """Drop the episodes of ``batch`` that the weights before the last push began
        (counted), and hold the rest until ``strict_episodes`` are there: then all of
        them, flat (None before)."""
        flat = batch if batch.batch_dims == 1 else batch[batch.get(MASK_KEY)].exclude(MASK_KEY)
        kept, episodes, frames = without_stale(flat, int(self.parts.version.version))
        self.dropped_episodes += episodes
        self.dropped_frames += frames
        if kept is not None:
            self.pending.append(kept)
            self.pending_episodes += int(kept.get(TRAJ_KEY).unique().numel())
        if self.pending_episodes < self.strict_episodes:
            return None
        batch, self.pending, self.pending_episodes = torch.cat(self.pending), [], 0
        return batch

    def shut_down(self, stuck: bool = False) -> None:
        close_collector(self.collector, stuck)

    def write_row(self, values: dict[str, float], closing: bool = False) -> dict[str, float]:
        row = super().write_row({**self.episode_stats, **values}, closing)
        if self.lengths:
            self.log.histogram("episode/lengths", torch.cat(self.lengths), self.state.frames)
            self.lengths = []
        return row

    def row(self) -> dict[str, float]:
        strict = (
            {
                "batch/episodes_dropped_stale": float(self.dropped_episodes),
                "batch/frames_dropped_stale": float(self.dropped_frames),
            }
            if self.strict_episodes
            else {}
        )
        return {**self.batches.stats(), **strict, "episode/completed": float(self.state.episodes)}
