"""Wall-clock to a return of 475 on CartPole without velocities: trajrl's recurrent presets
against RL Baselines3 Zoo's tuned recurrent PPO (sb3-contrib's ``ppo_lstm``), seed by
seed, alternated, on this machine in the same hour.

RL Zoo lives in a Python environment of its own (it pins its own versions):

    python -m venv zoo && zoo/bin/pip install torch==2.13.0 && zoo/bin/pip install rl_zoo3 sb3-contrib
    python scripts/bench_rl_zoo.py --zoo-python zoo/bin/python          # seeds 0-4

Each run is a process timed from its start (its imports and set-up included) to the
moment its evaluation first reaches the threshold, polled every 0.25 s from what it
writes (RL Zoo's ``evaluations.npz``: 10 episodes every 5,000 steps, as the issue
runs it; trajrl's ``metrics.csv``: each preset's own evaluation), and then stopped. A
run that ends its budget first (RL Zoo: its 100,000 steps; trajrl: the preset's
``total_frames``) counts as not reached. Medians over seeds; the ratio is trajrl's
median over RL Zoo's.
"""

from __future__ import annotations

import argparse
import csv
import math
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

THRESHOLD = 475.0
ZOO = [
    "-m",
    "rl_zoo3.train",
    "--algo",
    "ppo_lstm",
    "--env",
    "CartPoleNoVel-v1",
    "--eval-freq",
    "5000",
    "--eval-episodes",
    "10",
    "--n-eval-envs",
    "1",
]


def zoo_evaluations(folder: Path) -> list[tuple[float, float]]:
    """(steps, mean return) of each evaluation RL Zoo has written so far."""
    found = list(folder.glob("ppo_lstm/CartPoleNoVel-v1_*/evaluations.npz"))
    if not found:
        return []
    try:
        with np.load(found[0]) as data:
            return [(float(t), float(r.mean())) for t, r in zip(data["timesteps"], data["results"])]
    except (OSError, ValueError, KeyError, EOFError):  # being written: read it at the next poll
        return []


def trajrl_evaluations(folder: Path) -> list[tuple[float, float]]:
    """(frames, evaluation return) of each evaluation row of a trajrl run so far."""
    path = folder / "metrics.csv"
    if not path.exists():
        return []
    with open(path) as f:
        rows = list(csv.DictReader(f))
    return [(float(r["frames"]), float(r["eval/return"])) for r in rows if r.get("eval/return")]


def timed(command: list[str], folder: Path, read, limit_s: float) -> dict:
    """Run ``command`` until an evaluation ``read(folder)`` reaches the threshold (then stop
    it), it ends, or ``limit_s`` passes: seconds and steps at the threshold (None: not reached)."""
    start = time.monotonic()
    proc = subprocess.Popen(
        command,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
        text=True,
    )
    reached, evals = None, []
    try:
        while time.monotonic() - start < limit_s:
            evals = read(folder)
            hit = [(steps, value) for steps, value in evals if value >= THRESHOLD]
            if hit:
                reached = {"seconds": time.monotonic() - start, "steps": hit[0][0]}
                break
            if proc.poll() is not None:
                break
            time.sleep(0.25)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
    if reached is None and proc.returncode not in (0, None, -signal.SIGTERM):
        raise SystemExit(f"{' '.join(command)} failed ({proc.returncode}):\n{proc.stderr.read()[-3000:]}")
    best = max((value for _, value in evals), default=float("nan"))
    return {**(reached or {"seconds": None, "steps": None}), "best": best, "evals": len(evals)}


def median(values: list) -> float | None:
    """The median, a seed that never reached counted as never (None when that is the median)."""
    value = statistics.median([math.inf if v is None else v for v in values])
    return None if math.isinf(value) else value


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--zoo-python", default="python", help="a Python with rl_zoo3 and sb3-contrib installed")
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2, 3, 4])
    parser.add_argument("--presets", nargs="+", default=["rppo_cartpole_novel", "r2d2_cartpole_novel"])
    parser.add_argument("--limit-s", type=float, default=900, help="longest a run may take")
    parser.add_argument("overrides", nargs="*", help="extra overrides for every trajrl run")
    args = parser.parse_args(argv)

    results: dict[str, list[dict]] = {"RL Zoo ppo_lstm": [], **{p: [] for p in args.presets}}
    with tempfile.TemporaryDirectory() as scratch:
        for seed in args.seeds:  # alternated: the machine's drift over the hour falls on every row alike
            folder = Path(scratch) / f"zoo_{seed}"
            result = timed(
                [args.zoo_python, *ZOO, "--seed", str(seed), "-f", str(folder)], folder, zoo_evaluations, args.limit_s
            )
            results["RL Zoo ppo_lstm"].append(result)
            print(f"seed {seed} RL Zoo ppo_lstm: {result}", flush=True)
            for preset in args.presets:
                folder = Path(scratch) / f"{preset}_{seed}"
                command = [
                    sys.executable,
                    "-m",
                    "trajrl",
                    f"experiment={preset}",
                    f"seed={seed}",
                    *args.overrides,
                    f"hydra.run.dir={folder}",
                ]
                result = timed(command, folder, trajrl_evaluations, args.limit_s)
                results[preset].append(result)
                print(f"seed {seed} {preset}: {result}", flush=True)

    zoo = median([r["seconds"] for r in results["RL Zoo ppo_lstm"]])
    print()
    print(
        f"# wall-clock from process start to an evaluation return >= {THRESHOLD:g} on CartPole without velocities, "
        f"seeds {' '.join(map(str, args.seeds))}, alternated"
    )
    print()
    print("| run | reached | median s to 475 | median steps to 475 | best evaluation (median) | s / RL Zoo's |")
    print("|---|---|---|---|---|---|")
    for name, rows in results.items():
        seconds = median([r["seconds"] for r in rows])
        steps = median([r["steps"] for r in rows])
        ratio = f"{seconds / zoo:.2f}" if seconds is not None and zoo else "–"
        print(
            f"| {name} | {sum(r['seconds'] is not None for r in rows)}/{len(rows)} | "
            f"{'–' if seconds is None else f'{seconds:.0f}'} | {'–' if steps is None else f'{steps:,.0f}'} | "
            f"{statistics.median([r['best'] for r in rows]):.1f} | {ratio} |"
        )


if __name__ == "__main__":
    main()
