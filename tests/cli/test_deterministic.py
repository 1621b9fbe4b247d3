"""``deterministic=true``: a seed repeats its run. Two runs of the CLI with one seed write the same
metrics (every value but the clocks and rates) and the same tensors in every checkpoint; another
seed writes another run; a run stopped and resumed from its checkpoint ends as the uninterrupted
one; a collector that cannot be ordered is refused in one line."""

import signal
import subprocess
import sys
import time

import pytest
from helpers import TESTS, cli_environment, failed_with, read_metrics, run_cli

from trajrl.report.compare import checkpoint_differences, differences, metrics_differences

#: A short deterministic run that evaluates along the way; off-policy, it learns a little (``UPDATES``:
#: 80 updates).
SHORT = ("deterministic=true", "debug=smoke", "loop.eval_every_frames=500")
UPDATES = "loop.updates_per_frame=0.1"


def run(tmp_path, name: str, *overrides: str, seed: int = 3, fresh: bool = False):
    """A short deterministic run of the CLI into ``tmp_path / name``: (its directory, the process);
    ``fresh``: in a new interpreter (``helpers.trajrl``)."""
    proc = run_cli(tmp_path, *SHORT, f"seed={seed}", f"hydra.run.dir={name}", *overrides, timeout=300, fresh=fresh)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return tmp_path / name, proc


CASES = [  # the default agent: test_a_seed_repeats_its_run_and_another_seed_is_another_run
    pytest.param(["algo=r2d2", UPDATES], id="r2d2"),
    pytest.param(["algo=ppo"], id="ppo"),
    # the same ordered loop with the other learners' paths, samplers and cores
    pytest.param(["env=pendulum_novel", UPDATES], id="rsac-continuous", marks=pytest.mark.slow),
    pytest.param(["algo=ppo", "algo.recurrent=true"], id="ppo-recurrent", marks=pytest.mark.slow),
    pytest.param(["sampler=slice", UPDATES], id="rsac-slice", marks=pytest.mark.slow),
    pytest.param(["sampler=episode", UPDATES], id="rsac-episode", marks=pytest.mark.slow),
    pytest.param(["algo=r2d2", "sampler=random", UPDATES], id="r2d2-transitions", marks=pytest.mark.slow),
    pytest.param(
        ["algo=r2d2", "algo.rnn=lru", "sampler=tape", "sampler.tape_frames=200", UPDATES],
        id="r2d2-lru-tape",
        marks=pytest.mark.slow,
    ),
    pytest.param(
        ["algo.rnn=ffm", "sampler=tape", "sampler.tape_frames=200", UPDATES], id="rsac-ffm-tape", marks=pytest.mark.slow
    ),
    pytest.param(
        ["experiment=r2d2_bit_flipping_her", "total_frames=1000", "loop.eval_every_frames=500"],
        id="r2d2-hindsight",
        marks=pytest.mark.slow,
    ),
]


@pytest.mark.parametrize("overrides", CASES)
def test_a_seed_repeats_its_run(tmp_path, overrides):
    first, _ = run(tmp_path, "first", *overrides)
    again, _ = run(tmp_path, "again", *overrides)
    assert len(read_metrics(first)) >= 3  # rows with evaluations along the way, and the closing one
    assert differences(first, again) == []


def test_a_seed_repeats_its_run_and_another_seed_is_another_run_and_the_log_says_which_collector_ran_it(tmp_path):
    """The default agent (recurrent SAC-discrete, prioritized slices), its collector replaced. The first
    run is ``python -m trajrl`` in a new interpreter, the others are forked from the tests' CLI server
    (``helpers.cli_forks``), which must make the same run."""
    first, proc = run(tmp_path, "first", UPDATES, fresh=True)
    again, _ = run(tmp_path, "again", UPDATES)
    assert len(read_metrics(first)) >= 3  # rows with evaluations along the way, and the closing one
    assert differences(first, again) == []
    other, _ = run(tmp_path, "other", UPDATES, seed=4)
    assert metrics_differences(first, other) and checkpoint_differences(first, other)
    said = proc.stdout + proc.stderr
    assert (
        "deterministic=true: collector=multi_async (2 workers) replaced by collector=sync over 2 environments" in said
    )
    config = (first / "config.yaml").read_text()
    assert "kind: sync" in config and "num_envs: 2" in config


@pytest.mark.parametrize("collector", ["async_batched", pytest.param("ray", marks=pytest.mark.slow)])
def test_a_collector_that_cannot_be_ordered_is_refused_in_one_line(tmp_path, collector):
    proc = run_cli(tmp_path, "deterministic=true", f"collector={collector}", timeout=60)
    failed_with(
        proc,
        2,
        f"trajrl: configuration error: collector='{collector}': deterministic=true needs collection in a fixed order",
        "use collector=sync or one it stands in for (async, multi_sync, multi_async)",
    )
    assert not (tmp_path / "outputs").exists()


RESUMABLE = (
    "deterministic=true",
    "debug=smoke",
    "seed=5",
    "total_frames=1500",
    "loop.eval_every_frames=500",
    "loop.log_every_frames=500",
    "loop.checkpoint_every_frames=500",
)


@pytest.mark.parametrize("algo", ["rsac", pytest.param("ppo", marks=pytest.mark.slow)])
def test_a_run_stopped_and_resumed_ends_as_the_uninterrupted_one(tmp_path, algo):
    """SIGTERM once the first checkpoint is written: the run stops, ``latest.pt`` stays that
    checkpoint (where collection was renewed), and the run resumed from it ends with the
    uninterrupted run's metrics and checkpoints."""
    overrides = (*RESUMABLE, f"algo={algo}", *([UPDATES] if algo != "ppo" else []))
    stopped = tmp_path / "stopped"
    proc = subprocess.Popen(
        [sys.executable, "-m", "trajrl", *overrides, "hydra.run.dir=stopped"],
        cwd=tmp_path,
        env=cli_environment(tmp_path, TESTS),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
    )
    try:
        deadline = time.monotonic() + 240
        while not (stopped / "checkpoints" / "latest.pt").exists():
            assert proc.poll() is None and time.monotonic() < deadline, "no checkpoint written"
            time.sleep(0.05)
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=120)
    finally:
        proc.kill()
    assert "checkpoints/latest.pt stays the one at" in out + err, (out + err)[-3000:]
    resumed = run_cli(tmp_path, *overrides, "resume=stopped", timeout=300)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    whole = run_cli(tmp_path, *overrides, "hydra.run.dir=whole", timeout=300)
    assert whole.returncode == 0, whole.stderr[-3000:]
    assert differences(tmp_path / "whole", stopped) == []
