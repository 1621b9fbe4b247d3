"""What goes wrong around a run on a user's own machine, through the CLI in a subprocess: a replay
buffer larger than the machine, wandb online without a login and a second run into a directory a run
is writing are refused before anything starts (exit 2, one line, no traceback, no process left, nothing
written); an export interrupted inside its write leaves no file under its name; a TensorBoard writer
that fails mid-run is a backend lost, not the run; a multirun goes on past a job that fails
(docs/faults.md, "Around a run")."""

import contextlib
import os
import signal
import subprocess
import sys
import time

import pytest
from helpers import TESTS, cli_environment, exited, failed_with, read_metrics
from process_groups import processes_now

LARGE = ("env=gym", "env.import_module=misbehaving_envs", "env.id=LargeObservations-v0")
MISBEHAVING_IN_COLLECTORS = ("env=gym", "env.import_module=misbehaving_envs", "+env.kwargs.in_collectors_only=true")


def refused(tmp_path, *args: str, timeout: float = 60) -> str:
    """``python -m trajrl *args`` refused before anything started: exit 2, its last line a configuration
    error, no traceback, no process of its group left as it exited and no run directory; its stderr."""
    proc, left = exited(*args, "hydra.run.dir=run", cwd=tmp_path, timeout=timeout, pythonpath=TESTS)
    err = failed_with(proc, 2, "trajrl: configuration error: ")
    assert not left, left
    assert not (tmp_path / "run").exists() and not (tmp_path / "outputs").exists()
    return err


@pytest.mark.parametrize(
    ("storage", "room"),
    [
        (("collector=multi_async",), "of memory available (MemAvailable)"),  # or /dev/shm, the less of the two
        (("storage=lazy_memmap", "storage.scratch_dir=buffer"), "free on the disk of "),
    ],
    ids=["memory", "disk"],
)
def test_a_replay_buffer_larger_than_the_machine_is_refused_before_anything_starts(storage, room, tmp_path):
    """50 million frames of ``(3, 128, 128)`` float32 observations (19.7 TB): no machine has the room,
    and the line says what one frame takes, what there is and what capacity fits, within seconds
    (before, torch's allocation failed with a traceback after the workers had started)."""
    err = refused(tmp_path, *LARGE, *storage, "storage.capacity=50000000")
    line = err.strip().splitlines()[-1]
    assert "storage.capacity=50000000: the replay buffer would take 19,663.6 GB (50,000,000 frames of " in line
    assert "observations 393,232, action 8, " in line, line  # twice 49,152 floats and the two clock inputs
    assert room in line and "; use storage.capacity<=" in line, line
    if "/dev/shm" in line:
        assert "free in /dev/shm" in line


def test_wandb_online_without_a_login_is_refused_in_one_line_before_the_run(tmp_path, monkeypatch):
    """wandb itself is asked whether a key is configured (no ``WANDB_API_KEY``, a home without a netrc):
    the line names the setting and the three ways that work; nothing is prompted (stdin is closed)."""
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    monkeypatch.delenv("WANDB_MODE", raising=False)
    monkeypatch.delenv("NETRC", raising=False)
    err = refused(tmp_path, "debug=smoke", "logger=wandb", "logger.wandb_mode=online")
    assert err.strip().splitlines()[-1] == (
        "trajrl: configuration error: logger.wandb_mode='online': no wandb account is logged in on this machine "
        "(no WANDB_API_KEY, no key in ~/.netrc); log in with `wandb login`, set WANDB_API_KEY, or use "
        "logger.wandb_mode=offline (synced later with `wandb sync`)"
    )


def test_an_export_interrupted_while_it_writes_leaves_no_file_under_its_name(smoke_run, tmp_path):
    """``trajrl export`` stopped (SIGSTOP) the moment its file is created (inotify), then sent SIGINT:
    it ends in one line (exit 130), and neither the file it was writing nor a part of it is left."""
    _, run_dir = smoke_run
    out = tmp_path / "out"
    out.mkdir()
    args = ("export", str(run_dir), "--which", "latest", "--format", "torch", "--check-episodes", "0")
    with created_in(out) as created:
        proc = subprocess.Popen(
            [sys.executable, "-m", "trajrl", *args, "--out", str(out / "agent.pt2")],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=cli_environment(),
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            # Ctrl-C as a terminal delivers it, even where the tests run as a background job (SIGINT ignored)
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
        )
        try:
            name = created(timeout=120)
            os.kill(proc.pid, signal.SIGSTOP)
            writing = sorted(os.listdir(out))
            os.kill(proc.pid, signal.SIGINT)
            os.kill(proc.pid, signal.SIGCONT)
            out_text, err = proc.communicate(timeout=60)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
    assert name == "agent.tmp.pt2" and writing == ["agent.tmp.pt2"], (name, writing)  # stopped inside its write
    failed_with(
        subprocess.CompletedProcess(proc.args, proc.returncode, out_text, err),
        130,
        "trajrl export: stopped: interrupted by SIGINT",
    )
    assert os.listdir(out) == []
    assert not processes_now(proc.pid)


@contextlib.contextmanager
def created_in(directory):
    """``created(timeout)``: the name of the next file created in ``directory`` (Linux's inotify)."""
    import ctypes
    import select
    import struct

    libc = ctypes.CDLL(None, use_errno=True)
    inotify = libc.inotify_init1(os.O_CLOEXEC)
    assert inotify >= 0 and libc.inotify_add_watch(inotify, os.fsencode(str(directory)), 0x100) >= 0  # IN_CREATE

    def created(timeout: float) -> str:
        assert select.select([inotify], [], [], timeout)[0], f"nothing created in {directory} within {timeout} s"
        event = os.read(inotify, 4096)
        size = struct.unpack_from("iIII", event)[3]
        return event[16 : 16 + size].rstrip(b"\0").decode()

    try:
        yield created
    finally:
        os.close(inotify)


def test_a_run_into_a_directory_another_run_is_writing_is_refused_before_it_writes(tmp_path):
    """``hydra.run.dir`` held by another process (as every run holds its own: ``held_by_this_run``,
    a lock the kernel lets go of when the holder ends, however it ends): the second run is refused in
    one line naming the holder, and the first run's files are as they were."""
    from trajrl.base.files import held_by_this_run

    run_dir = tmp_path / "run"
    with held_by_this_run(run_dir):
        (run_dir / "metrics.csv").write_text("frames\n500\n")
        proc, left = exited("debug=smoke", f"hydra.run.dir={run_dir}", cwd=tmp_path, pythonpath=TESTS)
    failed_with(
        proc,
        2,
        f"trajrl: configuration error: hydra.run.dir='{run_dir}': another trajrl run (pid {os.getpid()}) is "
        "writing into this directory; give this run another (hydra.run.dir=<dir>), or wait for that one to end",
    )
    assert not left, left
    assert (run_dir / "metrics.csv").read_text() == "frames\n500\n"
    assert not {"config.yaml", "command.txt", "overrides.yaml", "checkpoints"} & set(os.listdir(run_dir))


def test_a_multirun_goes_on_past_a_job_that_fails_and_exits_non_zero_naming_it(tmp_path):
    """Three jobs: one refused by the config check, one whose environment returns a NaN reward mid-run,
    one that trains. Each failing job says why in its own line, the third runs to its end, and the last
    line names the two that failed; the sweep exits with the higher code (2: a setting to fix)."""
    proc, left = exited(
        "--multirun",
        "debug=smoke",
        "collector=sync",
        "total_frames=600",
        *MISBEHAVING_IN_COLLECTORS,
        "env.id=NanReward-v1,NanReward-v0,Float64Observation-v0",
        "hydra.sweep.dir=sweep",
        cwd=tmp_path,
        timeout=180,
        pythonpath=TESTS,
    )
    err = failed_with(
        proc,
        2,
        "trajrl: 2 of 3 jobs failed (each said why above), the others ran to their end: "
        f"job 0 ({tmp_path / 'sweep' / '0'}): exit 2; job 1 ({tmp_path / 'sweep' / '1'}): exit 1",
        "trajrl: configuration error: env.id='NanReward-v1': is not a registered gymnasium id",
        "trajrl: run failed: collection failed: CollectorFailed: collector environment 0: env.id=NanReward-v0: ",
    )
    assert not left, left
    assert (tmp_path / "sweep" / "2" / "checkpoints" / "latest.pt").exists(), err[-3000:]
    assert "run directory   " + str(tmp_path / "sweep" / "2") in proc.stdout


def test_a_tensorboard_writer_that_fails_mid_run_is_said_once_and_the_run_goes_on(run_in):
    """TensorBoard's event file replaced by a directory once the run writes it (its next write fails
    with IsADirectoryError, as a full disk or a removed file fail it): the run says so in one warning,
    goes on without TensorBoard to its end (exit 0), with every metrics row and its checkpoint, and no
    writer thread's traceback."""
    run = run_in(
        "collector=sync", "logger.backends=[csv,tensorboard]", "loop.log_every_frames=100", "total_frames=1000"
    )
    events = run.dir / "logs" / "tensorboard"
    deadline = time.monotonic() + 90
    while not (found := list(events.glob("events.out.tfevents.*"))):
        assert run.proc.poll() is None and time.monotonic() < deadline, run.proc.communicate()[1][-3000:]
        time.sleep(0.05)
    found[0].unlink()
    found[0].mkdir()
    err = run.end(within=120)
    said = run.out + err
    assert run.proc.returncode == 0, err[-3000:]
    assert "Traceback" not in said and "Exception in thread" not in said, said[-3000:]
    warned = [line for line in said.splitlines() if "logger failed at" in line]
    assert len(warned) == 1 and "the TensorboardLogger logger failed at " in warned[0], said[-3000:]
    assert (
        "(IsADirectoryError: " in warned[0] and "the run goes on without it, metrics.csv keeps every row" in warned[0]
    )
    rows = read_metrics(run.dir)
    assert int(rows[-1]["frames"]) >= 1000 and len(rows) >= 5, rows[-1]
    run.assert_checkpoint_loads()
    run.assert_nothing_left()
