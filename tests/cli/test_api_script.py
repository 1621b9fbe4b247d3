"""The Python API as a user's own script runs it: a fresh interpreter with TorchRL's default start
method (``spawn``), not the fork server the test processes and the CLI start their workers from."""

import contextlib
import json
import os
import signal
import subprocess
import sys
import time

from helpers import cli_environment, rows_of
from process_groups import processes_now

SCRIPT = """
import json, multiprocessing, os, sys, threading, time
from pathlib import Path

import trajrl


def spawned_children():
    found = set()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            parent = int(stat.read_text().rsplit(")", 1)[1].split()[1])
            command = (stat.parent / "cmdline").read_bytes()
        except (OSError, IndexError):
            continue
        if parent == os.getpid() and b"spawn_main" in command:
            found.add(int(stat.parent.name))
    return found


if __name__ == "__main__":
    seen, done = set(), threading.Event()

    def watch():
        while not done.is_set():
            seen.update(spawned_children())
            time.sleep(0.2)

    threading.Thread(target=watch, daemon=True).start()
    # the command the design names: workers writing into a shared buffer, slices drawn uniformly
    settings = ["collector=multi_async", "sampler=slice", "debug=smoke", "total_frames=1000", "audit=true"]
    cfg = trajrl.compose([*settings, "audit_every=1"])
    final = trajrl.train(cfg, sys.argv[1])
    done.set()
    print(json.dumps({"start_method": multiprocessing.get_start_method(), "spawned": sorted(seen)}))
"""


def test_a_users_script_trains_through_the_api_with_spawned_workers(tmp_path):
    """``trajrl.train`` under ``if __name__ == "__main__"`` in a fresh interpreter: its two collector
    workers are spawned (TorchRL's default), the run reaches ``total_frames`` with both writing and
    every sampled batch audited, and nothing of it is left once the script has exited."""
    (tmp_path / "script.py").write_text(SCRIPT)
    proc = subprocess.Popen(
        [sys.executable, "script.py", str(tmp_path / "run")],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=cli_environment(),
        stdin=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        out, err = proc.communicate(timeout=300)
    finally:
        deadline = time.monotonic() + 5  # an exited child is reaped once its parent has gone
        while (left := processes_now(proc.pid)) and time.monotonic() < deadline:
            time.sleep(0.1)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)  # whatever is left, once listed
    assert proc.returncode == 0, err[-3000:]
    assert not left, left
    said = json.loads(out.strip().splitlines()[-1])
    assert said["start_method"] == "spawn" and len(said["spawned"]) == 2, said
    last = rows_of(tmp_path / "run")[-1]
    assert last["frames"] >= 1000 and last["train/updates"] > 0, last
    assert last["collect/worker0/frames"] > 0 and last["collect/worker1/frames"] > 0, last
    assert last["audit/violations"] == 0 and last["audit/batches_checked"] == last["train/updates"], last
