"""loop.stop_at_return: the run ends at its first evaluation at or above the return, says so in its
summary and metrics.csv, and keeps best.pt and latest.pt as any run does."""
import pytest

from trajrl.report.summary import summary_table
from helpers import read_metrics, trajrl


@pytest.mark.parametrize("overrides, threshold", [
    # episodic PPO: CartPole's return climbs over evaluations; 150 is past its first ones
    (["experiment=ppo_cartpole", "total_frames=40000", "loop.eval_every_frames=1000"], 150.0),
    # the off-policy loop: any evaluation of CartPole reaches 5 (an episode lasts 8 steps or more)
    (["debug=smoke", "total_frames=6000", "loop.eval_every_frames=1000", "loop.eval_episodes=2"], 5.0),
], ids=["ppo", "r2d2"])
def test_a_run_stops_at_its_first_evaluation_at_the_threshold(overrides, threshold, tmp_path):
    run_dir = tmp_path / "run"
    proc = trajrl(*overrides, f"loop.stop_at_return={threshold:g}", "logger.plots=false", f"hydra.run.dir={run_dir}",
                  cwd=tmp_path, timeout=240)
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = read_metrics(run_dir)
    evals = [(float(r["frames"]), float(r["eval/return"])) for r in rows if r["eval/return"]]
    *before, (last_frames, last_return) = evals
    assert all(value < threshold for _, value in before), evals  # the first evaluation at the threshold ...
    assert last_return >= threshold                              # ... is the last one
    solved = [float(r["run/solved_at_frames"]) for r in rows if r.get("run/solved_at_frames")]
    assert len(solved) == 1 and rows[-1]["run/solved_at_frames"] != ""  # in the closing row only
    total = int(next(o for o in overrides if o.startswith("total_frames=")).split("=")[1])
    assert solved[0] <= last_frames < total
    assert f"solved          at {int(solved[0]):,} frames" in proc.stdout
    assert (run_dir / "checkpoints" / "latest.pt").exists() and (run_dir / "checkpoints" / "best.pt").exists()
    header, _, row = summary_table(run_dir).splitlines()  # trajrl summary: where it stopped
    assert header.endswith("| solved at frames |") and row.endswith(f"| {solved[0]:,.0f} |")

