"""What several test modules use: the real CLI in a subprocess, reading a run's metrics,
processes left behind, and environments written into a test's directory (imported
by the CLI through ``env.import_module``). Fixtures around them are in conftest.py."""

import atexit
import contextlib
import csv
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import torch
from process_groups import processes_in_group, processes_now
from tensordict import TensorDict
from torchrl.data import LazyTensorStorage, TensorDictReplayBuffer

from trajrl.base.keys import LOG_PROB_KEY, MASK_KEY, TRAJ_KEY
from trajrl.replay.episodes import EpisodeSampler, as_sequences
from trajrl.report import runs

TESTS = Path(__file__).resolve().parent  # helpers.py and the test environments (known_envs, bad_envs, ...)
REPO = TESTS.parent


def cli_environment(*pythonpath) -> dict[str, str]:
    """The environment a CLI run gets: this one's, unbuffered, without ``HYDRA_FULL_ERROR`` (errors
    as users see them), ``pythonpath`` (where extra env modules are) before what the caller's
    ``PYTHONPATH`` holds (where trajrl's own packages may be)."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    paths = [str(p) for p in (*pythonpath, os.environ.get("PYTHONPATH")) if p]
    if paths:
        env["PYTHONPATH"] = os.pathsep.join(paths)
    env.pop("HYDRA_FULL_ERROR", None)
    return env


def trajrl(*args, cwd, timeout=120, pythonpath=None, fresh=False):
    """``python -m trajrl *args`` in ``cwd`` (``pythonpath``: where extra env modules are), forked from
    this test process's ``CliForks`` server unless ``fresh`` (a new interpreter); ``subprocess.run``'s
    result, ``subprocess.TimeoutExpired`` past ``timeout``."""
    if not fresh:
        return cli_forks().exited(*args, cwd=cwd, timeout=timeout, pythonpath=pythonpath)[0]
    return subprocess.run(
        [sys.executable, "-m", "trajrl", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=cli_environment(pythonpath),
        stdin=subprocess.DEVNULL,
    )


def run_block(title: str, tmp_path: Path, before: str = "", after: str = "") -> str:
    """The Python block titled ``# <title>`` in README.md or a page of docs/, run as a script in
    ``tmp_path`` between ``before`` and ``after``: its output (it must exit 0)."""
    pages = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
    blocks = [b for page in pages for b in re.findall(r"```python\n(.*?)```", page.read_text(), flags=re.S)]
    script = tmp_path / "example.py"
    script.write_text(before + next(b for b in blocks if b.startswith(f"# {title}\n")) + after)
    proc = subprocess.run(
        [sys.executable, str(script)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=180,
        stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout


def trajrl_without(package: str, *args, cwd, timeout=120):
    """``python -m trajrl *args`` in a process where ``package`` cannot be imported (an extra not installed)."""
    without = f"import sys; sys.modules[{package!r}] = None; from trajrl.__main__ import main; main()"
    return subprocess.run(
        [sys.executable, "-c", without, *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=cli_environment(),
        stdin=subprocess.DEVNULL,
    )


def exited(*args, cwd, timeout=120, pythonpath=None, fresh=False) -> tuple[subprocess.CompletedProcess, list[str]]:
    """``trajrl(*args)`` in a process group of its own: the finished process, and the processes of
    its group at the moment it exited. Forked from ``cli_forks()`` unless ``fresh``: then a new
    interpreter, its output in pipes (the group listed as soon as it has exited, while threads
    read its pipes: reading them to their end waits for whatever still holds them)."""
    from concurrent.futures import ThreadPoolExecutor

    if not fresh:
        return cli_forks().exited(*args, cwd=cwd, timeout=timeout, pythonpath=pythonpath)
    env = cli_environment(pythonpath)
    proc = subprocess.Popen(
        [sys.executable, "-m", "trajrl", *args],
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
    )
    with ThreadPoolExecutor(2) as readers:
        out, err = readers.submit(proc.stdout.read), readers.submit(proc.stderr.read)
        try:
            code = proc.wait(timeout=timeout)
        finally:
            left = processes_now(proc.pid)
            if proc.poll() is None or left:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
        return subprocess.CompletedProcess(proc.args, code, out.result(), err.result()), left


class CliForks:
    """``python -m trajrl`` at its own work's CPU time: each command runs ``trajrl.__main__.cli()`` in
    a child of a server that imported the CLI, torch and TorchRL once (tests/cli_forks.py), in a
    session of its own, with the environment a fresh interpreter would get. ``cli_forks()``: this
    test process's own."""

    def __init__(self):
        self.server = subprocess.Popen(
            [sys.executable, str(TESTS / "cli_forks.py")],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=cli_environment(),
        )
        self.lock = threading.Lock()
        self.asked = 0  # requests sent: a reply names its request (one a test left unread is skipped)

    def ask(self, op: str, **fields) -> dict:
        """The server's answer to ``op`` (tests/cli_forks.py)."""
        with self.lock:
            self.asked += 1
            self.server.stdin.write(json.dumps({"id": self.asked, "op": op, **fields}) + "\n")
            self.server.stdin.flush()
            reply = {}
            while reply.get("id") != self.asked:
                line = self.server.stdout.readline()
                if not line:
                    raise RuntimeError(f"the CLI's fork server ended (exit {self.server.wait(10)})")
                reply = json.loads(line)
        return reply

    def exited(self, *args, cwd, timeout=120, pythonpath=None) -> tuple[subprocess.CompletedProcess, list[str]]:
        """What ``exited(*args, cwd=cwd, fresh=True)`` returns."""
        env = cli_environment(pythonpath)
        reply = self.ask("run", args=list(args), cwd=str(cwd), env=env, timeout=timeout)
        proc = subprocess.CompletedProcess(["trajrl", *args], reply["code"], reply["out"], reply["err"])
        if proc.returncode is None:
            raise subprocess.TimeoutExpired(proc.args, timeout, proc.stdout, proc.stderr)
        return proc, reply["left"]

    def start(self, *args, cwd, env: dict[str, str]) -> "Forked":
        """``python -m trajrl *args`` started in ``cwd`` with environment ``env``, running on."""
        return Forked(self, self.ask("start", args=list(args), cwd=str(cwd), env=env)["pid"], ["trajrl", *args])

    def close(self) -> None:
        self.server.stdin.close()
        self.server.wait(10)


class Forked:
    """What the tests use of a ``subprocess.Popen`` (text output), for a command ``CliForks`` started:
    ``pid``, ``args``, ``returncode``, ``poll``, ``wait``, ``communicate``, ``send_signal``, ``kill``."""

    def __init__(self, forks: CliForks, pid: int, args: list[str]):
        self.forks, self.pid, self.args = forks, pid, args
        self.returncode: int | None = None
        self.said = ("", "")

    def poll(self) -> int | None:
        if self.returncode is None:
            reply = self.forks.ask("wait", pid=self.pid, timeout=0)
            if reply["code"] is not None:
                self.returncode, self.said = reply["code"], (reply["out"], reply["err"])
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            if deadline is not None and time.monotonic() > deadline:
                raise subprocess.TimeoutExpired(self.args, timeout)
            time.sleep(0.05)
        return self.returncode

    def communicate(self, timeout: float | None = None) -> tuple[str, str]:
        self.wait(timeout)
        return self.said

    def send_signal(self, signum: int) -> None:
        if self.poll() is None:
            os.kill(self.pid, signum)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


_cli_forks: CliForks | None = None


def cli_forks() -> CliForks:
    """This test process's ``CliForks``, started on first use (again if it ended), closed at exit."""
    global _cli_forks
    if _cli_forks is None or _cli_forks.server.poll() is not None:
        _cli_forks = CliForks()
        atexit.register(_cli_forks.close)
    return _cli_forks


def failed_with(proc, code: int, line: str, *texts: str, traceback: bool = False) -> str:
    """Assert that a finished ``python -m trajrl`` ended with exit ``code``, its last line on
    stderr starting with ``line``, each of ``texts`` in that stderr and (unless ``traceback``:
    a worker's own report may hold one) no traceback; return its stderr."""
    err = proc.stderr
    assert proc.returncode == code, err[-3000:]
    assert err.strip(), "nothing on stderr"
    assert err.strip().splitlines()[-1].startswith(line), err[-3000:]
    for text in texts:
        assert text in err, (text, err[-3000:])
    assert traceback or "Traceback" not in err, err[-3000:]
    return err


def collector_sampler_pairs(collectors, samplers, samplers_with: str = "multi_async") -> list:
    """Every collector x sampler pair as test parameters. Each sampler with the collector
    ``samplers_with`` and each collector with the default sampler (prioritized_slice) run by default;
    the other pairs repeat those code paths (a sampler reads the buffer whichever collector
    filled it) and run with -m slow."""
    import pytest

    return [
        pytest.param(
            collector,
            sampler,
            marks=() if collector == samplers_with or sampler == "prioritized_slice" else pytest.mark.slow,
        )
        for collector in collectors
        for sampler in samplers
    ]


def read_metrics(run_dir: Path) -> list[dict]:
    """``metrics.csv`` as written (strings; a column a row has no value for is empty)."""
    with open(run_dir / "metrics.csv") as f:
        return list(csv.DictReader(f))


def rows_of(run_dir: Path) -> list[dict]:
    """``metrics.csv`` as numbers, each row with the columns it has a value for (as ``trajrl plot`` reads it)."""
    return runs.read_metrics(run_dir / "metrics.csv")


def run_cli(tmp_path, *args, timeout=180, fresh=False):
    """``trajrl(*args)`` in ``tmp_path``, with the test environments importable (``env.import_module=known_envs``)."""
    pythonpath = os.pathsep.join([str(tmp_path), str(TESTS)])
    return trajrl(*args, cwd=tmp_path, timeout=timeout, pythonpath=pythonpath, fresh=fresh)


def kill_a_worker_writing(workers, timeout: float) -> int:
    """SIGKILL to one of ``workers()`` inside a journalled write into the shared buffer (its journal
    whole in the run's scratch directory, the write lock held), within ``timeout`` s; its pid.

    Linux's inotify tells the moment a journal ``write-<pid>.pt`` is renamed into place in a run's
    scratch directory (``trajrl-counters-*``); the worker then copies its steps into the storage and
    removes the journal (``trajrl.replay.writer.EpisodeWriter.extend``: milliseconds). The worker is
    stopped (SIGSTOP) and killed only if its journal is still there: inside its write for certain;
    else (the event read too late) it goes on (SIGCONT) and its next write is waited for."""
    import ctypes
    import glob
    import re
    import select
    import struct
    import tempfile

    in_moved_to, in_create, in_isdir = 0x80, 0x100, 0x40000000
    libc = ctypes.CDLL(None, use_errno=True)
    inotify = libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
    assert inotify >= 0, os.strerror(ctypes.get_errno())
    scratch: dict[int, str] = {}  # watch descriptor -> a run's scratch directory

    def watch(path: str, mask: int) -> int:
        return libc.inotify_add_watch(inotify, os.fsencode(path), mask)

    def stopped(pid: int) -> bool:
        """Once SIGSTOP has stopped ``pid`` (False: it has exited)."""
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            try:
                state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
            except (OSError, IndexError):
                return False
            if state in "TtZX":
                return state in "Tt"
        raise AssertionError(f"worker {pid} did not stop within 5 s of SIGSTOP")

    try:
        top = watch(tempfile.gettempdir(), in_create)  # scratch directories made from now on
        for path in glob.glob(os.path.join(tempfile.gettempdir(), "trajrl-counters-*")):  # and those made before
            scratch[watch(path, in_moved_to)] = path
        ours, foreign = set(workers()), set()
        deadline = time.monotonic() + timeout
        while (left := deadline - time.monotonic()) > 0:
            if not select.select([inotify], [], [], left)[0]:
                continue
            events, buffer, offset = [], os.read(inotify, 1 << 16), 0
            while offset < len(buffer):
                wd, mask, _, size = struct.unpack_from("iIII", buffer, offset)
                name = buffer[offset + 16 : offset + 16 + size].rstrip(b"\0").decode()
                offset += 16 + size
                events.append((wd, mask, name))
            for wd, mask, name in events:
                if wd == top and mask & in_isdir and name.startswith("trajrl-counters-"):
                    path = os.path.join(tempfile.gettempdir(), name)
                    scratch[watch(path, in_moved_to)] = path
                    continue
                journal = re.fullmatch(r"write-(\d+)\.pt", name)
                if wd not in scratch or not mask & in_moved_to or journal is None:
                    continue
                pid = int(journal.group(1))
                if pid not in ours and pid not in foreign:  # a worker started since: looked for once
                    ours = set(workers())
                    foreign |= {pid} - ours
                    continue  # that took a while: its next write
                if pid not in ours or not os.path.exists(os.path.join(scratch[wd], name)):
                    continue
                os.kill(pid, signal.SIGSTOP)
                if not stopped(pid):
                    continue  # it exited meanwhile
                if os.path.exists(os.path.join(scratch[wd], name)):  # stopped inside its write
                    os.kill(pid, signal.SIGKILL)
                    return pid
                os.kill(pid, signal.SIGCONT)  # stopped past it
        raise AssertionError(f"no worker was seen writing within {timeout} s")
    finally:
        os.close(inotify)


class Run:
    """``python -m trajrl`` in its own process group (as a shell would start it): forked from
    ``cli_forks()`` (``self.proc`` a ``Forked``), or a new interpreter if ``fresh``."""

    def __init__(self, tmp_path: Path, *overrides: str, fresh: bool = False):
        self.dir = tmp_path / "run"
        env = cli_environment(tmp_path, TESTS)  # the test environments (bad_envs)
        args = ["debug=smoke", "loop.checkpoint_every_frames=500", *overrides, f"hydra.run.dir={self.dir}"]
        if not fresh:  # forked from cli_forks(): a ``Forked``
            self.proc = cli_forks().start(*args, cwd=tmp_path, env=env)
            self.pgid = self.proc.pid
            return
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "trajrl", *args],
            cwd=tmp_path,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
        )
        self.pgid = self.proc.pid

    def wait_for_checkpoint(self, timeout: float = 90) -> None:
        """Until training is under way and has saved a checkpoint."""
        deadline = time.monotonic() + timeout
        while not (self.dir / "checkpoints" / "latest.pt").exists():
            assert self.proc.poll() is None, self.proc.communicate()[1][-3000:]
            assert time.monotonic() < deadline, "no checkpoint in time"
            time.sleep(0.2)

    def workers(self) -> list[int]:
        """The run's processes that are collector workers: spawned (children of the run), or forked
        from the run's fork server (children of a child of the run)."""
        parents = {}
        for pid in processes_in_group(self.pgid):
            with contextlib.suppress(OSError, IndexError):
                parents[pid] = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
        found = []
        for pid, parent in parents.items():
            with contextlib.suppress(OSError):
                spawned = parent == self.proc.pid and b"spawn_main" in Path(f"/proc/{pid}/cmdline").read_bytes()
                if spawned or parents.get(parent) == self.proc.pid:
                    found.append(pid)
        return found

    def end(self, within: float = 30) -> str:
        """Its stderr once it has ended (its stdout: ``self.out``), asserting it ended within ``within`` seconds."""
        start = time.monotonic()
        try:
            self.out, err = self.proc.communicate(timeout=within)
        except subprocess.TimeoutExpired:
            os.killpg(self.pgid, signal.SIGUSR1)  # every process prints its threads' stacks
            time.sleep(2)
            os.killpg(self.pgid, signal.SIGKILL)
            _, err = self.proc.communicate()
            raise AssertionError(f"the run did not end within {within} s; its stacks:\n{err[-12000:]}") from None
        assert time.monotonic() - start < within
        return err

    def failed_with(self, code: int, line: str, *texts: str, within: float = 60, traceback: bool = False) -> str:
        """``failed_with`` of this run, once it has ended (within ``within`` s); its stderr."""
        err = self.end(within=within)
        return failed_with(
            subprocess.CompletedProcess(self.proc.args, self.proc.returncode, self.out, err),
            code,
            line,
            *texts,
            traceback=traceback,
        )

    def assert_nothing_left(self, within: float = 10) -> None:
        deadline = time.monotonic() + within
        while processes_in_group(self.pgid):
            if time.monotonic() > deadline:
                left = processes_in_group(self.pgid)
                os.killpg(self.pgid, signal.SIGKILL)
                raise AssertionError(f"processes left behind: {left}")
            time.sleep(0.2)

    def assert_checkpoint_loads(self) -> dict:
        import trajrl
        from trajrl.checkpoint import load_checkpoint

        saved = load_checkpoint(self.dir)
        assert saved["frames"] > 0
        agent = trajrl.load_agent(self.dir)
        assert agent.algo.updates == saved["algo"]["updates"]
        return saved

    def kill(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.pgid, signal.SIGKILL)
            self.proc.wait(10)


# ---------------------------------------------------------------- data built by hand
def episodes(lengths, first_id=0, terminal=True):
    """Flat episodes as a collector with trajs_per_batch writes them."""
    parts = []
    for i, length in enumerate(lengths):
        steps = torch.arange(length)
        done = steps == length - 1
        seen = torch.randn(length + 1, 3)  # each step observes what the one before led to
        parts.append(
            TensorDict(
                {
                    TRAJ_KEY: torch.full((length,), first_id + i),
                    "step_count": steps.unsqueeze(-1),
                    "is_init": (steps == 0).unsqueeze(-1),
                    "observation": seen[:-1],
                    ("next", "observation"): seen[1:],
                    ("next", "done"): done.unsqueeze(-1),
                    ("next", "terminated"): (done & terminal).unsqueeze(-1),
                },
                [length],
            )
        )
    return torch.cat(parts)


def zero_padded(flat):
    """Flat episodes as a [N, T] zero-padded batch with ("collector", "mask")."""
    batch = as_sequences(flat, flat["is_init"])
    mask = batch[MASK_KEY]
    padded = batch.apply(lambda x: x * mask.reshape(*mask.shape, *([1] * (x.ndim - 2))).to(x.dtype))
    padded.set(MASK_KEY, mask)
    return padded


def padded_buffer(capacity=10_000, sampler=None):
    from trajrl.replay.incoming import WholeEpisodes
    from trajrl.replay.writer import EpisodeWriter

    storage = LazyTensorStorage(capacity)
    buffer = TensorDictReplayBuffer(
        storage=storage, sampler=sampler or EpisodeSampler(), batch_size=4, writer=EpisodeWriter()
    )
    buffer.append_transform(WholeEpisodes())
    return buffer


def slices(lengths, horizon, obs_dim=2, seed=0):
    gen = torch.Generator().manual_seed(seed)
    n = len(lengths)
    mask = torch.arange(horizon) < torch.tensor(lengths).unsqueeze(-1)
    step_count = torch.arange(horizon).expand(n, horizon).clone() + torch.tensor([0, 7, 0, 30][:n]).unsqueeze(-1)
    return TensorDict(
        {
            "observation": torch.randn(n, horizon, obs_dim, generator=gen),
            "action": torch.rand(n, horizon, 1, generator=gen) * 4 - 2,
            "step_count": step_count.unsqueeze(-1),
            "recurrent_state_h": torch.randn(n, horizon, 1, 8, generator=gen),
            "recurrent_state_c": torch.randn(n, horizon, 1, 8, generator=gen),
            MASK_KEY: mask,
            ("next", "observation"): torch.randn(n, horizon, obs_dim, generator=gen),
            ("next", "reward"): torch.randn(n, horizon, 1, generator=gen),
            ("next", "terminated"): torch.zeros(n, horizon, 1, dtype=torch.bool),
        },
        [n, horizon],
    )


def random_episodes(lengths, obs_dim=3, seed=0):
    """A padded [N, T] batch of episodes as PPO's collector yields them, each ending terminated."""
    gen = torch.Generator().manual_seed(seed)
    n, horizon = len(lengths), max(lengths)
    mask = torch.arange(horizon) < torch.tensor(lengths).unsqueeze(-1)
    terminated = torch.zeros(n, horizon, 1, dtype=torch.bool)
    terminated[torch.arange(n), torch.tensor(lengths) - 1] = True
    return TensorDict(
        {
            "observation": torch.randn(n, horizon, obs_dim, generator=gen),
            "action": torch.randint(2, (n, horizon), generator=gen),
            LOG_PROB_KEY: -torch.rand(n, horizon, generator=gen),
            "is_init": (torch.arange(horizon) == 0).expand(n, horizon).unsqueeze(-1),
            MASK_KEY: mask,
            ("next", "observation"): torch.randn(n, horizon, obs_dim, generator=gen),
            ("next", "reward"): torch.ones(n, horizon, 1),
            ("next", "terminated"): terminated,
            ("next", "done"): terminated.clone(),
        },
        [n, horizon],
    )


def wait_for_frames(pipe, frames, timeout=90.0):
    """Until the started collector has stored ``frames`` frames in the pipeline's buffer."""
    deadline = time.monotonic() + timeout
    while pipe.buffer.write_count < frames:
        assert time.monotonic() < deadline, f"only {pipe.buffer.write_count} frames stored in {timeout} s"
        time.sleep(0.05)


def collect_frames(pipe, frames: int) -> None:
    """Start the pipeline's collector, wait until it has stored ``frames`` frames, and shut it down."""
    pipe.collector.start()
    try:
        wait_for_frames(pipe, frames)
    finally:
        pipe.collector.async_shutdown()


def acting_rollout(pipe, steps: int):
    """``steps`` steps acted by the pipeline's policy in one of its environments
    (episodes reset inside); the state it stores is zero at is_init and only there."""
    env = pipe.env_fn()
    with torch.no_grad():
        rollout = env.rollout(steps, pipe.policy, break_when_any_done=False)
    env.close()
    is_init = rollout["is_init"].reshape(-1)
    state = rollout["recurrent_state_h" if "recurrent_state_h" in rollout.keys() else "recurrent_state"]
    assert state[is_init].abs().sum() == 0
    assert state[~is_init].abs().sum() > 0
    return rollout


# ---------------------------------------------------------------- runs trained in the test's own process
def processes_below(pid: int | None = None) -> set[int]:
    """Live processes started under ``pid`` (default: this one), their own children included (from /proc)."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[0] != "Z":
            children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    found, todo = set(), [pid or os.getpid()]
    while todo:
        below = children.get(todo.pop(), [])
        found.update(below)
        todo.extend(below)
    return found


def session_processes() -> set[int]:
    """What is kept for the whole test session: multiprocessing's fork server (conftest.py) and
    resource tracker, and the CLI's server (``cli_forks()``)."""
    from multiprocessing import forkserver, resource_tracker

    started = {forkserver._forkserver._forkserver_pid, resource_tracker._resource_tracker._pid}
    return started - {None} | ({_cli_forks.server.pid} if _cli_forks is not None else set())


def assert_nothing_left_since(before: set[int], within: float = 10) -> None:
    """Every process started under this one since ``before = processes_below()`` has ended
    (the session's own processes aside): what ``Run.assert_nothing_left`` checks of a CLI run."""

    deadline = time.monotonic() + within
    while left := processes_below() - before - session_processes():
        if time.monotonic() > deadline:
            named = []
            for pid in sorted(left):
                command = ""
                with contextlib.suppress(OSError):
                    command = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
                named.append(f"{pid} {command.strip()[:160]}")
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            raise AssertionError(f"processes left behind (killed now): {'; '.join(named)}")
        time.sleep(0.2)


def assert_checkpoint_loads(run_dir: Path) -> dict:
    """What ``Run.assert_checkpoint_loads`` checks, of any run directory."""
    import trajrl
    from trajrl.checkpoint import load_checkpoint

    saved = load_checkpoint(run_dir)
    assert saved["frames"] > 0
    agent = trajrl.load_agent(run_dir)
    assert agent.algo.updates == saved["algo"]["updates"]
    return saved


class Trained:
    """``Run``'s run, trained in the test's process (``trajrl.train``) rather than through the
    CLI, for tests of what a run does and writes rather than of the CLI around it: ``train()``
    returns the final metrics, ``out`` is what the CLI would print (the metrics rows, then the
    summary) and ``dir`` the run directory. ``Run`` runs the CLI."""

    def __init__(self, tmp_path: Path, *overrides: str):
        self.dir = tmp_path / "run"
        self.overrides = ["debug=smoke", "loop.checkpoint_every_frames=500", *overrides]
        self.before = processes_below()

    def train(self) -> dict:
        import io

        import trajrl
        from trajrl.training.progress import Progress
        from trajrl.training.run import summary

        cfg = trajrl.compose(self.overrides)
        rows = io.StringIO()
        final = trajrl.train(cfg, self.dir, progress=Progress(int(cfg.total_frames), stream=rows))
        self.out = rows.getvalue() + summary(final) + "\n"
        return final

    def train_while(self, action) -> dict:
        """``train()``, with ``action()`` run beside it in a thread (what a user does to a run
        under way); an error it raised is raised here once the run has ended."""
        import threading

        errors = []

        def act():
            try:
                action()
            except BaseException as err:
                errors.append(err)

        thread = threading.Thread(target=act, name="test-action", daemon=True)
        thread.start()
        try:
            return self.train()
        finally:  # a run that failed, too: the action's own error first
            thread.join(60)
            assert not thread.is_alive(), "the action did not end with the run"
            if errors:
                raise errors[0]

    def wait_for_checkpoint(self, timeout: float = 90) -> None:
        """Until training is under way and has saved a checkpoint."""
        deadline = time.monotonic() + timeout
        while not (self.dir / "checkpoints" / "latest.pt").exists():
            assert time.monotonic() < deadline, "no checkpoint in time"
            time.sleep(0.2)

    def workers(self) -> list[int]:
        """The collector workers (environment processes, for async_batched) of the run under way:
        the processes started since it began, the session's own aside."""
        return sorted(processes_below() - self.before - session_processes())

    def kill_a_worker_writing(self, timeout: float = 60) -> int:
        """From a thread beside ``train()``: SIGKILL to a collector worker inside a write into the
        shared buffer (``kill_a_worker_writing``); its pid."""
        switch = sys.getswitchinterval()
        sys.setswitchinterval(0.0005)  # woken by a write, this thread gets the GIL from the learner's at once
        try:
            return kill_a_worker_writing(self.workers, timeout)
        finally:
            sys.setswitchinterval(switch)

    def assert_nothing_left(self, within: float = 10) -> None:
        assert_nothing_left_since(self.before, within)

    def assert_checkpoint_loads(self) -> dict:
        return assert_checkpoint_loads(self.dir)

    # ------------------------------------------------------------ a failing run, as the CLI reports it
    def failed_with(
        self,
        code: int,
        line: str,
        *texts: str,
        beside=None,
        within: float | None = None,
        capfd=None,
        traceback: bool = False,
    ) -> str:
        """``train()`` (``train_while(beside)`` with an action) of a run that fails, and what
        ``Run.failed_with`` checks of the CLI's stderr, on what the CLI would print: the error
        turned into its line and exit code by the CLI's own ``trajrl.__main__.one_line``, the
        exit code ``code``, the line starting with ``line`` and holding each of ``texts``; the
        run ended within ``within`` s (if given) of its start, or of the action's end. With
        pytest's ``capfd`` (this process's stderr while it trained: the learner's; its workers
        write to the session's fork server's), and unless ``traceback``, no traceback printed
        there (kept in ``stderr``). Returns that line (``"trajrl: ..."``)."""
        from trajrl.__main__ import one_line

        assert traceback or capfd is not None, "no traceback: checked on capfd"
        if capfd is not None:
            capfd.readouterr()  # what the test printed before the run
        start = [time.monotonic()]

        def act():
            beside()
            start.append(time.monotonic())

        try:
            self.train_while(act) if beside is not None else self.train()
        except BaseException as err:  # as the CLI's one_line_errors: RunInterrupted is one
            reported = one_line(err, "trajrl", self.dir)
            if reported is None:  # the CLI would print its traceback
                raise
            said, exit_code = reported
        else:
            raise AssertionError("the run did not fail: it reached its end")
        said = f"trajrl: {said}"
        assert within is None or time.monotonic() - start[-1] < within, f"the run did not end within {within} s"
        assert exit_code == code, said
        assert said.startswith(line), said
        for text in texts:
            assert text in said, (text, said)
        if capfd is not None:
            err = self.stderr = capfd.readouterr().err
            assert traceback or "Traceback" not in err, err[-3000:]
        return said


def help_settings(text: str) -> dict:
    """``{name: value}`` of every line of ``--help``'s settings section (values read as YAML)."""
    import yaml

    values = {}
    for line in text.split("== Settings of this run", 1)[1].splitlines():
        line = re.sub(r" \([^()]*; declared [^()]*\)", "", line)  # where a composed value comes from
        found = re.match(r"  (\S+) = (.*)", line)
        if found:  # the value: the shortest text before " | " or ": " that YAML reads ({"n": 8} has one)
            for end in (m.start() for m in re.finditer(r" \| |: ", found[2])):
                try:
                    values[found[1]] = yaml.safe_load(found[2][:end])
                    break
                except yaml.YAMLError:
                    continue
    return values


def job_settings(job: dict) -> dict:
    """``{name: value}`` of a composed job config (``--cfg job``'s) as ``--help`` names them:
    top-level values and each group's keys but the option's selector (``kind``, ``name``)."""
    from trajrl.configuration.settings import GROUPS

    values = {key: value for key, value in job.items() if key not in GROUPS}
    for group, (selector, _) in GROUPS.items():
        values |= {f"{group}.{key}": value for key, value in job[group].items() if key != selector}
    return values


def loop_of(pipe, cfg, run_dir, **parts):
    """The loop a run of ``cfg`` trains with on ``pipe`` (``trajrl.train``'s, without its
    evaluator, loggers and progress bar): checkpoints in ``run_dir``, ``parts`` added
    (``evaluate=``, ``keep_best=True`` for ``best.pt``)."""
    from trajrl.checkpoint import Checkpointer
    from trajrl.configuration.settings import settings_of
    from trajrl.training import loops
    from trajrl.training.metrics import MetricsLog
    from trajrl.training.progress import Progress

    checkpointer = Checkpointer(run_dir, cfg.algo.name, pipe.algo, pipe.policy_state, pipe.stored)
    if parts.pop("keep_best", False):
        parts["keep_best"] = checkpointer.best
    run_parts = loops.RunParts(
        log=MetricsLog(None), progress=Progress(cfg.total_frames, live=False), checkpoint=checkpointer, **parts
    )
    return loops.loop_of(pipe, run_parts, settings_of(cfg, "loop"), cfg.total_frames)
