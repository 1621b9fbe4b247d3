"""Two runs side by side, value by value: what ``deterministic=true`` promises to repeat (every
metric but the clocks and rates, every tensor of every checkpoint), and where two runs part."""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

import torch

from trajrl.base import internals
from trajrl.checkpoint import WHICH, checkpoint_path


def is_timing(column: str) -> bool:
    """Whether a metrics column is a clock or a rate (``time/...``, ``..._per_s``): what no run repeats."""
    return column.startswith("time/") or column.endswith("_per_s") or column.endswith("_per_s_recent")


def metrics_differences(run_a: str | Path, run_b: str | Path, most: int = 10) -> list[str]:
    """Where two runs' ``metrics.csv`` differ (timings left out), the first ``most`` of them in words."""
    rows_a, rows_b = _rows(Path(run_a)), _rows(Path(run_b))
    found = [] if len(rows_a) == len(rows_b) else [f"metrics.csv: {len(rows_a)} rows against {len(rows_b)}"]
    for number, (a, b) in enumerate(zip(rows_a, rows_b)):
        for column in sorted(set(a) | set(b)):
            if not is_timing(column) and a.get(column, "") != b.get(column, ""):
                found.append(f"metrics.csv row {number} {column}: {a.get(column, '')!r} against {b.get(column, '')!r}")
    return found[:most] + ([f"... and {len(found) - most} more"] if len(found) > most else [])


def checkpoint_differences(run_a: str | Path, run_b: str | Path, most: int = 10) -> list[str]:
    """Where two runs' checkpoints (``latest.pt``, ``best.pt``) differ, entry by entry; of a replay
    buffer's storage only the rows it has written are read (the rest is memory nobody wrote)."""
    if not any(checkpoint_path(run, "latest").exists() for run in (run_a, run_b)):
        return ["latest.pt: in neither run (nothing trained: two runs that never began are not the same run)"]
    found = []
    for which in WHICH:
        paths = checkpoint_path(run_a, which), checkpoint_path(run_b, which)
        if not paths[0].exists() and not paths[1].exists():
            continue
        if not (paths[0].exists() and paths[1].exists()):
            found.append(
                f"{which}.pt: only in {paths[0].parent.parent if paths[0].exists() else paths[1].parent.parent}"
            )
            continue
        a, b = (dict(_entries(_written(torch.load(p, weights_only=False)))) for p in paths)
        for key in sorted(set(a) | set(b)):
            if key not in a or key not in b or not _same(a[key], b[key]):
                found.append(f"{which}.pt {key}: {'differs' if key in a and key in b else 'in one only'}")
    return found[:most] + ([f"... and {len(found) - most} more"] if len(found) > most else [])


def differences(run_a: str | Path, run_b: str | Path, most: int = 10) -> list[str]:
    """Every difference between two run directories that ``deterministic=true`` rules out (none: the
    same run)."""
    return metrics_differences(run_a, run_b, most) + checkpoint_differences(run_a, run_b, most)


def _rows(run_dir: Path) -> list[dict[str, str]]:
    with open(run_dir / "metrics.csv", newline="") as rows:
        return list(csv.DictReader(rows))


def _written(payload: dict) -> dict:
    """A checkpoint with its buffer's storage cut to the rows written."""
    if payload.get("buffer") is not None:
        internals.with_written_rows_only(payload["buffer"])
    return payload


def _entries(tree: Any, prefix: str = "") -> list[tuple[str, Any]]:
    """Every leaf of nested dicts, lists and tuples, by its path (``algo/actor/rnn.weight_hh_l0``)."""
    if isinstance(tree, dict):
        return [entry for key, value in tree.items() for entry in _entries(value, f"{prefix}/{key}")]
    if isinstance(tree, (list, tuple)):
        return [entry for i, value in enumerate(tree) for entry in _entries(value, f"{prefix}/{i}")]
    return [(prefix.lstrip("/"), tree)]


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        return isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and a.shape == b.shape and torch.equal(a, b)
    return a == b or (a != a and b != b)  # NaN equals NaN here
