"""When ``python -m trajrl`` returns, everything it started has ended: no process of its
process group is left, not even a zombie, at the moment it exits (no grace period: a script
that runs trajrl and then starts the next job, or looks for stray processes, sees what is
left right then). Whether it refused its settings, finished, resumed from a corrupt
checkpoint, or was stopped by Ctrl-C or SIGTERM while collector workers ran; and a signal
stops a run with its one line wherever in the learner it lands."""

import os
import signal
import subprocess
import time

import pytest
from helpers import processes_now, read_metrics


def exit_of(run, within: float = 90) -> tuple[int, list[str], str]:
    """``(exit code, processes of its group as it exited, stderr)`` of a ``helpers.Run``.

    The group is listed as soon as the run's own process has exited, before its pipes are read:
    reading them to the end waits for every process that holds them (the fork server and the
    resource tracker inherit them), which would hide what is left behind. (A run's output
    is a few kB, well within a pipe's buffer: the run never waits for it to be read.)"""
    try:
        code = run.proc.wait(timeout=within)
    except subprocess.TimeoutExpired:
        run.end(within=1)  # kills the group; raises with the stacks
    left = processes_now(run.pgid)
    return code, left, run.end()


def test_the_command_ends_after_its_threads_exit_handlers_and_output_not_its_teardown(tmp_path):
    """``trajrl`` ends through ``exit_now`` (its modules are not torn down: about 0.7 s of CPU with
    torch imported): a thread still running is waited for, the exit handlers run, what was
    written but not flushed is printed, and the exit code is the one asked for."""
    import sys
    import textwrap

    handled = tmp_path / "handled"
    script = textwrap.dedent(
        """
        import atexit, sys, threading, time
        from trajrl.base.processes import exit_now
        atexit.register(lambda: open(sys.argv[1], "w").write("the handler ran"))
        threading.Thread(target=lambda: (time.sleep(0.3), print("the thread ended"))).start()
        sys.stdout.write("written, not flushed")
        exit_now(3)
        """
    )
    proc = subprocess.run([sys.executable, "-c", script, str(handled)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 3, proc.stderr
    assert "the thread ended" in proc.stdout and "written, not flushed" in proc.stdout, proc.stdout
    assert handled.read_text() == "the handler ran"


def test_a_refused_setting_leaves_no_process(run_in):
    code, left, err = exit_of(run_in("algo.gamma=1.5"))
    assert code == 2, err[-3000:]
    assert err.startswith("trajrl: configuration error: algo.gamma=1.5: must be between 0 and 1"), err
    assert left == []


def test_a_finished_run_leaves_no_process(smoke_run):
    """The session's smoke run (collector workers, every logger): listed as it exited (``run_once``)."""
    proc, _ = smoke_run
    assert "== trajrl run finished ==" in proc.stdout
    assert proc.left == []


def test_a_resume_from_a_corrupt_checkpoint_leaves_no_process(run_in, tmp_path):
    """Refused once the fork server (and with it the resource tracker) has started."""
    stopped = tmp_path / "run"  # the run directory run_in's runs use: resumed in place
    (stopped / "checkpoints").mkdir(parents=True)
    (stopped / "overrides.yaml").write_text("- debug=smoke\n")
    (stopped / "config.yaml").write_text("seed: 0\n")
    (stopped / "checkpoints" / "latest.pt").write_bytes(os.urandom(4096))
    code, left, err = exit_of(run_in(f"resume={stopped}"))
    assert code == 2, err[-3000:]
    lines = err.strip().splitlines()
    assert len(lines) == 1, err[-3000:]
    (line,) = lines
    assert line.startswith(f"trajrl: cannot resume: {stopped / 'checkpoints' / 'latest.pt'} cannot be read"), line
    assert left == []


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["ctrl_c", "sigterm"])
def test_a_run_stopped_by_ctrl_c_or_sigterm_saves_a_checkpoint_and_leaves_no_process(signum, run_in):
    """Ctrl-C: SIGINT to the whole process group, workers included; SIGTERM: to the run only.
    The run ends within 30 s, says why, exits 128 + signal, keeps its metrics and saves a
    checkpoint of where it stopped."""
    run = run_in("total_frames=1000000", fresh=True)  # a new interpreter, as a user's shell starts it
    run.wait_for_checkpoint()  # training is under way, the collector's workers running
    time.sleep(1.0)  # past the first checkpoint
    os.killpg(run.pgid, signum) if signum == signal.SIGINT else run.proc.send_signal(signum)
    code, left, err = exit_of(run, within=30)  # it ends within 30 s
    assert code == 128 + signum, err[-3000:]
    name = signal.Signals(signum).name
    assert (
        err.strip().splitlines()[-1].startswith(f"trajrl: run stopped: interrupted by {name}; collectors shut down")
    ), err[-3000:]
    assert left == []
    saved = run.assert_checkpoint_loads()
    rows = read_metrics(run.dir)
    assert saved["frames"] >= int(rows[-1]["frames"])  # saved when it stopped, not at the last periodic save
    assert saved["algo"]["updates"] >= float(rows[-1]["train/updates"])


def test_a_signal_while_the_learner_samples_a_batch_still_stops_the_run():
    """TorchRL applies a buffer's transforms inside a tensordict ``unlock_()`` block, whose exit
    turns an exception that is not an ``Exception`` into a RuntimeError: a Ctrl-C that lands
    there reaches the loop as ``RunInterrupted`` all the same (exit 130, not a traceback)."""
    import torch
    from tensordict import TensorDict
    from torchrl.data import LazyTensorStorage, TensorDictReplayBuffer
    from torchrl.envs.transforms import Transform

    from trajrl.base.errors import RunInterrupted
    from trajrl.replay.batches import SequenceSampler

    class SignalArrives(Transform):
        def forward(self, tensordict):
            raise RunInterrupted(signal.SIGINT)

    buffer = TensorDictReplayBuffer(storage=LazyTensorStorage(10), batch_size=2)
    buffer.extend(TensorDict({"observation": torch.zeros(4, 2)}, [4]))
    buffer.append_transform(SignalArrives())
    with pytest.raises(RunInterrupted, match="interrupted by SIGINT"):
        SequenceSampler(buffer, transitions=True).sample()


def test_a_reader_that_stops_reading_ends_the_command_quietly(tmp_path):
    """``trajrl --help | grep -m1 ...``: the pipe closes before the command has written it all.
    The command ends as a shell expects of a closed pipe (exit 128 + SIGPIPE), with nothing on
    stderr (it said "run failed: Broken pipe (the run directory must be writable ...)")."""
    import sys

    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader has gone before the first write
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "trajrl", "--help"],
            cwd=tmp_path,
            stdout=write_end,
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            text=True,
            timeout=60,
        )
    finally:
        os.close(write_end)
    assert proc.returncode == 128 + signal.SIGPIPE, proc.stderr
    assert proc.stderr == ""


FORK_SERVER = """
import json, multiprocessing, os, sys, threading, time
from pathlib import Path

from trajrl.base.processes import end_child_processes, start_fork_server, workers_from_a_fork_server

workers_from_a_fork_server()
multiprocessing.set_forkserver_preload([])  # a server that is a new interpreter imports nothing here
if sys.argv[1] == "thread":
    threading.Thread(target=time.sleep, args=(60,), daemon=True).start()
log = open(sys.argv[2], "w")  # this process's file, not the fork server's
start_fork_server()
worker = multiprocessing.Process(target=print, args=("a worker",))
worker.start()
worker.join()
children = Path(f"/proc/self/task/{os.getpid()}/children").read_text().split()
own = Path("/proc/self/cmdline").read_bytes()
commands = {p: Path(f"/proc/{p}/cmdline").read_bytes() for p in children}
files = []
for p in children:
    for fd in os.listdir(f"/proc/{p}/fd"):
        try:
            files.append(os.readlink(f"/proc/{p}/fd/{fd}"))
        except OSError:  # closed meanwhile
            pass
said = {
    "forked": sum(command == own for command in commands.values()),
    "new": sum(command != own and b"forkserver" in command for command in commands.values()),
    "holds_the_file": sys.argv[2] in files,
    "worker": worker.exitcode,
}
print(json.dumps(said), flush=True)
end_child_processes()
"""


@pytest.mark.parametrize("threads", ["none", "thread"])
def test_the_fork_server_is_a_fork_of_the_cli_unless_the_cli_runs_threads(threads, tmp_path):
    """``start_fork_server``: with the CLI's main thread alone, the server is a fork of it (its command line
    the CLI's own) holding none of its files; with another thread running, multiprocessing starts it as a
    new interpreter. A worker comes from either, and nothing is left when the CLI ends."""
    import json
    import sys

    proc = subprocess.Popen(
        [sys.executable, "-c", FORK_SERVER, threads, str(tmp_path / "log")],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    code = proc.wait(timeout=60)
    left = processes_now(proc.pid)
    out, err = proc.communicate()
    assert code == 0, err[-3000:]
    assert out.splitlines()[0] == "a worker", out
    said = json.loads(out.splitlines()[1])
    forked = threads == "none"
    assert said == {"forked": int(forked), "new": int(not forked), "holds_the_file": False, "worker": 0}, said
    assert left == []
