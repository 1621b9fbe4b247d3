"""The default agent (recurrent SAC-discrete) on actions of several dimensions: a smoke run on a
``MultiDiscrete`` and on a ``MultiBinary`` task (tests/action_envs.py), then ``trajrl evaluate``,
``trajrl export`` with its check and ``trajrl check-env`` on that run, as a user types them."""

import math
import re

import pytest
from helpers import TESTS, exited, rows_of, run_cli

#: The task, and the words check-env says of the policy the default builds for it. The tasks' episodes last 10
#: steps: slices of 10 with a burn-in of 2 (the default's 40 and 10 are longer than an episode).
TASKS = {
    "MatchMultiDiscrete-v0": "one categorical for each of the 3 dimensions (3, 4, 2 categories)",
    "MatchMultiBinary-v0": "one categorical for each of the 4 dimensions (2 categories each)",
}
SHORT_EPISODES = ["sampler.slice_len=10", "sampler.burn_in=2"]


@pytest.fixture(scope="module", params=sorted(TASKS))
def factored_run(request, tmp_path_factory):
    """(task, run directory, its overrides) of one smoke run of the default on ``task``."""
    env_id, tmp_path = request.param, tmp_path_factory.mktemp("factored")
    overrides = ["debug=smoke", "env=gym", f"env.id={env_id}", "env.import_module=action_envs", *SHORT_EPISODES]
    proc = run_cli(tmp_path, *overrides, f"hydra.run.dir={tmp_path / 'run'}", timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return env_id, tmp_path / "run", overrides


def test_the_default_trains_on_actions_of_several_dimensions(factored_run):
    """The run ends, having updated its critics and evaluated (10 steps paying at most 1 each)."""
    _, run_dir, _ = factored_run
    rows = rows_of(run_dir)
    losses = [row["train/critic_loss"] for row in rows if "train/critic_loss" in row]
    assert losses and all(math.isfinite(loss) for loss in losses), rows[-1]
    returns = [row["eval/return"] for row in rows if "eval/return" in row]
    assert returns and all(0 <= r <= 10 for r in returns), returns
    assert (run_dir / "checkpoints" / "best.pt").exists()


def test_its_greedy_agent_is_evaluated_and_exported_acting_as_trajrl_does(factored_run, tmp_path):
    """``evaluate`` plays each dimension's most likely category; the exported file (``PartsArgmax`` after
    the memory core) takes the same actions as trajrl's greedy agent on the episodes it checks (ONNX for
    one task, a torch program for the other)."""
    env_id, run_dir, _ = factored_run
    proc, left = exited("evaluate", str(run_dir), "--episodes", "3", cwd=tmp_path, timeout=120, pythonpath=TESTS)
    assert proc.returncode == 0 and left == [], proc.stderr[-3000:]
    assert re.search(r"return \d+\.\d+ ± \d+\.\d+ over 3 deterministic episodes", proc.stdout), proc.stdout
    fmt, suffix = ("onnx", "onnx") if env_id == "MatchMultiDiscrete-v0" else ("torch", "pt2")  # a format each
    out = tmp_path / f"agent.{suffix}"
    proc, left = exited(
        *["export", str(run_dir), "--format", fmt, "--out", str(out), "--check-episodes", "3"],
        cwd=tmp_path,
        timeout=180,
        pythonpath=TESTS,
    )
    assert proc.returncode == 0 and left == [], proc.stderr[-3000:]
    assert "checked: the same actions as trajrl's greedy agent over 3 episodes" in proc.stdout, proc.stdout
    assert out.stat().st_size > 0


def test_check_env_says_what_the_default_builds_for_the_actions(factored_run, tmp_path):
    env_id, _, overrides = factored_run
    proc, left = exited("check-env", *overrides, "--steps", "20", cwd=tmp_path, pythonpath=TESTS)
    assert proc.returncode == 0 and left == [], proc.stderr[-3000:]
    lines = dict(line.split(None, 1) for line in proc.stdout.splitlines() if line[:1] != " ")
    assert lines["policy"] == (
        f"algo=rsac: SAC-discrete per dimension: {TASKS[env_id]}, critics decomposed per dimension (Q the mean "
        "of the dimensions' values), each dimension's most likely category in evaluate and export"
    )
    assert lines["algo=rsac"].startswith("nothing refused")
