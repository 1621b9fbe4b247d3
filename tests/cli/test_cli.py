"""The real CLI in a subprocess: every collector x sampler smoke run, sweeps, help, refusals."""

import os
import subprocess
import sys

import pytest
from helpers import REPO, collector_sampler_pairs, read_metrics, trajrl

from trajrl.settings import LOCAL_COLLECTORS

SAMPLERS = ("slice", "slice_without_replacement", "prioritized_slice", "episode", "random")


# each sampler through the CLI with the collector that runs in the learner's process (the
# cheapest run); with worker processes writing into a shared buffer: test_pipeline's pairs
@pytest.mark.parametrize(
    "collector, sampler", collector_sampler_pairs(LOCAL_COLLECTORS, SAMPLERS, samplers_with="sync")
)
def test_smoke_run_of_every_collector_and_sampler_writes_metrics(collector, sampler, tmp_path, request):
    run_dir = tmp_path / "run"
    if (collector, sampler) == ("multi_async", "slice"):  # the default pair: the run conftest.py shares
        proc, run_dir = request.getfixturevalue("smoke_run")
    else:
        proc = trajrl(
            f"collector={collector}",
            f"sampler={sampler}",
            "debug=smoke",
            "audit=true",
            "audit_every=1",
            f"hydra.run.dir={run_dir}",
            cwd=tmp_path,
        )
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = read_metrics(run_dir)
    assert rows and int(rows[-1]["frames"]) >= 2000
    assert float(rows[-1]["train/updates"]) > 0
    assert "eval/return" in rows[-1] and float(rows[-1]["eval/return"]) > 0
    assert float(rows[-1]["audit/batches_checked"]) == float(rows[-1]["train/updates"])
    in_flight = float(rows[-1]["buffer/frames_in_flight_dropped"])
    assert 0 <= in_flight == float(rows[-1]["collect/frames_stepped"]) - float(rows[-1]["frames"])
    assert float(rows[-1]["audit/violations"]) == 0, {k: v for k, v in rows[-1].items() if k.startswith("audit")}
    workers = [float(v) for k, v in rows[-1].items() if k.startswith("collect/worker") and k.endswith("/frames") and v]
    assert collector in ("sync", "async") or len(workers) == 2
    assert sum(workers or [float(rows[-1]["collect/frames_stepped"])]) == float(rows[-1]["collect/frames_stepped"])
    sampled = [r for r in rows if r.get("sample/valid_frac")]
    assert sampled and all(
        0 < float(r["sample/valid_frac"]) <= 1 and float(r["sample/staleness_mean"]) >= 0 for r in sampled
    )
    assert (run_dir / "config.yaml").exists() and (run_dir / "command.txt").exists()
    assert "== trajrl run finished ==" in proc.stdout
    assert not (run_dir / "plots").exists() and "plots " not in proc.stdout  # debug=smoke: logger.plots=false


@pytest.mark.parametrize(
    "collector, traj_format",
    [
        ("sync", "padded"),
        ("multi_sync", "cat"),  # each collector and each format once; the other pairs with -m slow
        pytest.param("sync", "cat", marks=pytest.mark.slow),
        pytest.param("multi_sync", "padded", marks=pytest.mark.slow),
    ],
)
def test_smoke_run_of_ppo_learns_from_complete_episodes(collector, traj_format, tmp_path):
    run_dir = tmp_path / "run"
    proc = trajrl(
        "algo=ppo",
        "algo.recurrent=true",
        f"collector={collector}",
        f"traj_format={traj_format}",
        "debug=smoke",
        "audit=true",
        "audit_every=1",
        f"hydra.run.dir={run_dir}",
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = read_metrics(run_dir)
    last = rows[-1]
    assert int(last["frames"]) >= 2000 and float(last["train/updates"]) > 0
    assert float(last["audit/violations"]) == 0 and float(last["audit/batches_checked"]) >= 1
    assert 0 < float(last["batch/valid_frac"]) < 1 and "train/clip_fraction" in last
    assert float(last["buffer/frames_in_flight_dropped"]) == float(last["collect/frames_stepped"]) - int(last["frames"])
    assert "eval/return" in last


@pytest.mark.parametrize(
    "collector", [c if c == "multi_async" else pytest.param(c, marks=pytest.mark.slow) for c in LOCAL_COLLECTORS]
)  # the collectors' paths: the R2D2 smoke runs
def test_smoke_run_of_recurrent_sac_on_every_collector(collector, tmp_path):
    run_dir = tmp_path / "run"
    proc = trajrl(
        "experiment=rsac_pendulum_novel",
        f"collector={collector}",
        "debug=smoke",
        "audit=true",
        "audit_every=1",
        f"hydra.run.dir={run_dir}",
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    last = read_metrics(run_dir)[-1]
    assert int(last["frames"]) >= 2000 and float(last["train/updates"]) > 0
    assert float(last["audit/violations"]) == 0 and float(last["audit/batches_checked"]) == float(last["train/updates"])
    assert "train/alpha" in last and "eval/return" in last


def test_multirun_makes_one_run_directory_per_job(sweep):
    """Seeds x algorithms; each algorithm brings its own collector, storage and sampler."""
    from omegaconf import OmegaConf

    runs = sorted(p for p in sweep.iterdir() if p.is_dir() and (p / "metrics.csv").exists())
    assert [p.name for p in runs] == ["0", "1", "2", "3"]
    assert all(int(read_metrics(p)[-1]["frames"]) >= 2000 for p in runs)
    configs = [OmegaConf.load(p / "config.yaml") for p in runs]
    assert [(c.seed, c.algo.name, c.collector.kind, c.storage.kind) for c in configs] == [
        (0, "r2d2", "multi_async", "lazy_tensor"),
        (0, "ppo", "multi_sync", "none"),
        (1, "r2d2", "multi_async", "lazy_tensor"),
        (1, "ppo", "multi_sync", "none"),
    ]


def test_help_lists_every_group_and_option(tmp_path):
    proc = trajrl("--help", cwd=tmp_path)
    assert proc.returncode == 0
    for group in ("collector", "sampler", "storage", "env", "algo", "logger", "experiment", "debug"):
        options = sorted(p.stem for p in (REPO / "configs" / group).glob("*.yaml"))
        assert f"{group}: {', '.join(options)}" in proc.stdout


def test_any_gymnasium_id_with_kwargs_and_a_module_that_registers_it(tmp_path):
    """env=gym: the module is imported first (in the workers too), then the id is made with the kwargs."""
    (tmp_path / "my_envs.py").write_text(
        "import gymnasium as gym\n"
        "gym.register('MyCartPole-v0', entry_point='gymnasium.envs.classic_control:CartPoleEnv')\n"
    )
    run_dir = tmp_path / "run"
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "trajrl",
            "env=gym",
            "env.id=MyCartPole-v0",
            "env.import_module=my_envs",
            "+env.kwargs.max_episode_steps=25",
            "sampler.slice_len=20",
            "sampler.burn_in=5",
            "collector=multi_async",
            "debug=smoke",
            f"hydra.run.dir={run_dir}",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    last = read_metrics(run_dir)[-1]
    assert float(last["episode/length"]) <= 25 and float(last["eval/length"]) <= 25
