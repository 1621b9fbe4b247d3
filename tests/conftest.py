"""Fixtures the test modules share (plain helpers are in helpers.py).

One torch thread per test process, as every trajrl process uses (``train()`` and the
collector workers set it): two pytest-xdist workers with torch's default threads each
would ask four busy threads of two cores.

Collectors built in the test processes start their workers from a fork server, as the
CLI's do (``trajrl.__main__.workers_from_a_fork_server``); the API's default, TorchRL's
``spawn``, is what the README's examples run with.

Every test runs under pytest-timeout (``--timeout`` in pyproject.toml, signal method):
``trajrl.base.signals.raise_after`` keeps the timer it finds running, so an
in-process ``build()`` or ``train()`` leaves the test's timeout live.
"""

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")  # before torch is imported (helpers imports it)

from trajrl.__main__ import workers_from_a_fork_server  # noqa: E402

workers_from_a_fork_server()  # as the CLI: before TorchRL's import sets ``spawn``

import pytest  # noqa: E402
import torch  # noqa: E402
from helpers import Run  # noqa: E402

torch.set_num_threads(1)


@pytest.fixture
def run_in(tmp_path):
    """Start ``python -m trajrl debug=smoke ...`` in ``tmp_path`` with the failing environments
    of ``tests/bad_envs.py`` importable (``helpers.Run``: forked unless ``fresh``); every run
    started is killed at the end of the test."""
    runs = []

    def start(*overrides: str, fresh: bool = False) -> Run:
        runs.append(Run(tmp_path, *overrides, fresh=fresh))
        return runs[-1]

    yield start
    for r in runs:
        r.kill()


def run_once(tmp_path_factory, worker_id: str, name: str, *args: str, timeout: float) -> tuple:
    """``python -m trajrl *args`` run once per test session, however many test processes
    ask for it (pytest-xdist's workers share the session's temporary directory; the first
    to ask runs it, the others wait for it): ``(process, its directory)``; ``process.left``:
    the processes of its group at the moment it exited (``helpers.processes_now``)."""
    import json
    import subprocess

    from filelock import FileLock
    from helpers import exited

    root = tmp_path_factory.getbasetemp()
    root = root.parent if worker_id != "master" else root
    where = root / name
    with FileLock(str(root / f"{name}.lock")):
        result = where / "result.json"
        if not result.exists():
            where.mkdir(parents=True, exist_ok=True)
            proc, left = exited(*args, cwd=where, timeout=timeout)
            done = {"returncode": proc.returncode, "stdout": proc.stdout, "stderr": proc.stderr, "left": left}
            result.write_text(json.dumps(done))
        done = json.loads(result.read_text())
    proc = subprocess.CompletedProcess(args, done["returncode"], done["stdout"], done["stderr"])
    proc.left = done["left"]
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc, where


@pytest.fixture(scope="session")
def smoke_run(tmp_path_factory, worker_id):
    """``python -m trajrl debug=smoke`` (the default run: every group's default option) with
    the live audit on every batch and every logger, in a pipe, run once for the tests that
    read it: ``(process, run directory)``."""
    proc, where = run_once(
        tmp_path_factory,
        worker_id,
        "smoke",
        "debug=smoke",
        "audit=true",
        "audit_every=1",
        "logger.backends=[csv,tensorboard,wandb]",
        "hydra.run.dir=run",
        timeout=180,
    )
    return proc, where / "run"


@pytest.fixture(scope="session")
def sweep(tmp_path_factory, worker_id):
    """One ``--multirun`` over seeds x algorithms, run once for the tests that read it
    (the run directories, plots and summaries; 1,000 frames a job: two evaluations and
    a metrics row every 250 frames each, what a curve and a mean across seeds need): its sweep directory."""
    _, where = run_once(
        tmp_path_factory,
        worker_id,
        "multirun",
        "--multirun",
        "seed=0,1",
        "algo=r2d2,ppo",
        "debug=smoke",
        "logger.plots=true",
        "loop.eval_every_frames=500",
        "total_frames=1000",
        "hydra.sweep.dir=sweep",
        timeout=400,
    )
    return where / "sweep"


@pytest.fixture
def train_in(tmp_path):
    """``run_in``'s run trained in the test's own process (``helpers.Trained``), with the
    environments of ``tests/bad_envs.py`` importable; a process one started that is still
    there 10 s after the test is killed, and the test fails naming it."""
    from helpers import Trained, assert_nothing_left_since

    runs = []

    def start(*overrides: str) -> Trained:
        runs.append(Trained(tmp_path, *overrides))
        return runs[-1]

    yield start
    for r in runs:
        assert_nothing_left_since(r.before, within=10)  # an error at the test's teardown
