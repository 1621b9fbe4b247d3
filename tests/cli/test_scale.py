"""Past one machine: collector=ray, parallel sweeps, Optuna. Ray and the sweep plugins
are optional extras (``trajrl[ray]``, ``trajrl[sweep]``); the long tests are marked
slow (``pytest -m slow``), the refusals run by default."""

import importlib.util
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from helpers import failed_with, read_metrics, trajrl

from trajrl.checkpoint import load_checkpoint

HAS_RAY = importlib.util.find_spec("ray") is not None
HAS_SWEEP = all(
    importlib.util.find_spec(m) is not None
    for m in ("hydra_plugins.hydra_submitit_launcher", "hydra_plugins.hydra_optuna_sweeper")
)
HAS_JOBLIB = importlib.util.find_spec("hydra_plugins.hydra_joblib_launcher") is not None


def ray_processes() -> list[str]:
    """Ray's daemons running on this machine (they start in sessions of their own)."""
    out = subprocess.run(["ps", "-eo", "pid,args"], capture_output=True, text=True).stdout
    return [
        line
        for line in out.splitlines()
        if any(name in line for name in ("raylet", "gcs_server", "ray::", "dashboard.py", "log_monitor.py"))
    ]


@pytest.mark.slow
@pytest.mark.skipif(not HAS_RAY, reason="needs the ray extra: pip install 'trajrl[ray]'")
@pytest.mark.parametrize("trajs", ["4", "null"])
def test_collector_ray_trains_with_two_actors_audits_clean_and_leaves_no_ray_process(trajs, tmp_path):
    """Two actors, each stepping a vector of 2 environments: complete episodes, and fixed
    frames (trajs_per_batch=null) in [L, W=2, B=2] lanes."""
    assert ray_processes() == [], "a Ray instance is already running"
    run_dir = tmp_path / "run"
    proc = trajrl(
        "collector=ray",
        "collector.num_workers=2",
        "env.num_envs=2",
        f"trajs_per_batch={trajs}",
        "debug=smoke",
        "audit=true",
        "audit_every=1",
        f"hydra.run.dir={run_dir}",
        cwd=tmp_path,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    last = read_metrics(run_dir)[-1]
    assert int(last["frames"]) >= 1000 and float(last["train/updates"]) > 0
    assert float(last["audit/violations"]) == 0 and float(last["audit/batches_checked"]) > 0
    assert float(last["collect/worker0/episodes"]) > 0 and float(last["collect/worker1/episodes"]) > 0
    if trajs == "null":  # each actor wrote its 2 lanes
        lanes = load_checkpoint(run_dir)["buffer"]["_writer"]["_lanes"]
        assert len(lanes["last_id"]) == 4 and min(lanes["written"]) > 0, lanes
    deadline = time.monotonic() + 30
    while ray_processes():
        assert time.monotonic() < deadline, ray_processes()
        time.sleep(0.5)


@pytest.mark.slow
@pytest.mark.skipif(not HAS_RAY, reason="needs the ray extra: pip install 'trajrl[ray]'")
def test_an_unreachable_ray_address_ends_the_run_within_10_s_with_one_line(tmp_path):
    assert ray_processes() == [], "a Ray instance is already running"
    start = time.monotonic()
    proc = trajrl("collector=ray", "collector.address=ray://127.0.0.1:1", "debug=smoke", cwd=tmp_path, timeout=60)
    assert time.monotonic() - start < 10
    failed_with(proc, 1, "trajrl: run failed: collector.address=ray://127.0.0.1:1: nothing answers at 127.0.0.1:1")
    assert ray_processes() == []


@pytest.mark.skipif(not HAS_RAY, reason="needs the ray extra: pip install 'trajrl[ray]'")
def test_a_ray_address_of_no_known_form_is_refused_before_the_run(tmp_path):
    proc = trajrl("collector=ray", "collector.address=head-node", "debug=smoke", cwd=tmp_path, timeout=60)
    failed_with(proc, 2, "trajrl: configuration error: collector.address='head-node': give \"ray://<head>:10001\"")


@pytest.mark.slow
@pytest.mark.skipif(not HAS_RAY, reason="needs the ray extra: pip install 'trajrl[ray]'")
def test_collector_ray_joins_a_running_cluster_and_leaves_it_running(tmp_path):
    """collector.address=auto: the run joins the cluster `ray start --head` made, and
    stops only its own actors (the cluster's daemons are the cluster owner's)."""
    assert ray_processes() == [], "a Ray instance is already running"
    ray_cli = str(Path(sys.executable).with_name("ray"))
    subprocess.run(
        [ray_cli, "start", "--head", "--num-cpus=2", "--include-dashboard=false", "--disable-usage-stats"],
        check=True,
        capture_output=True,
        timeout=120,
    )
    try:
        run_dir = tmp_path / "run"
        proc = trajrl(
            "collector=ray",
            "collector.address=auto",
            "debug=smoke",
            "audit=true",
            f"hydra.run.dir={run_dir}",
            cwd=tmp_path,
            timeout=300,
        )
        assert proc.returncode == 0, proc.stderr[-3000:]
        last = read_metrics(run_dir)[-1]
        assert int(last["frames"]) >= 1000 and float(last["audit/violations"]) == 0
        assert "collect/frames_stepped" not in last  # no frame counters across a cluster
        assert any("raylet" in p for p in ray_processes())  # the cluster still runs
    finally:
        subprocess.run([ray_cli, "stop", "--force"], capture_output=True, timeout=120)
    deadline = time.monotonic() + 30
    while ray_processes():
        assert time.monotonic() < deadline, ray_processes()
        time.sleep(0.5)


@pytest.mark.skipif(HAS_RAY, reason="ray is installed here")
def test_collector_ray_without_ray_names_the_extra(tmp_path):
    proc = trajrl("collector=ray", "debug=smoke", cwd=tmp_path)
    failed_with(
        proc, 2, "trajrl: configuration error: collector='ray': needs Ray, an optional extra: pip install 'trajrl[ray]'"
    )


@pytest.mark.skipif(HAS_SWEEP, reason="the sweep extra is installed here")
def test_a_sweep_launcher_without_its_extra_names_the_extra(tmp_path):
    proc = trajrl("--multirun", "hydra/launcher=parallel", "debug=smoke", cwd=tmp_path)
    failed_with(proc, 2, "trajrl: configuration error:", "pip install 'trajrl[sweep]'")


@pytest.mark.skipif(not HAS_JOBLIB, reason="needs hydra-joblib-launcher (the test extra)")
def test_the_joblib_launcher_is_refused_with_multi_process_collectors(tmp_path):
    proc = trajrl(
        "--multirun",
        "hydra/launcher=joblib",
        "collector=multi_async",
        "debug=smoke",
        f"hydra.sweep.dir={tmp_path / 'sweep'}",
        cwd=tmp_path,
    )
    failed_with(
        proc,
        2,
        "trajrl: configuration error: hydra/launcher='joblib': cannot start collector=multi_async's worker processes",
        "hydra/launcher=parallel",
    )


@pytest.mark.slow
@pytest.mark.skipif(not HAS_SWEEP, reason="needs the sweep extra: pip install 'trajrl[sweep]'")
def test_a_parallel_sweep_runs_two_jobs_with_worker_processes_at_once(tmp_path):
    sweep = tmp_path / "sweep"
    proc = trajrl(
        "--multirun",
        "hydra/launcher=parallel",
        "collector=multi_async",
        "seed=0,1",
        "debug=smoke",
        "total_frames=4000",
        f"hydra.sweep.dir={sweep}",
        cwd=tmp_path,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    spans = []
    for job in ("0", "1"):
        rows = read_metrics(sweep / job)
        assert int(rows[-1]["frames"]) >= 4000
        end = (sweep / job / "metrics.csv").stat().st_mtime
        spans.append((end - float(rows[-1]["time/elapsed_s"]), end))
    (start0, end0), (start1, end1) = spans
    assert start0 < end1 and start1 < end0, f"the jobs did not overlap: {spans}"


@pytest.mark.slow
@pytest.mark.skipif(not HAS_SWEEP, reason="needs the sweep extra: pip install 'trajrl[sweep]'")
def test_an_optuna_search_of_three_trials_reports_the_best_parameters(tmp_path):
    sweep = tmp_path / "sweep"
    proc = trajrl(
        "--multirun",
        "hparams_search=r2d2_optuna",
        "hydra.sweeper.n_trials=3",
        "debug=smoke",
        f"hydra.sweep.dir={sweep}",
        cwd=tmp_path,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = yaml.safe_load((sweep / "optimization_results.yaml").read_text())
    assert set(results["best_params"]) == {"algo.lr", "algo.n_step", "loop.updates_per_frame"}
    returns = [float(read_metrics(sweep / str(job))[-1]["eval/return"]) for job in range(3)]
    assert results["best_value"] == pytest.approx(max(returns), rel=1e-4)
    assert "Best parameters: {'algo.lr': " in proc.stdout + proc.stderr  # printed as well as written
