"""Soak test (by hand, not in CI): recurrent DQN with two worker processes writing into a
small buffer that wraps many times, the live audit on, for a given number of minutes.

    python scripts/soak.py --minutes 10
    python scripts/soak.py --minutes 30 --faults

With ``--faults``, the environments raise now and then (about once every
``--env-fault-every`` steps of a worker, at random) and a worker process is
SIGKILLed every ``--kill-every-minutes``, every other time while it is inside a
write into the shared buffer (holding its lock): the run must survive them all,
with each such write redone whole and every frame and episode accounted for.

Reports what a long run must not do: break the trajectory invariants (audit
violations, in sampled batches and in the whole buffer at the end), lose frames
(episodes the environments finished that never reached the buffer, beyond what
the collectors still hold at shutdown), or grow in memory after warm-up (the
proportional set size of the run's processes, sampled every few seconds).
Exits non-zero when one of them fails.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from trajrl.report.runs import read_metrics

WORKERS, TRAJS_PER_BATCH = 2, 4

#: CartPole without velocities that raises now and then in a collector worker (never in
#: the learner's process, where evaluation steps it).
FLAKY_ENV = """
import multiprocessing
import random

import gymnasium as gym

from trajrl.envs.gym_envs import make_cartpole_novel


class Flaky(gym.Wrapper):
    def __init__(self, every=3000):
        super().__init__(make_cartpole_novel())
        self.every = every

    def step(self, action):
        if multiprocessing.parent_process() is not None and random.random() < 1 / self.every:
            raise RuntimeError("soak: the simulator crashed")
        return self.env.step(action)


gym.register("SoakFlaky-v0", entry_point=Flaky, max_episode_steps=500)
"""


def workers_of(pid: int) -> list[int]:
    """The collector worker processes the run started: spawned by it, or forked by its
    fork server (a child of the run)."""
    children: dict[int, list[tuple[int, bytes]]] = {}
    for proc in Path("/proc").glob("[0-9]*"):
        try:
            parent = int((proc / "stat").read_text().rsplit(")", 1)[1].split()[1])
            children.setdefault(parent, []).append((int(proc.name), (proc / "cmdline").read_bytes()))
        except (OSError, ValueError, IndexError):
            continue
    found = []
    for child, cmdline in children.get(pid, []):
        if b"spawn_main" in cmdline:
            found.append(child)
        elif b"forkserver" in cmdline:
            found.extend(worker for worker, _ in children.get(child, []))
    return found


def writing_worker(workers: list[int], within_s: float = 30.0) -> int | None:
    """One of ``workers`` while it is inside a write into the buffer (its journal in the
    run's scratch directory, the buffer's write lock held), or None if none was seen."""
    journals = [
        (os.path.join(scratch, f"write-{pid}.pt"), pid)
        for pid in workers
        for scratch in glob.glob(os.path.join(tempfile.gettempdir(), "trajrl-counters-*"))
    ]
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        for journal, pid in journals:
            if os.path.exists(journal):
                return pid
        time.sleep(0.0002)
    return None


def group_pss_mib(pgid: int) -> float:
    """Proportional set size of the processes of group ``pgid`` (shared pages counted once)."""
    total_kib = 0
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            if int(stat.read_text().rsplit(")", 1)[1].split()[2]) != pgid:
                continue
            for line in (stat.parent / "smaps_rollup").read_text().splitlines():
                if line.startswith("Pss:"):
                    total_kib += int(line.split()[1])
        except (OSError, ValueError, IndexError):
            continue
    return total_kib / 1024


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--capacity", type=int, default=20_000, help="replay buffer frames (small: it wraps often)")
    parser.add_argument(
        "--warmup-minutes",
        type=float,
        default=None,
        help="memory is compared from here on (default: a fifth of the run)",
    )
    parser.add_argument("--run-dir", type=Path, default=None)
    parser.add_argument("--out", type=Path, default=None, help="also write the report as JSON here")
    parser.add_argument("--faults", action="store_true", help="environments raise, workers are killed")
    parser.add_argument("--env-fault-every", type=int, default=5000, help="a worker's steps per environment error")
    parser.add_argument("--kill-every-minutes", type=float, default=3.0)
    args = parser.parse_args(argv)
    seconds = args.minutes * 60
    warmup_s = (args.warmup_minutes * 60) if args.warmup_minutes is not None else seconds / 5
    run_dir = args.run_dir or Path(tempfile.mkdtemp(prefix="trajrl-soak-"))

    command = [
        sys.executable,
        "-m",
        "trajrl",
        "algo=r2d2",
        "collector=multi_async",
        "sampler=slice",
        f"collector.num_workers={WORKERS}",
        f"trajs_per_batch={TRAJS_PER_BATCH}",
        f"storage.capacity={args.capacity}",
        "total_frames=1000000000",
        f"loop.time_limit_s={seconds}",
        "audit=true",
        "audit_every=50",
        "loop.eval_every_frames=0",
        "loop.eval_episodes=2",
        "loop.log_every_frames=20000",
        "loop.checkpoint_every_frames=200000",
        f"hydra.run.dir={run_dir}",
    ]
    env = dict(os.environ)
    run_dir.mkdir(parents=True, exist_ok=True)
    if args.faults:
        (run_dir / "soak_envs.py").write_text(FLAKY_ENV)
        env["PYTHONPATH"] = os.pathsep.join([str(run_dir), env.get("PYTHONPATH", "")])
        command += [
            "env=gym",
            "env.id=SoakFlaky-v0",
            "env.import_module=soak_envs",
            f"+env.kwargs.every={args.env_fault_every}",
            "collector.max_restarts=1000",
        ]
    print("soak:", " ".join(command[1:]), flush=True)
    stdout = open(run_dir / "soak_stdout.txt", "w")  # the run's final summary names each restart
    proc = subprocess.Popen(
        command,
        stdout=stdout,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        stdin=subprocess.DEVNULL,
        env=env,
    )
    start, samples, kills, inside_a_write = time.monotonic(), [], [], 0
    next_kill = args.kill_every_minutes * 60 if args.faults else float("inf")
    try:
        while proc.poll() is None:
            now = time.monotonic() - start
            samples.append((now, group_pss_mib(proc.pid)))
            if now >= next_kill and now < seconds - 30:
                workers = workers_of(proc.pid)
                writing = writing_worker(workers) if workers and len(kills) % 2 else None
                if workers:
                    victim = writing or workers[len(kills) % len(workers)]
                    os.kill(victim, signal.SIGKILL)
                    kills.append((round(now), victim))
                    inside_a_write += writing is not None
                    print(
                        f"soak: killed worker {victim} at {now:.0f} s" + (" inside its write" if writing else ""),
                        flush=True,
                    )
                next_kill += args.kill_every_minutes * 60
            time.sleep(5)
        _, err = proc.communicate()
        stdout.close()
    except BaseException:
        os.killpg(proc.pid, signal.SIGKILL)
        raise
    if proc.returncode != 0:
        print(err[-3000:], file=sys.stderr)
        print(f"soak: the run failed (exit code {proc.returncode}); run directory {run_dir}", file=sys.stderr)
        return 1

    row = read_metrics(run_dir / "metrics.csv")[-1]
    # From warm-up until training stops (the last seconds are the shutdown: workers exit).
    after_warmup = [mib for t, mib in samples if warmup_s <= t <= seconds - 5]
    base, end, peak = after_warmup[0], after_warmup[-1], max(after_warmup)
    ended = sum(v for k, v in row.items() if k.startswith("collect/worker") and k.endswith("/episodes"))
    env_restarts, worker_restarts = int(row.get("collect/env_restarts", 0)), int(row.get("collect/worker_restarts", 0))
    # Episodes that ended but died with a replaced collector (the ones an environment
    # fault cut are not among those ended: they are dropped and counted apart).
    lost_in_flight = int(row.get("collect/episodes_lost_to_faults", 0)) - env_restarts
    held = ended - row["episode/completed"] - lost_in_flight  # finished, not yet handed over when the run stopped
    report = {
        "minutes": round((time.monotonic() - start) / 60, 2),
        "frames_stored": int(row["frames"]),
        "buffer_wraps": round(row["frames"] / args.capacity, 1),
        "frames_per_s": round(row["time/frames_per_s"]),
        "updates": int(row["train/updates"]),
        "audit_batches_checked": int(row["audit/batches_checked"]),
        "audit_violations": int(row["audit/violations"]),
        "frames_stepped": int(row["collect/frames_stepped"]),
        "frames_in_flight_at_stop": int(row["buffer/frames_in_flight_dropped"]),
        "episodes_ended": int(ended),
        "episodes_stored": int(row["episode/completed"]),
        "episodes_held_by_collectors_at_stop": int(held),
        "episodes_lost": int(max(0.0, held - WORKERS * TRAJS_PER_BATCH)),
        "workers_killed": len(kills),
        "worker_restarts": worker_restarts,
        "workers_killed_inside_a_write": inside_a_write,
        "writes_redone": sum(
            "started a new collector" in line and "its unfinished write redone" in line
            for line in (run_dir / "soak_stdout.txt").read_text().splitlines()
        ),  # the learner's warnings
        "env_restarts": env_restarts,
        "episodes_lost_to_faults_counted": lost_in_flight + env_restarts,
        "frames_lost_to_faults_counted": int(row.get("collect/frames_lost_to_faults", 0)),
        "frames_accounting_closes": int(row["collect/frames_stepped"])
        == int(row["frames"])
        + int(row["buffer/frames_in_flight_dropped"])
        + int(row.get("collect/frames_lost_to_faults", 0)),
        "pss_mib_after_warmup": round(base, 1),
        "pss_mib_end": round(end, 1),
        "pss_mib_peak": round(peak, 1),
        "pss_growth_after_warmup": round(end / base - 1, 4),
        "run_dir": str(run_dir),
    }
    width = max(map(len, report))
    for key, value in report.items():
        print(f"{key:<{width}}  {value}")
    if args.out:
        args.out.write_text(json.dumps({"report": report, "pss_samples": samples}, indent=1))
    ok = (
        report["audit_violations"] == 0
        and report["episodes_lost"] == 0
        and report["frames_accounting_closes"]
        and report["worker_restarts"] == len(kills)
        and report["writes_redone"] >= inside_a_write
        and report["pss_growth_after_warmup"] < 0.05
    )
    print(
        "soak:",
        "passed" if ok else "FAILED",
        "(0 violations, no episode or frame unaccounted for, every kill "
        "survived, memory growth under 5% after warm-up)",
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
