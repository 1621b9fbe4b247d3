"""loop.stop_at_return: the run ends at its first evaluation at or above the return, says so in its
summary and metrics.csv, and keeps best.pt and latest.pt as any run does."""

import io

from helpers import read_metrics

import trajrl
from trajrl.report.summary import summary_table
from trajrl.training.progress import Progress
from trajrl.training.run import summary


def check_stopped_at_first_evaluation_over(threshold: float, run_dir, total: int, printed: str) -> None:
    rows = read_metrics(run_dir)
    evals = [(float(r["frames"]), float(r["eval/return"])) for r in rows if r["eval/return"]]
    *before, (last_frames, last_return) = evals
    assert all(value < threshold for _, value in before), evals  # the first evaluation at the threshold ...
    assert last_return >= threshold  # ... is the last one
    solved = [float(r["run/solved_at_frames"]) for r in rows if r.get("run/solved_at_frames")]
    assert len(solved) == 1 and rows[-1]["run/solved_at_frames"] != ""  # in the closing row only
    assert solved[0] <= last_frames < total
    assert f"solved          at {int(solved[0]):,} frames" in printed
    assert (run_dir / "checkpoints" / "latest.pt").exists() and (run_dir / "checkpoints" / "best.pt").exists()
    header, _, row = summary_table(run_dir).splitlines()  # trajrl summary: where it stopped
    assert header.endswith("| solved at frames |") and row.endswith(f"| {solved[0]:,.0f} |")


def trained(tmp_path, total_frames: int, *overrides: str) -> dict:
    """A run of ``overrides`` to ``total_frames``, evaluated every 1,000 frames, through ``train`` in
    this process (as the CLI runs it), in ``tmp_path / "run"``: its final metrics."""
    cfg = trajrl.compose([*overrides, f"total_frames={total_frames}", "loop.eval_every_frames=1000"])
    return trajrl.train(cfg, tmp_path / "run", progress=Progress(total_frames, stream=io.StringIO()))


def test_a_ppo_run_stops_at_its_first_evaluation_at_the_threshold(tmp_path):
    """Episodic PPO (``train``, as the CLI runs it): CartPole's return climbs over evaluations;
    150 is past its first ones."""
    final = trained(tmp_path, 40_000, "experiment=ppo_cartpole", "loop.stop_at_return=150", "logger.plots=false")
    check_stopped_at_first_evaluation_over(150.0, tmp_path / "run", 40_000, summary(final))


def test_an_off_policy_run_stops_at_its_first_evaluation_at_the_threshold(tmp_path):
    """The off-policy loop (``train``, as the CLI runs it): any evaluation of CartPole reaches 5
    (an episode lasts 8 steps or more), so the first one stops it."""
    final = trained(tmp_path, 6000, "debug=smoke", "loop.eval_episodes=2", "loop.stop_at_return=5")
    check_stopped_at_first_evaluation_over(5.0, tmp_path / "run", 6000, summary(final))
    assert final["run/solved_at_frames"] >= 1000


def test_a_solved_run_resumed_trains_nothing_and_says_why_unless_its_threshold_or_budget_is_raised(tmp_path):
    """Resumed as the CLI resumes (``train`` of the run's overrides and ``resume=``), in this process."""
    overrides = ["debug=smoke", "loop.eval_episodes=2", "loop.stop_at_return=5"]
    first = trained(tmp_path, 6000, *overrides)
    run_dir = tmp_path / "run"
    files = {name: (run_dir / name).read_bytes() for name in ("metrics.csv", "config.yaml", "checkpoints/latest.pt")}
    solved_at = int(first["run/solved_at_frames"])

    again = trained(tmp_path, 6000, *overrides, f"resume={run_dir}")
    printed = summary(again)
    assert f"nothing trained: the run was solved at {int(first['frames']):,} frames" in printed
    assert "raise loop.stop_at_return above" in printed and "or total_frames above 6,000 to train on" in printed
    assert again["eval/return"] == first["eval/return"] and again["frames"] == first["frames"]
    assert {name: (run_dir / name).read_bytes() for name in files} == files  # nothing written

    more = trained(tmp_path, 8000, *overrides, f"resume={run_dir}")  # a larger budget: it trains on
    assert "nothing_trained" not in more and more["frames"] > first["frames"] and more["train/updates"] > 0
    assert more["run/solved_at_frames"] > solved_at


def test_a_resumed_solved_run_trains_on_when_the_threshold_is_raised_or_dropped():
    from trajrl.checkpoint import LoopState
    from trajrl.training.run import still_solved

    solved = LoopState(frames=1000, solved_return=20.0, total_frames=6000)
    assert still_solved(solved, 5.0, 6000) is not None and still_solved(solved, 20.0, 6000) is not None
    assert still_solved(solved, 25.0, 6000) is None  # above the return it reached
    assert still_solved(solved, None, 6000) is None  # no threshold: train to the budget
    assert still_solved(solved, 5.0, 7000) is None  # a larger budget
    assert still_solved(LoopState(frames=1000, total_frames=6000), 5.0, 6000) is None  # never solved
    assert still_solved(None, 5.0, 6000) is None  # not a resume
