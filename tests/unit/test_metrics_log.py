"""``MetricsLog`` on resume: the rows written before the checkpoint stay in ``metrics.csv``, the ones
written after it (the stretch the resumed run does again) move to ``metrics_superseded.csv``."""

import csv

from trajrl.training.metrics import MetricsLog


def rows_in(path) -> list[tuple[float, float]]:
    with open(path, newline="") as f:
        return [(float(row["frames"]), float(row["train/updates"])) for row in csv.DictReader(f)]


def test_a_resumed_run_keeps_the_rows_written_before_its_checkpoint_and_moves_the_later_ones_aside(tmp_path):
    """The checkpoint at 783 frames and 5 updates. A row the killed run wrote after it at the same frame
    count (the learner updated on while no episode arrived: 6 updates) is a later row, as is one with
    more frames; one at the checkpoint's own frames and updates stays."""
    log = MetricsLog(tmp_path)
    for frames, updates in [(381, 1), (571, 5), (783, 5), (783, 6), (1000, 9)]:
        log.log(frames, {"train/updates": float(updates), "eval/return": 10.0 * updates})

    resumed = MetricsLog(tmp_path, resume_at=(783, 5))
    assert rows_in(tmp_path / "metrics.csv") == [(381, 1), (571, 5), (783, 5)]
    assert rows_in(tmp_path / "metrics_superseded.csv") == [(783, 6), (1000, 9)]
    resumed.log(1000, {"train/updates": 8.0})  # the resumed run writes on after the rows it kept
    assert rows_in(tmp_path / "metrics.csv") == [(381, 1), (571, 5), (783, 5), (1000, 8)]
