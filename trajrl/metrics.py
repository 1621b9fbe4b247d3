"""Run statistics: episodes read from what the collector stored, and a metrics log
(``metrics.csv`` in the run directory, plus any TorchRL loggers), frames as the step axis."""
from __future__ import annotations

import csv
import math
from pathlib import Path

import torch
from torchrl.data import ReplayBuffer
from torchrl.record.loggers import Logger


class StoredEpisodeStats:
    """Reads the steps written to the buffer since the last call and summarises the
    episodes they complete (returns, lengths) and how the actions were chosen."""

    def __init__(self, buffer: ReplayBuffer):
        self.buffer = buffer
        self.seen = 0
        self.episodes = 0

    def update(self) -> dict[str, float]:
        written = self.buffer.write_count
        capacity = self.buffer.storage.max_size
        new = min(written - self.seen, capacity)
        if new <= 0:
            return {}
        index = torch.arange(written - new, written) % capacity
        self.seen = written
        steps = self.buffer.storage[index]
        done = steps.get(("next", "done")).reshape(-1)
        stats: dict[str, float] = {}
        if done.any():
            returns = steps.get(("next", "episode_reward")).reshape(-1)[done].float()
            lengths = steps.get(("next", "step_count")).reshape(-1)[done].float()
            self.episodes += int(done.sum())
            stats.update({
                "episode/return": returns.mean().item(), "episode/return_min": returns.min().item(),
                "episode/return_max": returns.max().item(), "episode/length": lengths.mean().item(),
                "episode/completed": float(self.episodes),
            })
        if "action_value" in steps.keys():
            greedy = steps.get("action_value").argmax(-1).reshape(-1)
            stats["collect/random_action_frac"] = (steps.get("action").reshape(-1) != greedy).float().mean().item()
        return stats


class MetricsLog:
    """Rows of metrics keyed by frames; rewrites ``metrics.csv`` whole (columns may grow)."""

    def __init__(self, run_dir: Path | None, loggers: list[Logger] = ()):
        self.path = Path(run_dir) / "metrics.csv" if run_dir else None
        self.loggers = list(loggers)
        self.rows: list[dict[str, float]] = []

    def log(self, frames: int, values: dict[str, float]) -> dict[str, float]:
        row = {"frames": frames, **{k: v for k, v in values.items() if v is not None and not math.isnan(v)}}
        self.rows.append(row)
        for logger in self.loggers:
            for name, value in row.items():
                if name != "frames":
                    logger.log_scalar(name, value, step=frames)
        if self.path is not None:
            columns = list(dict.fromkeys(k for r in self.rows for k in r))
            tmp = self.path.with_suffix(".csv.tmp")
            with open(tmp, "w", newline="") as f:
                writer = csv.DictWriter(f, fieldnames=columns)
                writer.writeheader()
                writer.writerows(self.rows)
            tmp.replace(self.path)
        return row
