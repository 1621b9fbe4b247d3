"""The training loops. They run objects built by the factory and never read the config."""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable

from tensordict import TensorDict
from torchrl.collectors import BaseCollector

from trajrl.metrics import MetricsLog, StoredEpisodeStats


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


class CollectorStalled(RuntimeError):
    """The collector wrote nothing for too long, or its background work died."""


def collector_error(collector: BaseCollector) -> BaseException | None:
    """The error a background collector hit, if TorchRL kept one (it does not re-raise it)."""
    for attribute in ("_replay_error",):
        error = getattr(collector, attribute, None)
        if error is not None:
            return error
    thread = getattr(collector, "_thread", None)
    if thread is not None and not thread.is_alive() and not getattr(collector, "_stop", False):
        return CollectorStalled("the collector's background thread stopped on its own")
    procs = getattr(collector, "procs", None)
    if procs:
        for index, proc in enumerate(procs):
            if not proc.is_alive():
                return CollectorStalled(f"collector worker {index} died (exit code {proc.exitcode})")
    return None


class OffPolicyLoop:
    """collector.start() fills the buffer in the background; the learner samples
    ``[N, T]`` batches at the configured update-to-data ratio, pushes weights every
    K updates and evaluates every E frames; the collector is shut down at the end
    or on any error."""

    def __init__(self, collector, sequences, algo, behaviour_policy, exploration, evaluate: Callable[[], dict] | None,
                 log: MetricsLog, settings: OffPolicySettings, echo: Callable[[str], None] = print):
        self.collector, self.sequences, self.algo = collector, sequences, algo
        self.behaviour_policy, self.exploration, self.evaluate = behaviour_policy, exploration, evaluate
        self.log, self.settings, self.echo = log, settings, echo
        self.buffer = sequences.buffer
        self.episodes = StoredEpisodeStats(self.buffer)
        # The live parameters and buffers (epsilon included) of the behaviour policy.
        self.weights = TensorDict.from_module(behaviour_policy)
        # TorchRL's single-process Collector cannot pause; the others can.
        self.can_pause = type(collector).pause is not BaseCollector.pause

    def run(self) -> dict[str, float]:
        s = self.settings
        start = time.monotonic()
        updates, frames_seen = 0, 0
        next_log, next_eval = s.log_every_frames, (s.eval_every_frames or None)
        last_write, last_frames = time.monotonic(), 0
        train_stats: dict[str, float] = {}
        best_eval = float("-inf")
        last_eval: dict[str, float] = {}
        timings = {"sample": 0.0, "update": 0.0, "eval": 0.0, "paused": 0.0}
        self.collector.start()
        try:
            while True:
                frames = self.buffer.write_count
                now = time.monotonic()
                if frames != last_frames:
                    last_write, last_frames = now, frames
                elif now - last_write > s.stall_timeout_s:
                    raise CollectorStalled(f"no frame stored for {s.stall_timeout_s:.0f} s (loop.stall_timeout_s)")
                error = collector_error(self.collector)
                if error is not None:
                    raise CollectorStalled(f"collection failed: {error}") from error
                if frames > frames_seen:
                    self.exploration.step(frames - frames_seen)
                    frames_seen = frames
                if frames >= s.total_frames:
                    break

                due = (frames - s.warmup_frames) * s.updates_per_frame
                if frames >= s.warmup_frames and updates < due:
                    if self.can_pause and s.max_update_lag is not None and due - updates > s.max_update_lag:
                        # Hold the ratio: collection waits while the learner catches up.
                        t0 = time.monotonic()
                        with self.collector.pause():
                            timings["paused"] += time.monotonic() - t0
                            while updates < (self.buffer.write_count - s.warmup_frames) * s.updates_per_frame:
                                train_stats = self._update(timings)
                                updates += 1
                                if updates % s.weight_sync_every == 0:
                                    self.collector.update_policy_weights_(self.weights)
                        last_write = time.monotonic()
                    else:
                        train_stats = self._update(timings)
                        updates += 1
                        if updates % s.weight_sync_every == 0:
                            self.collector.update_policy_weights_(self.weights)
                else:
                    time.sleep(0.005)

                if next_eval is not None and frames >= next_eval and self.evaluate is not None:
                    next_eval += s.eval_every_frames
                    t0 = time.monotonic()
                    last_eval = {f"eval/{k}": v for k, v in self.evaluate().items()}
                    timings["eval"] += time.monotonic() - t0
                    best_eval = max(best_eval, last_eval["eval/return"])
                if frames >= next_log:
                    next_log = (frames // s.log_every_frames + 1) * s.log_every_frames
                    self._log(frames, updates, start, train_stats, last_eval, timings)
                    last_eval = {}
        finally:
            self.collector.async_shutdown()

        frames = self.buffer.write_count
        if self.evaluate is not None:
            last_eval = {f"eval/{k}": v for k, v in self.evaluate().items()}
            best_eval = max(best_eval, last_eval["eval/return"])
        final = self._log(frames, updates, start, train_stats, last_eval, timings)
        final["eval/best_return"] = best_eval if last_eval else float("nan")
        return final

    def _update(self, timings: dict[str, float]) -> dict[str, float]:
        t0 = time.monotonic()
        batch = self.sequences.sample()
        t1 = time.monotonic()
        stats = self.algo.update(batch)
        self.sequences.update_priority(batch)
        timings["sample"] += t1 - t0
        timings["update"] += time.monotonic() - t1
        return stats

    def _log(self, frames, updates, start, train_stats, eval_stats, timings) -> dict[str, float]:
        elapsed = time.monotonic() - start
        row = {
            **self.episodes.update(),
            **{f"train/{k}": v for k, v in train_stats.items()},
            **eval_stats,
            "train/updates": float(updates),
            "train/updates_per_frame": updates / max(1, frames - self.settings.warmup_frames),
            "collect/epsilon": float(self.exploration.eps),
            "buffer/frames": float(len(self.buffer)),
            "time/elapsed_s": elapsed,
            "time/frames_per_s": frames / max(elapsed, 1e-9),
            **{f"time/{k}_s": v for k, v in timings.items()},
        }
        row = self.log.log(frames, row)
        parts = [f"frames {frames:>9,}", f"{row['time/frames_per_s']:7.0f} fps", f"updates {updates:>7,}"]
        if "episode/return" in row:
            parts.append(f"train return {row['episode/return']:7.1f}")
        if "eval/return" in row:
            parts.append(f"eval return {row['eval/return']:7.1f}")
        if "train/loss" in row:
            parts.append(f"loss {row['train/loss']:.4f}")
        parts.append(f"eps {row['collect/epsilon']:.2f}")
        self.echo(" | ".join(parts))
        return row
