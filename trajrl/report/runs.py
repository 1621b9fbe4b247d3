"""Finished runs on disk: a run directory, or a multirun directory of them, grouped
by configuration (a multirun's jobs that differ only in ``seed`` are one group)."""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import yaml


@dataclass
class Run:
    path: Path
    overrides: list[str]  # the command-line overrides it ran with
    rows: list[dict[str, float]]  # metrics.csv, one dict per row

    @property
    def seed(self) -> str:
        return next((o.split("=", 1)[1] for o in self.overrides if o.startswith("seed=")), "0")

    @property
    def configuration(self) -> str:
        """The overrides other than the seed (what a group of seeds shares)."""
        rest = [o for o in self.overrides if not o.startswith("seed=") and not o.startswith("hydra.")]
        return " ".join(rest) or "(defaults)"

    def series(self, name: str) -> tuple[np.ndarray, np.ndarray]:
        """``(frames, values)`` of the rows that have metric ``name``."""
        points = [(r["frames"], r[name]) for r in self.rows if name in r]
        if not points:
            return np.zeros(0), np.zeros(0)
        frames, values = zip(*points)
        return np.asarray(frames, dtype=float), np.asarray(values, dtype=float)


def read_metrics(path: Path) -> list[dict[str, float]]:
    with open(path) as f:
        return [{k: float(v) for k, v in row.items() if v not in ("", None)} for row in csv.DictReader(f)]


def read_overrides(run_dir: Path) -> list[str]:
    for name in (".hydra/overrides.yaml", "overrides.yaml"):
        if (run_dir / name).exists():
            return [str(o) for o in yaml.safe_load((run_dir / name).read_text()) or []]
    return []


def find_runs(path: str | Path) -> list[Run]:
    """The run at ``path``, or every run under it (a multirun), in path order."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"{path} does not exist")
    files = (
        [path / "metrics.csv"]
        if (path / "metrics.csv").exists()
        else sorted(path.rglob("metrics.csv"), key=lambda p: [int(s) if s.isdigit() else s for s in p.parts])
    )
    runs = [Run(f.parent, read_overrides(f.parent), read_metrics(f)) for f in files]
    runs = [r for r in runs if r.rows]
    if not runs:
        raise FileNotFoundError(f"no run with metrics.csv under {path}")
    return runs


def group_runs(runs: list[Run]) -> dict[str, list[Run]]:
    """Runs by configuration, in first-seen order."""
    groups: dict[str, list[Run]] = {}
    for run in runs:
        groups.setdefault(run.configuration, []).append(run)
    return groups


def on_common_frames(runs: list[Run], name: str, points: int = 200) -> tuple[np.ndarray, np.ndarray]:
    """Each run's ``name`` interpolated on one frame grid (where all runs have it):
    ``(frames, values [runs, points])``; empty when a run lacks the metric or the
    runs share no range of frames."""
    series = [run.series(name) for run in runs]
    if any(f.size == 0 for f, _ in series):
        return np.zeros(0), np.zeros((len(runs), 0))
    if len(series) == 1:
        frames, values = series[0]
        return frames, values[None, :]
    lo, hi = max(f[0] for f, _ in series), min(f[-1] for f, _ in series)
    if hi <= lo:  # no frames where every run has the metric: nothing to average
        return np.zeros(0), np.zeros((len(runs), 0))
    grid = np.linspace(lo, hi, points)
    return grid, np.stack([np.interp(grid, f, v) for f, v in series])
