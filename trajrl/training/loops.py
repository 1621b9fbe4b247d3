"""The training loops. They run objects the factory built and never read the config.

Each loop's ``run()`` reads top to bottom: collect, (store, sample,) learn, push weights,
then evaluate, report and save when the cadence says (``Loop``: that step and the closing
one, written once for both). What else both loops need on the way are parts they call:

- ``CollectorSupervisor`` (``supervisor.py``): starts the collector, pushes weights to it,
  pauses it, replaces it after a failure and shuts it down, failures reported with their cause;
- ``Reporter`` (``reporter.py``): metrics rows, console lines, the status line;
- ``Evaluations`` (``evaluator.py``): the best return so far, and whether the run is solved;
- ``Checkpointer`` (``trajrl.checkpoint``): ``latest.pt`` and ``best.pt``, each written whole;
- ``Cadence`` (``cadence.py``): when to evaluate, log and save, and when the run is over.

The loops:

- ``OffPolicyLoop`` (recurrent DQN, recurrent SAC): the collector fills the buffer in
  the background; the learner samples ``[N, T]`` batches at the update-to-data ratio
  and pushes weights every K updates;
- ``EpisodicLoop`` (PPO): the collector yields ``trajs_per_batch`` complete episodes
  of the current policy; each batch is learnt from at once, then the weights are pushed.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import torch
from tensordict import TensorDictBase

from trajrl.algos.learner import Learner
from trajrl.base.errors import CollectorFailed, LearnerFailed, NonFiniteUpdate, RunInterrupted
from trajrl.base.keys import MASK_KEY, TRAJ_KEY
from trajrl.base.signals import critical
from trajrl.checkpoint import LoopState
from trajrl.collect.faults import without_faulted
from trajrl.configuration.settings import LoopSettings
from trajrl.factory import Pipeline
from trajrl.replay.audit import LiveAudit
from trajrl.replay.episodes import as_sequences, buffer_locked, without_stale
from trajrl.training.cadence import Cadence
from trajrl.training.evaluator import Evaluations
from trajrl.training.metrics import MaskTally, MetricsLog, StoredEpisodeStats, buffer_stats, episode_stats
from trajrl.training.progress import Progress
from trajrl.training.reporter import Reporter
from trajrl.training.supervisor import CollectorSupervisor

log = logging.getLogger("trajrl")


def learnt_from(algo: Learner, batch: TensorDictBase) -> dict[str, float]:
    """``algo.update(batch)``; where a loss or a gradient is not finite (``NonFiniteUpdate``: no step
    taken) the run ends naming the update and the episodes the batch holds steps of."""
    try:
        return algo.update(batch)
    except NonFiniteUpdate as error:
        raise LearnerFailed(
            f"update {algo.updates + 1:,}: {error}; the batch holds steps of episodes "
            f"{episodes_in(batch)}. No step was taken: the weights and checkpoints stay finite. A smaller "
            "algo.lr or algo.max_grad_norm, or rewards on a smaller scale (env.reward_scale), keep the losses finite"
        ) from error


def episodes_in(batch: TensorDictBase, most: int = 8) -> str:
    """The episode ids of ``batch``'s valid steps, the first ``most`` of them, in words."""
    ids = batch.get(TRAJ_KEY, None)
    if ids is None:
        return "(not numbered)"
    ids = ids.reshape(batch.shape)
    mask = batch.get(MASK_KEY, None)
    ids = torch.unique(ids[mask.reshape(batch.shape)] if mask is not None else ids).tolist()
    shown = ", ".join(str(i) for i in ids[:most])
    return f"{shown}, ... ({len(ids)} in all)" if len(ids) > most else shown


def no_checkpoint(state: LoopState) -> None:
    """What a loop built without checkpoints saves: nothing."""


@dataclass
class RunParts:
    """What a run adds around the pipeline the factory built (``trajrl.training.run`` makes them)."""

    log: MetricsLog
    progress: Progress
    evaluate: Callable[[], dict] | None = None
    audit: LiveAudit | None = None
    checkpoint: Callable[[LoopState], object] | None = None  # saves the run (``Checkpointer``)
    keep_best: Callable[[LoopState], object] | None = None  # saves the agent at a new best evaluation


def loop_of(pipe: Pipeline, parts: RunParts, settings: LoopSettings, total_frames: int) -> Loop:
    """The loop ``pipe``'s algorithm learns in: episodic when it learns on-policy, else off-policy."""
    return (EpisodicLoop if pipe.on_policy else OffPolicyLoop)(pipe, parts, settings, total_frames)


def collection_of(pipe: Pipeline, settings: LoopSettings, buffer=None) -> CollectorSupervisor:
    """The supervisor of ``pipe.collector`` (``buffer``: the one it writes into in the background)."""
    return CollectorSupervisor(
        pipe.collector,
        pipe.policy,
        settings.stall_timeout_s,
        buffer=buffer,
        acting=pipe.acting,
        version=pipe.version,
        counters=pipe.counters,
        new_collector=pipe.new_collector,
        restart_limit=pipe.restart_limit,
        collector_at=pipe.collector_at,
    )


def reporter_of(pipe: Pipeline, parts: RunParts, start_frames: int, start: LoopState) -> Reporter:
    """The reporter of a run that starts at ``start_frames`` and ``start``'s counters (a resumed one's)."""
    return Reporter(
        parts.log,
        parts.progress,
        pipe.algo,
        start_frames,
        start.episodes,
        stepped=(start.frames_stepped, start.episodes_begun),
        version=pipe.version,
        audit=parts.audit,
        counters=pipe.counters,
    )


class Loop:
    """What both loops do alike, written once: evaluate, report and save when the cadence says,
    and the closing evaluation, row and save. A loop has ``cadence``, ``evaluations``,
    ``reporter``, ``evaluate``, ``write_row``, ``save_checkpoint`` and ``save_when_due``."""

    def report_when_due(self, frames: int) -> None:
        """Evaluate, write a metrics row and save a checkpoint, each when due at ``frames``."""
        due = self.cadence.due(frames)
        last_eval = self.evaluate() if due.evaluate else {}
        if due.log and self.evaluations.solved is None:  # solved: the closing row is next
            self.write_row(last_eval)
        else:
            self.reporter.hold(last_eval)
        if due.checkpoint:
            self.save_when_due()

    def renew_collection(self) -> None:
        """After a periodic checkpoint, ordered collection (``deterministic=true``) starts anew where a run
        resumed from that checkpoint starts: a collector seeded for these frames."""
        if self.collection.ordered:
            self.resume_point = self.frames
            self.collection.renew(self.frames)

    def save_interrupted(self) -> None:
        """Save the run where a signal stopped it; ordered collection (``deterministic=true``) keeps
        the checkpoint before instead, if there is one: a run resumed there repeats this one exactly."""
        if self.collection.ordered and self.resume_point is not None:
            log.warning(
                "deterministic=true: checkpoints/latest.pt stays the one at %d frames, from which a resumed run "
                "repeats this one exactly",
                self.resume_point,
            )
            return
        self.save_checkpoint()

    def finish(self) -> dict[str, float]:
        """The closing evaluation (unless one just solved the run), row and checkpoint; the row."""
        last_eval = self.evaluations.solved or self.evaluate(closing=True)  # the one that solved is the last
        final = self.write_row(last_eval, closing=True)
        final["eval/best_return"] = self.evaluations.best if last_eval else float("nan")
        self.save_checkpoint()
        return final


class OffPolicyLoop(Loop):
    """``collector.start()`` fills the buffer in the background; the learner samples
    ``[N, T]`` batches at the configured update-to-data ratio, pushes weights every
    ``loop.weight_sync_every`` updates, and pauses collection while it is behind."""

    def __init__(self, pipe: Pipeline, parts: RunParts, settings: LoopSettings, total_frames: int):
        """A run of ``pipe`` (from its checkpoint's counters, ``pipe.resumed``, if resumed) to ``total_frames``."""
        start = pipe.resumed or LoopState()
        self.resume_point = pipe.resumed.frames if pipe.resumed is not None else None  # where latest.pt resumes
        self.settings, self.algo, self.audit = settings, pipe.algo, parts.audit
        self.sequences, self.exploration = pipe.sequences, pipe.exploration
        self.buffer = pipe.buffer
        self.frames = self.buffer.write_count  # stored (a resumed buffer holds its frames)
        self.episodes = StoredEpisodeStats(self.buffer, start.episodes)
        self.samples = MaskTally("sample")
        self.train_stats: dict[str, float] = {}
        self.timings = {"sample": 0.0, "update": 0.0}
        self.collection = collection_of(pipe, settings, self.buffer)
        self.evaluations = Evaluations(parts.evaluate, pipe.evaluated, settings.stop_at_return, start.best_eval)
        self.save_latest = parts.checkpoint or no_checkpoint
        self.save_best = parts.keep_best or no_checkpoint
        self.reporter = reporter_of(pipe, parts, self.frames, start)
        self.cadence = Cadence(settings, total_frames, self.frames, evaluates=parts.evaluate is not None)

    def run(self) -> dict[str, float]:
        """Train until ``total_frames`` (or ``loop.time_limit_s``, or an evaluation at
        ``loop.stop_at_return``); return the final metrics row."""
        try:
            with self.collection.running(self.stored()), self.reporter.status_line():
                while self.step():
                    pass
        except RunInterrupted:  # signals wait for updates: the learner is whole, collection has stopped
            self.save_interrupted()
            raise
        self.frames = self.buffer.write_count  # all of it: no worker writes any more
        if self.audit is not None:
            self.audit.check_buffer(self.buffer)
        return self.finish()

    def step(self) -> bool:
        """Collect (workers write in the background; ordered: one rollout, here), learn at the ratio,
        read the stored episodes, then evaluate, report and save when due; False once the run is over."""
        try:
            if self.collection.ordered:  # a batch of frames, then the updates it pays for, then the end?
                self.collection.collect()
                frames = self.collected()
                self.learn()
                if self.cadence.over(frames) or self.evaluations.solved is not None:
                    return False
            else:
                frames = self.collected()
                if self.cadence.over(frames) or self.evaluations.solved is not None:
                    return False
                self.learn()
            self.reporter.status(frames)
            if self.episodes.due():  # before the storage wraps past them
                with self.collection.waiting_on_buffer("reading the stored episodes waited on the replay buffer"):
                    self.episodes.read()
            self.report_when_due(frames)
        except CollectorFailed as failure:  # a worker died, perhaps holding the buffer's lock
            self.collection.restart(failure, self.stored)
        return True

    def collected(self) -> int:
        """The frames stored so far; epsilon anneals with them, and the collector is checked."""
        frames = self.buffer.write_count
        if frames != self.frames and self.exploration is not None:
            self.exploration.step(frames - self.frames)
        self.frames = frames
        self.collection.check(frames)
        return frames

    def learn(self) -> None:
        """The updates due at the ratio: none while ahead of it (wait for data), with
        collection paused while far behind (``loop.max_update_lag``), else one."""
        s, collection = self.settings, self.collection
        behind = self.updates_due() - self.algo.updates
        if collection.ordered:  # all of them, collection waiting
            while self.frames >= s.warmup_frames and self.algo.updates < self.updates_due():
                self.update()
        elif self.frames < s.warmup_frames or behind <= 0:
            time.sleep(0.005)
        elif collection.can_pause and s.max_update_lag is not None and behind > s.max_update_lag:
            with collection.paused():
                while self.algo.updates < self.updates_due():
                    self.update()
        else:
            self.update()

    def updates_due(self) -> float:
        return (self.buffer.write_count - self.settings.warmup_frames) * self.settings.updates_per_frame

    def update(self) -> None:
        """One sampled batch, one gradient update, every K updates a weight push, then what the
        update writes back into the buffer (priorities, stored states). Each wait is limited by
        ``loop.stall_timeout_s``. A signal waits for the update and its push, never for the
        buffer's write lock (a worker killed while writing never releases it): the buffer is
        waited on outside ``critical()``, where a dead worker or a signal ends the wait."""
        t0 = time.monotonic()
        with self.collection.waiting_on_buffer("an update waited on the replay buffer"):
            batch = self.sequences.sample()
        if self.audit is not None:
            self.audit.check_batch(batch)
        self.samples.add(batch, self.collection.policy_version)
        t1 = time.monotonic()
        with self.collection.waiting_on_buffer("an update waited on a weight push", learning=True), critical():
            self.train_stats = learnt_from(self.algo, batch)
            if self.algo.updates % self.settings.weight_sync_every == 0:
                self.collection.push_weights()
        with self.collection.waiting_on_buffer("an update's priorities waited on the replay buffer"):
            self.sequences.update_priority(batch)
        self.timings["sample"] += t1 - t0
        self.timings["update"] += time.monotonic() - t1

    def stored(self) -> tuple[int, int]:
        """The frames and episodes stored so far (the collector handed them over)."""
        self.episodes.read()  # the episodes stored, exactly
        return self.buffer.write_count, self.episodes.episodes

    def evaluate(self, closing: bool = False) -> dict[str, float]:
        """An evaluation (collection paused meanwhile, but for the ``closing`` one); best.pt at a new best."""
        stats = self.evaluations.run(self.frames, None if closing else self.collection.paused(), closing)
        if self.evaluations.improved:
            self.save_best(self.saved())
        return stats

    def write_row(self, values: dict[str, float], closing: bool = False) -> dict[str, float]:
        """A metrics row: ``values`` (an evaluation), the stored episodes, the sampled batches,
        the buffer, and the columns every loop has."""
        frames, updates = self.frames, self.algo.updates
        with self.collection.waiting_on_buffer("a metrics row waited on the replay buffer"):  # both read under the lock
            episodes, stored = self.episodes.update(), buffer_stats(self.buffer)
        own = {
            **episodes,
            **self.samples.stats(),
            "train/updates_per_frame": updates / max(1, frames - self.settings.warmup_frames),
            **({"collect/epsilon": float(self.exploration.eps)} if self.exploration is not None else {}),
            **stored,
            "time/sample_ms": 1000 * self.timings["sample"] / max(1, updates),
        }
        timings = {**self.timings, "eval": self.evaluations.seconds}
        handed_over = (frames, self.episodes.episodes) if closing else None
        paused = {"paused": self.collection.paused_s}  # while the learner updates: not apart from it
        row = self.reporter.row(frames, {**values, **own}, self.train_stats, timings, handed_over, paused)
        self.reporter.histogram("episode/lengths", self.episodes.lengths, frames)
        return row

    def saved(self) -> LoopState:
        """The loop's counters, as a checkpoint saves them."""
        frames, episodes = self.buffer.write_count, self.episodes.episodes
        return LoopState(
            frames, episodes, *self.evaluations.saved(), self.cadence.total_frames, *self.reporter.stepped()
        )

    def save_checkpoint(self) -> None:
        """Save the run. The buffer is saved under its write lock: first wait (limited) until
        the lock is free; collection is paused or over, so it stays free for the save, however long."""
        with self.collection.waiting_on_buffer("a checkpoint waited on the replay buffer"), buffer_locked(self.buffer):
            pass
        self.save_latest(self.saved())

    def save_when_due(self) -> None:
        with self.collection.paused():  # the buffer it saves holds still
            self.save_checkpoint()
        self.renew_collection()


class EpisodicLoop(Loop):
    """On-policy, episodic: the collector yields ``trajs_per_batch`` complete episodes
    of the current policy; each batch is learnt from at once (``algo.update``), and
    the new weights reach the collector before the next one."""

    def __init__(self, pipe: Pipeline, parts: RunParts, settings: LoopSettings, total_frames: int):
        """A run of ``pipe`` (from its checkpoint's counters, ``pipe.resumed``, if resumed) to ``total_frames``;
        ``pipe.strict_episodes``: learn only from episodes of the current weights, this many at a time
        (``algo.on_policy=strict``; ``CurrentPolicyOnly``)."""
        start = pipe.resumed or LoopState()
        self.resume_point = pipe.resumed.frames if pipe.resumed is not None else None  # where latest.pt resumes
        self.algo, self.audit = pipe.algo, parts.audit
        self.frames, self.episodes = start.frames, start.episodes  # learnt from
        self.strict = CurrentPolicyOnly(pipe.strict_episodes) if pipe.strict_episodes is not None else None
        self.batches = MaskTally("batch")
        self.lengths: list[torch.Tensor] = []  # of the episodes learnt from since the last row
        self.episode_stats: dict[str, float] = {}  # of the last batch
        self.train_stats: dict[str, float] = {}
        self.timings = {"collect": 0.0, "update": 0.0}
        self.collection = collection_of(pipe, settings)
        self.evaluations = Evaluations(parts.evaluate, pipe.evaluated, settings.stop_at_return, start.best_eval)
        self.save_latest = parts.checkpoint or no_checkpoint
        self.save_best = parts.keep_best or no_checkpoint
        self.reporter = reporter_of(pipe, parts, self.frames, start)
        self.cadence = Cadence(settings, total_frames, self.frames, evaluates=parts.evaluate is not None)

    def run(self) -> dict[str, float]:
        """Train until ``total_frames`` (or ``loop.time_limit_s``, or an evaluation at
        ``loop.stop_at_return``); return the final metrics row."""
        try:
            with self.collection.running(self.handed_over()), self.reporter.status_line():
                for batch in self.collected():  # complete episodes of this policy
                    self.learn(batch)
                    if self.cadence.over(self.frames):
                        break
                    self.report_when_due(self.frames)
                    if self.evaluations.solved is not None:  # that evaluation reached loop.stop_at_return
                        break
        except RunInterrupted:  # signals wait for updates: the learner is whole, collection has stopped
            self.save_interrupted()
            raise
        return self.finish()

    def collected(self) -> Iterator[TensorDictBase]:
        """The batches to learn from, ``[N, T]``, until the collector stops: without episodes an
        environment fault ended or (strict) a weight push cut; a failed worker's collector replaced."""
        t0 = time.monotonic()
        while True:
            try:
                batch = self.collection.next_batch()
            except CollectorFailed as failure:  # a worker died: a new collector, if allowed
                self.collection.restart(failure, self.handed_over)
                if self.strict is not None:  # a replaced collector's: counted lost with its in flight
                    self.strict.forget()
                continue
            if batch is None:  # the collector has stopped
                return
            batch = without_faulted(batch)
            if batch is not None and self.strict is not None:
                batch = self.strict(batch, self.collection.policy_version)
            if batch is None:
                continue
            if batch.batch_dims == 1:  # traj_format="cat": episodes one after the other
                batch = as_sequences(batch, batch.get("is_init"))
            self.timings["collect"] += time.monotonic() - t0
            yield batch
            t0 = time.monotonic()

    def learn(self, batch: TensorDictBase) -> None:
        """Learn from ``batch`` at once, then push the weights; counted and audited."""
        if self.audit is not None:
            self.audit.check_batch(batch, whole_episodes=True)
        self.batches.add(batch, self.collection.policy_version)
        self.lengths.append(batch.get(MASK_KEY).sum(-1))
        self.frames += int(batch.get(MASK_KEY).sum())
        self.episodes += batch.shape[0]
        t1 = time.monotonic()
        with critical():  # learn, then push: a signal waits for both
            self.train_stats = learnt_from(self.algo, batch)
            self.collection.push_weights()
        self.episode_stats = episode_stats(batch)
        self.timings["update"] += time.monotonic() - t1
        self.reporter.status(self.frames, self.episode_stats["episode/return"])

    def handed_over(self) -> tuple[int, int]:
        """The frames and episodes learnt from, or (``algo.on_policy=strict``) dropped for a weight push."""
        if self.strict is None:
            return self.frames, self.episodes
        return self.frames + self.strict.dropped_frames, self.episodes + self.strict.dropped_episodes

    def evaluate(self, closing: bool = False) -> dict[str, float]:
        """An evaluation (collection waits between batches meanwhile); best.pt at a new best."""
        stats = self.evaluations.run(self.frames, closing=closing)
        if self.evaluations.improved:
            self.save_best(self.saved())
        return stats

    def write_row(self, values: dict[str, float], closing: bool = False) -> dict[str, float]:
        """A metrics row: the last batch's episodes, ``values`` (an evaluation), the batches'
        masks, and the columns every loop has."""
        own = {
            **self.batches.stats(),
            **(self.strict.stats() if self.strict is not None else {}),
            "episode/completed": float(self.episodes),
        }
        timings = {**self.timings, "eval": self.evaluations.seconds}
        handed_over = self.handed_over() if closing else None
        row = self.reporter.row(
            self.frames, {**self.episode_stats, **values, **own}, self.train_stats, timings, handed_over
        )
        if self.lengths:
            self.reporter.histogram("episode/lengths", torch.cat(self.lengths), self.frames)
            self.lengths = []
        return row

    def saved(self) -> LoopState:
        """The loop's counters, as a checkpoint saves them."""
        return LoopState(
            self.frames, self.episodes, *self.evaluations.saved(), self.cadence.total_frames, *self.reporter.stepped()
        )

    def save_checkpoint(self) -> None:
        self.save_latest(self.saved())

    def save_when_due(self) -> None:
        self.save_checkpoint()
        self.renew_collection()


class CurrentPolicyOnly:
    """``algo.on_policy=strict``: of each batch, only the episodes the current weights
    began, handed on ``episodes`` at a time; those a weight push cut are dropped (counted)."""

    def __init__(self, episodes: int):
        self.episodes = episodes
        self.pending: list[TensorDictBase] = []  # episodes of the current weights, not yet handed on
        self.pending_episodes = 0
        self.dropped_episodes = self.dropped_frames = 0

    def __call__(self, batch: TensorDictBase, version: int) -> TensorDictBase | None:
        """The episodes of ``batch`` that weights older than ``version`` did not begin, held
        until ``episodes`` are there: then all of them, flat (None before)."""
        flat = batch if batch.batch_dims == 1 else batch[batch.get(MASK_KEY)].exclude(MASK_KEY)
        kept, episodes, frames = without_stale(flat, version)
        self.dropped_episodes += episodes
        self.dropped_frames += frames
        if kept is not None:
            self.pending.append(kept)
            self.pending_episodes += int(kept.get(TRAJ_KEY).unique().numel())
        if self.pending_episodes < self.episodes:
            return None
        batch, self.pending, self.pending_episodes = torch.cat(self.pending), [], 0
        return batch

    def forget(self) -> None:
        """Drop the episodes held (a replaced collector's: counted lost with what it had in flight)."""
        self.pending, self.pending_episodes = [], 0

    def stats(self) -> dict[str, float]:
        return {
            "batch/episodes_dropped_stale": float(self.dropped_episodes),
            "batch/frames_dropped_stale": float(self.dropped_frames),
        }
