"""Run statistics, namespaced, with frames as the step axis, and the metrics log
(``metrics.csv`` in the run directory, plus any TorchRL loggers).

- ``episode/``: episodes the collector stored (or yielded): return, length, count;
- ``collect/``: what each worker's environments stepped (``collect/worker<i>/...``);
- ``batch/`` and ``sample/``: mask statistics of collector batches and of the
  sampled training batches (valid and padding fractions, sequence lengths), and
  how many policy versions old the sampled steps are (``sample/staleness_*``), and
  the share of sampled rows hindsight relabelled (``sample/relabelled_frac``);
- ``buffer/``: what is stored; ``time/`` and ``train/``: throughput and learning.
"""

from __future__ import annotations

import contextlib
import csv
import logging
import math
import time
from collections.abc import Iterator
from pathlib import Path

import torch
from tensordict import TensorDictBase
from torchrl.data import ReplayBuffer
from torchrl.record.loggers import Logger

from trajrl.base.keys import MASK_KEY, RELABELLED_KEY, TRAJ_KEY, VERSION_KEY
from trajrl.collect.faults import NEXT_FAULT
from trajrl.replay.episodes import buffer_locked, find_episodes
from trajrl.replay.lanes import LaneWriter, in_time_order

log = logging.getLogger("trajrl")


def length_stats(lengths: torch.Tensor, prefix: str) -> dict[str, float]:
    """Mean, min, max and quartiles of episode lengths."""
    lengths = lengths.float()
    q25, q50, q75 = torch.quantile(lengths, torch.tensor([0.25, 0.5, 0.75])).tolist()
    return {
        f"{prefix}/length": lengths.mean().item(),
        f"{prefix}/length_min": lengths.min().item(),
        f"{prefix}/length_max": lengths.max().item(),
        f"{prefix}/length_p25": q25,
        f"{prefix}/length_p50": q50,
        f"{prefix}/length_p75": q75,
    }


def return_stats(returns: torch.Tensor, prefix: str) -> dict[str, float]:
    returns = returns.float()
    return {
        f"{prefix}/return": returns.mean().item(),
        f"{prefix}/return_min": returns.min().item(),
        f"{prefix}/return_max": returns.max().item(),
    }


class StoredEpisodeStats:
    """The episodes written to the buffer: ``read()`` takes in the steps written since
    it last read (call it before the storage wraps past them: ``due()``), ``update()``
    summarises those read since the last summary (returns, lengths). A resumed run
    starts after what its buffer holds, with its count."""

    def __init__(self, buffer: ReplayBuffer, episodes: int = 0):
        self.buffer, self.writer = buffer, buffer.writer
        with buffer_locked(buffer):
            self.seen = self.writer.written_since(None)[1]
        self.episodes = episodes
        self.lengths = torch.zeros(0)  # lengths of the episodes completed since the last summary
        self._lengths: list[torch.Tensor] = []
        self._returns: list[torch.Tensor] = []

    def due(self) -> bool:
        """Half a lane written since the last read: read now, or wrap-around loses steps."""
        return self.writer.behind(self.seen) >= self.writer.lane_len // 2

    def read(self) -> None:
        with buffer_locked(self.buffer):  # the steps counted as written are all stored
            if self.writer.behind(self.seen) <= 0:
                return
            index, self.seen = self.writer.written_since(self.seen)
            steps = self.buffer.storage.get(index)
        done = steps.get(("next", "done")).reshape(-1)
        fault = steps.get(NEXT_FAULT, None)
        if fault is not None:  # fixed frames: an episode a fault cut is stored, but it did not end
            done = done & ~fault.reshape(-1)
        if done.any():
            # An episode's last step: its step count is the length less one, its running
            # return before the step plus the step's reward is the return.
            self._lengths.append(steps.get("step_count").reshape(-1)[done].float() + 1)
            self._returns.append((steps.get("episode_reward") + steps.get(("next", "reward"))).reshape(-1)[done])
            self.episodes += int(done.sum())

    def update(self) -> dict[str, float]:
        self.read()
        stats: dict[str, float] = {}
        self.lengths = torch.cat(self._lengths) if self._lengths else torch.zeros(0)
        if self._lengths:
            stats.update(return_stats(torch.cat(self._returns), "episode"))
            stats.update(length_stats(self.lengths, "episode"))
        stats["episode/completed"] = float(self.episodes)
        self._lengths, self._returns = [], []
        return stats


def buffer_stats(buffer: ReplayBuffer) -> dict[str, float]:
    """Frames and complete episodes stored, and how full the storage is."""
    storage = buffer.storage
    with buffer_locked(buffer):  # a slice of the storage is a view: count before any write
        size, written = buffer.writer.stored, buffer.write_count
        stats = {
            "buffer/frames": float(size),
            "buffer/fill_frac": size / storage.max_size,
            "buffer/frames_written": float(written),
        }
        if size:
            stored = in_time_order(buffer)[0] if isinstance(buffer.writer, LaneWriter) else storage[:size]
            starts, _ = find_episodes(stored.get(TRAJ_KEY), stored.get("is_init"), stored.get(("next", "done")))
            stats["buffer/episodes"] = float(starts.numel())
    return stats


def episode_stats(batch: TensorDictBase) -> dict[str, float]:
    """Episode statistics of a ``[N, T]`` batch of complete episodes (episodic loop)."""
    lengths = batch.get(MASK_KEY).sum(-1)
    returns = batch.get(("next", "episode_reward")).reshape(batch.shape).gather(1, (lengths - 1).unsqueeze(-1))
    return {**return_stats(returns, "episode"), **length_stats(lengths, "episode")}


class MaskTally:
    """Mask statistics of ``[N, T]`` batches since the last ``stats()``: valid and
    padding fractions over all their cells, the mean and the largest sequence length,
    and (with ``version``) how many policy versions old their valid steps are."""

    def __init__(self, prefix: str):
        self.prefix = prefix
        self._reset()

    def _reset(self) -> None:
        self.batches = self.rows = self.cells = self.valid = self.max_length = 0
        self.stale_sum, self.stale_max, self.stale_steps = 0, 0, 0
        self.relabelled: int | None = None  # rows hindsight relabelled (None: no batch was drawn with hindsight)

    def add(self, batch: TensorDictBase, version: int | None = None) -> None:
        mask = batch.get(MASK_KEY)
        lengths = mask.sum(-1)
        self.batches += 1
        self.rows += mask.shape[0]
        self.cells += mask.numel()
        self.valid += int(lengths.sum())
        self.max_length = max(self.max_length, int(lengths.max()))
        if RELABELLED_KEY in batch.keys(include_nested=True):
            self.relabelled = (self.relabelled or 0) + int(batch.get(RELABELLED_KEY).reshape(mask.shape)[:, 0].sum())
        if version is not None and VERSION_KEY in batch.keys():
            stale = version - batch.get(VERSION_KEY).reshape(mask.shape)[mask]
            self.stale_sum += int(stale.sum())
            self.stale_steps += stale.numel()
            self.stale_max = max(self.stale_max, int(stale.max()))

    def stats(self) -> dict[str, float]:
        if not self.batches:
            return {}
        p = self.prefix
        stats = {
            f"{p}/valid_frac": self.valid / self.cells,
            f"{p}/padding_frac": 1 - self.valid / self.cells,
            f"{p}/length": self.valid / self.rows,
            f"{p}/length_max": float(self.max_length),
            f"{p}/rows": self.rows / self.batches,
            f"{p}/width": self.cells / self.rows,
        }
        if self.relabelled is not None:
            stats[f"{p}/relabelled_frac"] = self.relabelled / self.rows
        if self.stale_steps:
            stats[f"{p}/staleness_mean"] = self.stale_sum / self.stale_steps
            stats[f"{p}/staleness_max"] = float(self.stale_max)
        self._reset()
        return stats


class WorkerStats:
    """Frames the environments stepped (in all, and per second since the last call)
    and, per worker (environment slot), frames, episodes ended and the mean return
    of those ended since the last call, and the share of actions that were not the
    greedy one, from ``WorkerCounters``. A resumed run
    starts from the frames and episodes its checkpoint had stored (``start_*``)."""

    def __init__(self, counters, start_frames: int = 0, start_episodes: int = 0):
        self.counters, self.start_frames, self.start_episodes = counters, start_frames, start_episodes
        self.previous, self.previous_time = counters.snapshot(), time.monotonic()

    def update(self) -> dict[str, float]:
        now, now_time = self.counters.snapshot(), time.monotonic()
        delta, self.previous = now - self.previous, now
        dt, self.previous_time = max(now_time - self.previous_time, 1e-9), now_time
        c = type(self.counters)
        stats = {
            "collect/frames_stepped": self.start_frames + float(now[:, c.FRAMES].sum()),
            "collect/frames_per_s": float(delta[:, c.FRAMES].sum()) / dt,
        }
        stats.update(self.faults(now))
        if now[:, c.NOT_GREEDY].sum() > 0 and delta[:, c.FRAMES].sum() > 0:  # a Q-learning policy explores
            stats["collect/random_action_frac"] = float(delta[:, c.NOT_GREEDY].sum() / delta[:, c.FRAMES].sum())
        if now.shape[0] > 1:
            for worker, (row, total) in enumerate(zip(delta, now)):
                stats[f"collect/worker{worker}/frames"] = float(total[c.FRAMES])
                stats[f"collect/worker{worker}/episodes"] = float(total[c.ENDED])
                if row[c.ENDED] > 0:
                    stats[f"collect/worker{worker}/return"] = float(row[c.RETURN_SUM] / row[c.ENDED])
        return stats

    def faults(self, now: torch.Tensor) -> dict[str, float]:
        """Environments rebuilt after they raised, collectors started again after a worker
        died, episodes dropped for a bad step (``collector.bad_steps=drop``: marked as faults, not
        rebuilt), and the frames all of them lost (dropped episodes, episodes in flight)."""
        c, counters = type(self.counters), self.counters
        dropped = len(counters.fault_log.dropped_bad_steps())
        return {
            "collect/env_restarts": float(now[:, c.ENV_RESTARTS].sum()) - dropped,
            "collect/episodes_dropped_bad_steps": float(dropped),
            "collect/worker_restarts": float(counters.worker_restarts),
            "collect/frames_lost_to_faults": float(now[:, c.FRAMES_LOST].sum() + counters.frames_lost_to_restarts),
            "collect/episodes_lost_to_faults": float(now[:, c.ENV_RESTARTS].sum() + counters.episodes_lost_to_restarts),
        }

    def stepped(self) -> tuple[int, int]:
        """The frames stepped and the episodes begun, in all (a resumed run's from its start)."""
        now, c = self.counters.snapshot(), type(self.counters)
        begun = int((now[:, c.ENDED] + now[:, c.UNDER_WAY]).sum())
        return self.start_frames + int(now[:, c.FRAMES].sum()), self.start_episodes + begun

    def in_flight(self, frames_stored: int, episodes_stored: int) -> dict[str, float]:
        """Once collection has stopped: what the environments stepped but never
        stored (episodes unfinished, or finished but not yet handed over), less what
        faults dropped: stepped = stored + in flight + lost to faults."""
        now = self.counters.snapshot()
        c = type(self.counters)
        begun = float((now[:, c.ENDED] + now[:, c.UNDER_WAY]).sum())
        lost = float(now[:, c.FRAMES_LOST].sum() + self.counters.frames_lost_to_restarts)
        return {
            "buffer/frames_in_flight_dropped": self.start_frames + float(now[:, c.FRAMES].sum()) - lost - frames_stored,
            "buffer/episodes_in_flight_dropped": self.start_episodes
            + begun
            - self.counters.episodes_lost_to_restarts
            - episodes_stored,
        }


class Rates:
    """Frames and updates per second since the last call."""

    def __init__(self, frames: int = 0, updates: int = 0) -> None:
        self.last = (time.monotonic(), frames, updates)

    def update(self, frames: int, updates: int) -> dict[str, float]:
        now = time.monotonic()
        t, f, u = self.last
        self.last = (now, frames, updates)
        dt = max(now - t, 1e-9)
        return {"time/frames_per_s_recent": (frames - f) / dt, "train/updates_per_s": (updates - u) / dt}


class MetricsLog:
    """Rows of metrics keyed by frames, each metric written once: ``metrics.csv`` (a row
    appended each time; the file is rewritten only when a row brings a new column), and
    the TorchRL loggers (TensorBoard, wandb).

    ``resume_at``: ``(frames, updates)`` of a resumed run's checkpoint: the run keeps the rows
    written before it was saved, those with no more frames and no more updates (a row written
    after it can have its frame count: the learner updates on while no episode arrives); the
    later ones (the stretch the resumed run does again) move to ``metrics_superseded.csv``."""

    def __init__(self, run_dir: Path | None, loggers: list[Logger] = (), resume_at: tuple[int, float] | None = None):
        self.path = Path(run_dir) / "metrics.csv" if run_dir else None
        # the pipeline's own list where it is one: a logger dropped here (``dropped_if_it_fails``) is not closed there
        self.loggers = loggers if isinstance(loggers, list) else list(loggers)
        self.rows: list[dict[str, float]] = []
        self.columns: list[str] = []
        if resume_at is not None and self.path is not None and self.path.exists():
            self.rows = self._keep_until(*resume_at)
            self._rewrite()

    def _keep_until(self, frames: int, updates: float) -> list[dict[str, str]]:
        """The rows written up to ``frames`` and ``updates`` (as written); the later ones are moved aside."""
        with open(self.path, newline="") as f:
            rows = [{k: v for k, v in row.items() if v not in ("", None)} for row in csv.DictReader(f)]

        def later_than_the_checkpoint(row: dict[str, str]) -> bool:
            return float(row["frames"]) > frames or float(row.get("train/updates", 0)) > updates

        later = [row for row in rows if later_than_the_checkpoint(row)]
        if later:
            superseded = self.path.with_name("metrics_superseded.csv")
            new_file = not superseded.exists()
            with open(superseded, "a", newline="") as f:
                writer = csv.DictWriter(
                    f, fieldnames=list(dict.fromkeys(k for r in later for k in r)), extrasaction="ignore"
                )
                if new_file:
                    writer.writeheader()
                writer.writerows(later)
        return [row for row in rows if not later_than_the_checkpoint(row)]

    def hparams(self, values: dict) -> None:
        """The run's settings, once, to the loggers that keep them (TensorBoard's hparams, wandb's config)."""
        for logger in list(self.loggers):
            with self.dropped_if_it_fails(logger, 0):
                logger.log_hparams(values)

    def log(self, frames: int, values: dict[str, float]) -> dict[str, float]:
        row = {"frames": frames, **{k: v for k, v in values.items() if v is not None and not math.isnan(v)}}
        self.rows.append(row)
        for logger in list(self.loggers):
            with self.dropped_if_it_fails(logger, frames):
                for name, value in row.items():
                    if name != "frames":
                        logger.log_scalar(name, value, step=frames)
        if self.path is not None:
            if any(name not in self.columns for name in row):
                self._rewrite()
            else:
                with open(self.path, "a", newline="") as f:
                    csv.DictWriter(f, fieldnames=self.columns).writerow(row)
        return row

    def _rewrite(self) -> None:
        """``metrics.csv`` whole, with every column seen so far (atomically: a temporary file renamed)."""
        self.columns = list(dict.fromkeys(k for r in self.rows for k in r))
        tmp = self.path.with_suffix(".csv.tmp")
        with open(tmp, "w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=self.columns)
            writer.writeheader()
            writer.writerows(self.rows)
        tmp.replace(self.path)

    def histogram(self, name: str, values: torch.Tensor, frames: int) -> None:
        """A histogram (e.g. of episode lengths) for the loggers that draw them
        (TensorBoard, wandb); metrics.csv keeps quartiles instead."""
        if values.numel() == 0:
            return
        for logger in list(self.loggers):
            with self.dropped_if_it_fails(logger, frames):
                try:
                    logger.log_histogram(name, values.numpy(), step=frames, bins=32)
                except NotImplementedError:  # TorchRL's CSV logger
                    pass

    @contextlib.contextmanager
    def dropped_if_it_fails(self, logger: Logger, frames: int) -> Iterator[None]:
        """A logger that raises (its file gone, its disk full, its service down) is a backend lost, not
        the run: the run goes on without it, says so once, and metrics.csv keeps every row."""
        try:
            yield
        except Exception as err:
            self.loggers.remove(logger)
            log.warning(
                "the %s logger failed at %s frames (%s: %s); the run goes on without it, metrics.csv keeps every row",
                type(logger).__name__,
                f"{frames:,}",
                type(err).__name__,
                err,
            )
