"""Fixtures the test modules share (plain helpers are in helpers.py).

Every test runs under pytest-timeout (``--timeout`` in pyproject.toml, signal method):
``trajrl.training.interrupts.raise_after`` keeps the timer it finds running, so an
in-process ``build()`` or ``train()`` leaves the test's timeout live.
"""
import pytest

from helpers import Run, trajrl


@pytest.fixture
def run_in(tmp_path, monkeypatch):
    """Start ``python -m trajrl debug=smoke ...`` with the failing environments of
    ``helpers.BAD_ENVS`` importable; every run started is killed at the end of the test."""
    monkeypatch.syspath_prepend(str(tmp_path))  # load_agent imports bad_envs too
    runs = []

    def start(*overrides: str) -> Run:
        runs.append(Run(tmp_path, *overrides))
        return runs[-1]

    yield start
    for r in runs:
        r.kill()


@pytest.fixture(scope="session")
def smoke_run(tmp_path_factory):
    """``python -m trajrl debug=smoke`` (the default collector and sampler) with the live
    audit on every batch and every logger, in a pipe, run once for the tests that read
    it: ``(process, run directory)``."""
    root = tmp_path_factory.mktemp("smoke")
    run_dir = root / "run"
    proc = trajrl("collector=multi_async", "sampler=slice", "debug=smoke", "audit=true", "audit_every=1",
                  "logger.backends=[csv,tensorboard,wandb]", f"hydra.run.dir={run_dir}", cwd=root, timeout=180)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc, run_dir


@pytest.fixture(scope="session")
def sweep(tmp_path_factory):
    """One ``--multirun`` over seeds x algorithms, run once for the tests that read it
    (the run directories, plots and summaries): its sweep directory."""
    root = tmp_path_factory.mktemp("multirun")
    proc = trajrl("--multirun", "seed=0,1", "algo=r2d2,ppo", "debug=smoke", "loop.eval_every_frames=500",
                  f"hydra.sweep.dir={root / 'sweep'}", cwd=root, timeout=400)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return root / "sweep"
