"""``trajrl summary <multirun dir>``: a markdown table of final metrics per configuration.

Runs that differ only in ``seed`` are one row: mean +- std across seeds. The
table is printed and written to ``<dir>/summary.md``.
"""

from __future__ import annotations

import math
from pathlib import Path
from statistics import NormalDist

import numpy as np

from trajrl.report.runs import Run, find_runs, group_runs


def wilson_interval(successes: int, trials: int, confidence: float = 0.9) -> tuple[float, float]:
    """The Wilson score interval of a success rate seen as ``successes`` of ``trials`` (seeds that
    reach a threshold, say): 9 of 10 at 90 % gives 0.65 .. 0.98 (docs/development.md)."""
    if trials < 1 or not 0 <= successes <= trials:
        raise ValueError(f"need 0 <= successes <= trials and trials >= 1, got {successes} of {trials}")
    z = NormalDist().inv_cdf(0.5 + confidence / 2)
    rate = successes / trials
    centre = (rate + z * z / (2 * trials)) / (1 + z * z / trials)
    half = z / (1 + z * z / trials) * math.sqrt(rate * (1 - rate) / trials + z * z / (4 * trials * trials))
    return max(0.0, centre - half), min(1.0, centre + half)


#: Column -> (metric, how it is read from a run).
COLUMNS = [
    ("final eval return", "eval/return", "last"),
    ("best eval return", "eval/return", "max"),
    ("final train return", "episode/return", "last"),
    ("frames", "frames", "last"),
    ("wall-clock (s)", "time/elapsed_s", "last"),
    ("frames/s", "time/frames_per_s", "last"),
    ("updates", "train/updates", "last"),
    ("audit violations", "audit/violations", "last"),
]
#: Shown when a run of the table stopped at ``loop.stop_at_return``.
SOLVED = ("solved at frames", "run/solved_at_frames", "last")


def value(run: Run, metric: str, how: str) -> float:
    _, values = run.series(metric)
    if values.size == 0:
        return math.nan
    return float(values.max() if how == "max" else values[-1])


def cell(values: list[float]) -> str:
    values = [v for v in values if not math.isnan(v)]
    if not values:
        return "-"
    mean = float(np.mean(values))
    fmt = ",.0f" if abs(mean) >= 1000 else ".1f"
    return format(mean, fmt) + (f" ± {np.std(values):{fmt}}" if len(values) > 1 else "")


def summary_table(path: str | Path) -> str:
    """The markdown table for the runs under ``path``."""
    groups = group_runs(find_runs(path))
    solved = any(not math.isnan(value(run, *SOLVED[1:])) for runs in groups.values() for run in runs)
    columns = [*COLUMNS, *([SOLVED] if solved else [])]
    lines = [
        "| configuration | seeds | " + " | ".join(name for name, _, _ in columns) + " |",
        "|---|---|" + "---|" * len(columns),
    ]
    for label, runs in groups.items():
        cells = [cell([value(run, metric, how) for run in runs]) for _, metric, how in columns]
        lines.append(f"| {label} | {', '.join(run.seed for run in runs)} | " + " | ".join(cells) + " |")
    return "\n".join(lines)
