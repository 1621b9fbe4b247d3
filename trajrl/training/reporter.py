"""What a run reports as it trains: metrics rows (``metrics.csv`` and the loggers, one
console line each) with the columns every loop has, and the status line between them."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator

import torch

from trajrl.algos.networks import PolicyVersion
from trajrl.collect.counters import WorkerCounters
from trajrl.replay.audit import LiveAudit
from trajrl.training.metrics import MetricsLog, Rates, WorkerStats
from trajrl.training.progress import Progress


def time_split(
    elapsed: float, timings: dict[str, float], alongside: dict[str, float] | None = None
) -> dict[str, float]:
    """Where the learner's wall-clock went: seconds and fractions per activity of ``timings`` (each
    apart from the others), the rest (``wait``) spent waiting for data; ``alongside``: times that
    overlap them (collection paused while the learner updates), reported but not taken from the rest."""
    wait = max(0.0, elapsed - sum(timings.values()))
    split = {**timings, "wait": wait, **(alongside or {})}
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


class Reporter:
    """Writes a run's metrics rows: ``row()`` puts a loop's own columns first, then the ones
    every loop has (what the workers stepped, training, throughput, where the time went,
    the live audit; the closing row adds what was still in flight), logs it and prints its
    line; ``status()`` moves the live status line. Clocks and rates start when it is made,
    from ``start_frames`` (a resumed run's) on."""

    def __init__(
        self,
        log: MetricsLog,
        progress: Progress,
        algo,
        start_frames: int,
        start_episodes: int,
        *,
        version: PolicyVersion | None = None,
        audit: LiveAudit | None = None,
        counters: WorkerCounters | None = None,
        stepped: tuple[int | None, int | None] = (None, None),
    ):
        """``stepped``: the frames and episodes the environments stepped and began before (a resumed
        run's checkpoint's; None: its stored ones)."""
        self.log, self.progress, self.algo = log, progress, algo
        self.version, self.audit = version, audit
        self.start_frames, self.started = start_frames, time.monotonic()
        frames_stepped = start_frames if stepped[0] is None else stepped[0]
        episodes_begun = start_episodes if stepped[1] is None else stepped[1]
        self.workers = WorkerStats(counters, frames_stepped, episodes_begun) if counters is not None else None
        self.rates = Rates(start_frames, int(algo.updates))
        self.held: dict[str, float] = {}  # an evaluation's results, until the next row
        self.recent_return: float | None = None  # the status line's

    def stepped(self) -> tuple[int | None, int | None]:
        """The frames the environments have stepped and the episodes they began, in all (None: not counted)."""
        return self.workers.stepped() if self.workers is not None else (None, None)

    def hold(self, values: dict[str, float]) -> None:
        """Values for the next row (an evaluation made when no row was due)."""
        self.held.update(values)

    def row(
        self,
        frames: int,
        values: dict[str, float],
        train: dict[str, float],
        timings: dict[str, float],
        handed_over: tuple[int, int] | None = None,
        alongside: dict[str, float] | None = None,
    ) -> dict[str, float]:
        """One metrics row at ``frames``: the values held, ``values`` (the loop's own), then
        ``train`` (the last update's statistics, as ``train/...``), the counters, and
        ``timings`` (seconds per activity) as ``time/...``. ``handed_over``: the closing
        row, with the frames and episodes handed over in all."""
        elapsed, updates = time.monotonic() - self.started, int(self.algo.updates)
        values, self.held = {**self.held, **values}, {}
        row = {
            **values,
            **(self.workers.update() if self.workers is not None else {}),
            **{f"train/{k}": v for k, v in train.items()},
            "train/updates": float(updates),
            **({"train/policy_version": float(self.version.version)} if self.version is not None else {}),
            "time/elapsed_s": elapsed,
            "time/frames_per_s": (frames - self.start_frames) / max(elapsed, 1e-9),
            **self.rates.update(frames, updates),
            **time_split(elapsed, timings, alongside),
            **(self.audit.metrics() if self.audit is not None else {}),
            **(self.workers.in_flight(*handed_over) if handed_over is not None and self.workers is not None else {}),
        }
        row = self.log.log(frames, row)
        self.recent_return = row.get("episode/return", self.recent_return)
        self.progress.row(progress_line(frames, row))
        return row

    def histogram(self, name: str, values: torch.Tensor, frames: int) -> None:
        """A histogram (e.g. of episode lengths) for the loggers that draw them."""
        self.log.histogram(name, values, frames)

    def status(self, frames: int, recent_return: float | None = None) -> None:
        """Move the status line to ``frames`` (with the latest training return, if given)."""
        if recent_return is not None:
            self.recent_return = recent_return
        self.progress.status(frames, self.recent_return)

    @contextlib.contextmanager
    def status_line(self) -> Iterator[None]:
        """The status line, cleared on the way out (before any message)."""
        try:
            yield
        finally:
            self.progress.close()
