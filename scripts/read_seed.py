"""A failing seed's reading: what the learner logged, at each evaluation of a run.

    python scripts/read_seed.py <run dir> [<run dir> ...]

Prints, at every in-run evaluation, the greedy return beside the training episodes' return and the
last values the learner logged before it (Q values, the policy's entropy and temperature, the critics'
loss and action gap, their gradient's norm, how old a sampled step is, the episodes stored, the updates
made): what docs/development.md asks to read before screening anything. Columns a run does not log
(recurrent DQN has no temperature) print as nan."""

from __future__ import annotations

import argparse
import csv
from pathlib import Path

#: heading -> the metrics.csv column under it
COLUMNS = {
    "greedy": "eval/return",
    "training": "episode/return",
    "q_mean": "train/q_mean",
    "entropy": "train/entropy",
    "alpha": "train/alpha",
    "critic_loss": "train/critic_loss",
    "action_gap": "train/action_gap",
    "grad_norm": "train/critic_grad_norm",
    "staleness": "sample/staleness_mean",
    "episodes": "buffer/episodes",
    "updates": "train/updates",
}


def reading(run_dir: Path) -> list[str]:
    """One line a column header, then one line an evaluation."""
    with open(run_dir / "metrics.csv") as f:
        rows = list(csv.DictReader(f))
    lines = ["frames " + " ".join(heading.rjust(11) for heading in COLUMNS)]
    last: dict[str, float] = {}
    for row in rows:
        last.update({c: float(row[c]) for c in COLUMNS.values() if row.get(c, "") != ""})
        if row.get("eval/return", "") != "":
            lines.append(
                f"{int(float(row['frames'])):6d} "
                + " ".join(f"{last.get(c, float('nan')):11.4g}" for c in COLUMNS.values())
            )
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", type=Path)
    for run_dir in parser.parse_args().runs:
        print(run_dir, *reading(run_dir), sep="\n")


if __name__ == "__main__":
    main()
