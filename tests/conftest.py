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


@pytest.fixture(scope="module")
def module_dir(tmp_path_factory, request):
    """A directory for CLI runs that several tests of one module assert on (run once per module)."""
    return tmp_path_factory.mktemp(request.module.__name__)


@pytest.fixture(scope="module")
def smoke_run(module_dir):
    """``python -m trajrl debug=smoke`` with every logger, in a pipe, run once per module:
    ``(process, run directory)``."""
    run_dir = module_dir / "smoke"
    proc = trajrl("debug=smoke", "logger.backends=[csv,tensorboard,wandb]", f"hydra.run.dir={run_dir}",
                  cwd=module_dir, timeout=180)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc, run_dir
