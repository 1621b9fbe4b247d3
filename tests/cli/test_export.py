"""``trajrl export``: a run's greedy agent as one file that acts, with onnxruntime or torch alone, as
``trajrl evaluate``'s greedy policy does, step for step (``trajrl.report.export``)."""

import json
import re
import subprocess
import sys

import numpy as np
import pytest
from helpers import TESTS, cli_environment, failed_with, run_block, run_cli

from trajrl.report.evaluate_run import load_run
from trajrl.report.export import play_trajrl

SEEDS = list(range(10))


def play_elsewhere(path, tmp_path, steer=None) -> dict:
    """``tests/play_exported.py``: the file played in a fresh process with only its runtime, gymnasium
    and numpy (trajrl's CartPole without velocities registered by ``novel_envs``, gymnasium alone)."""
    args = [sys.executable, str(TESTS / "play_exported.py"), str(path), json.dumps(SEEDS), "--env-module", "novel_envs"]
    if steer is not None:
        (tmp_path / "steer.json").write_text(json.dumps([a.tolist() for a in steer]))
        args += ["--steer", str(tmp_path / "steer.json")]
    proc = subprocess.run(
        args, capture_output=True, text=True, timeout=300, env=cli_environment(TESTS), stdin=subprocess.DEVNULL
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    played = json.loads(proc.stdout)
    assert played["imported"] == [], f"the deploying process imported {played['imported']}"
    return played


def exported(run_dir, tmp_path, fmt: str, which: str = "best", check: int = 0):
    """``trajrl export`` through the CLI (its own check on ``check`` episodes; the tests compare the
    actions themselves): the file, ``agent.onnx`` or ``agent.pt2`` in ``tmp_path``."""
    out = tmp_path / f"agent.{'onnx' if fmt == 'onnx' else 'pt2'}"
    proc = run_cli(tmp_path, "export", str(run_dir), "--which", which, "--format", fmt, "--out", str(out),
                   "--check-episodes", str(check), timeout=300)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert f"{out} (" in proc.stdout, proc.stdout
    if check:
        assert f"checked: the same actions as trajrl's greedy agent over {check} episodes" in proc.stdout
    assert proc.stderr.strip() == "", proc.stderr[-3000:]
    return out


@pytest.mark.parametrize(
    "run, fmt",
    [
        ("default", "onnx"),
        pytest.param("default", "torch", marks=pytest.mark.slow),  # a .pt2 through the CLI: r2d2-torch's
        ("r2d2", "torch"),
        pytest.param("ppo", "onnx", marks=pytest.mark.slow),  # PPO's step: test_greedy_step.py; ONNX: rsac-onnx
    ],
    ids=["rsac-onnx", "rsac-torch", "r2d2-torch", "ppo-onnx"],
)
def test_an_agent_exported_plays_as_trajrl_evaluates_it(run, fmt, request, tmp_path):
    """The default run (recurrent SAC-discrete, LSTM, the previous action observed), and the sweep's
    recurrent DQN and PPO: the file, in a process with its runtime alone, takes trajrl's greedy
    actions at every step of 10 episodes (seeds 0-9) and earns the same returns; the default run's
    ONNX file also plays an episode in the README's deployment loop (``# deploy``), run exactly as printed in a
    process that has nothing imported before it: it makes trajrl's CartPole without velocities from the module
    the file names (``trajrl.envs.gym_envs``), and imports neither torch nor TorchRL."""
    if run == "default":
        run_dir = request.getfixturevalue("smoke_run")[1]
    else:  # the sweep's jobs 0 and 1: seed 0 of algo=r2d2 and of algo=ppo
        run_dir = request.getfixturevalue("sweep") / {"r2d2": "0", "ppo": "1"}[run]
    path = exported(run_dir, tmp_path, fmt, check=2 if run == "default" else 0)
    cfg, agent = load_run(run_dir, "best")
    assert cfg.algo.name == {"default": "rsac"}.get(run, run)
    ours, returns = play_trajrl(cfg, agent, SEEDS)
    played = play_elsewhere(path, tmp_path)
    assert [np.asarray(a).tolist() for a in ours] == played["actions"]
    assert played["returns"] == returns
    if fmt == "onnx" and run == "default":  # the README's deployment loop, exactly as printed, onnxruntime alone
        stack = "{'torch', 'torchrl', 'tensordict', 'hydra', 'omegaconf'}"
        out = run_block(
            "deploy", tmp_path, after=f"import sys\nprint('imported', sorted({stack} & set(sys.modules)))\n"
        )
        assert re.search(r"^return \d+\.\d+$", out, flags=re.M) and "imported []" in out, out


@pytest.mark.slow  # its pieces: test_greedy_step.py (ONNX of FFM with a Box action), the tests above (the CLI)
def test_a_continuous_agent_with_a_linear_core_and_its_previous_reward_exported(tmp_path):
    """Recurrent SAC on Pendulum (a Box action scaled to [-2, 2]), the FFM core, the previous action
    and reward observed, rewards scaled, as ONNX: the file plays trajrl's greedy actions within 1e-5
    along its 10 episodes (answering the observations trajrl's actions lead to), and earns returns
    within 1e-3 of trajrl's on its own (onnxruntime rounds otherwise than torch: docs/export.md)."""
    overrides = ["debug=smoke", "env=gym", "env.id=Pendulum-v1", "algo.rnn=ffm", "env.previous_reward=true",
                 "env.reward_scale=0.1", "total_frames=400", "loop.warmup_frames=200", "hydra.run.dir=run"]  # fmt: skip
    proc = run_cli(tmp_path, *overrides, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    cfg, agent = load_run(tmp_path / "run", "latest")
    ours, returns = play_trajrl(cfg, agent, SEEDS)
    path = exported(tmp_path / "run", tmp_path, "onnx", which="latest")
    along = play_elsewhere(path, tmp_path, steer=ours)
    for a, b in zip(ours, along["actions"]):
        np.testing.assert_allclose(np.asarray(b), a, rtol=0, atol=1e-5)
    assert along["returns"] == pytest.approx(returns, rel=1e-12)
    alone = play_elsewhere(path, tmp_path)
    assert alone["returns"] == pytest.approx(returns, rel=1e-3)


def test_export_refuses_what_it_cannot_do_in_one_line(smoke_run, tmp_path, monkeypatch):
    """A directory without a run (through the CLI: one line, exit 2), a file named for another format,
    and the ONNX format without its packages: refused before anything is written."""
    from trajrl.base.errors import ConfigError
    from trajrl.report.export import export_agent

    _, run_dir = smoke_run
    empty = tmp_path / "empty"
    empty.mkdir()
    failed_with(run_cli(tmp_path, "export", str(empty)), 2, "trajrl export", "no config.yaml")
    with pytest.raises(ConfigError, match=r"--out.*--format torch writes a \.pt2 file"):
        export_agent(run_dir, fmt="torch", out=tmp_path / "agent.onnx")
    monkeypatch.setitem(sys.modules, "onnxscript", None)  # as where trajrl[export] is not installed
    with pytest.raises(ConfigError, match=r"--format.*needs onnxscript, not installed: pip install 'trajrl\[export\]'"):
        export_agent(run_dir, out=tmp_path / "agent.onnx")
    assert not list(tmp_path.glob("agent*"))
