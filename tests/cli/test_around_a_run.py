"""What goes wrong around a run on a user's own machine, through the CLI in a subprocess: a replay
buffer larger than the machine and wandb online without a login are refused before anything starts
(exit 2, one line, no traceback, no run directory, no process left); a bad step under
``collector=async_batched`` ends the run in its one line alone; the files a run keeps survive a
full disk and an interrupted export (docs/faults.md, "Around a run")."""

import contextlib
import os
import signal
import subprocess
import sys

import pytest
from helpers import TESTS, cli_environment, exited, failed_with
from process_groups import processes_now

LARGE = ("env=gym", "env.import_module=misbehaving_envs", "env.id=LargeObservations-v0")


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
