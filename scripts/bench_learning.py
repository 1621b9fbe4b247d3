"""Learning benchmark: each preset over several seeds, through the real CLI.

For every preset (and ``default``: ``python -m trajrl`` with no preset) it reports how
many seeds reached the preset's threshold within its budget and how many ended at or
above it, the frames and the wall-clock at which the deterministic evaluation first
reached it (median over seeds), the final and best evaluation return and the area under
the evaluation curve (mean +- std over seeds), against a uniformly random policy
measured in the same run; it writes a markdown table and a learning-curve PNG.
Learning claims need 5 seeds or more: the spread between seeds is larger than most
differences between settings.

    python scripts/bench_learning.py                       # every row, seeds 0 1 2 3 4
    python scripts/bench_learning.py --presets ppo_cartpole --seeds 0 1
    python scripts/bench_learning.py --reuse               # train only the runs missing under --out
    python scripts/bench_learning.py --presets default --jobs 2   # two seeds at once
    python scripts/bench_learning.py --presets default --seeds 0 1 env=cue_memory --threshold 0.9
    python scripts/bench_learning.py --presets default --confirm --jobs 2   # a confirmation run: seeds 1000..1009
    python scripts/bench_learning.py --suite --jobs 2                    # the default on the travel suite

Two-seed screens rank candidates; a row's claim stands on a *confirmation run* (``--confirm``):
ten seeds that no screen used (1000 .. 1009), each count reported as k/n with its 90 % Wilson
interval. ``--suite`` trains the default agent (``python -m trajrl env=gym env.id=<task>
total_frames=<its budget>``) on every task of the travel suite (``trajrl.envs.tasks.SUITE``: eight
partially observable tasks, each with a threshold fixed before the default was tuned on it) and
prints one table: per task, the seeds whose final evaluation and whose best agent are at or
above the threshold, and scores normalised to 0 = the random policy, 1 = the threshold.

After its run, each seed's kept agents are evaluated afresh over ``--final-episodes``
deterministic episodes (100 by default; ``trajrl evaluate <run dir> --episodes 100`` and
``--which latest``): the best agent (the run's best evaluation) and the last one, reported
beside the in-run figures. ``--jobs 2`` trains two seeds at once (each learner on one torch
thread): 1.33x the throughput of one at a time on 2 cores; frames compare, wall-clock does not.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import os
import signal
import statistics
import subprocess
import sys
import time
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import gymnasium as gym
import numpy as np
import yaml

os.environ.setdefault("RL_LOGGING_LEVEL", "WARNING")  # TorchRL's INFO lines (the kept agents' evaluation) stay out
import trajrl.envs.gym_envs  # noqa: E402
from trajrl.envs.tasks import SUITE, SuiteTask  # noqa: E402
from trajrl.report.summary import wilson_interval  # noqa: E402

trajrl.envs.gym_envs.register()  # trajrl's environment ids (idempotent)

#: A confirmation run's seeds: no screen uses them (screens take 0 .. 999).
CONFIRM_SEEDS = list(range(1000, 1010))


@dataclass
class Target:
    env_id: str
    threshold: float
    within_frames: int
    kwargs: dict | None = None  # the environment's keyword arguments (for the random policy's return)
    metric: str = "eval/return"  # or "eval/success": the share of evaluation episodes ending at their goal
    reward_scale: float = 1.0  # env.reward_scale: the random policy's return is scaled as the run's are
    import_module: str | None = None  # env.import_module: the user's module that registers env_id


TARGETS = {  # the targets: evaluation return >= threshold within this many frames
    "default": Target("trajrl/CartPoleNoVel-v1", 475.0, 0),  # python -m trajrl, no preset: within its total_frames
    "r2d2_cartpole_novel": Target("trajrl/CartPoleNoVel-v1", 475.0, 50_000),
    "rppo_cartpole_novel": Target("trajrl/CartPoleNoVel-v1", 475.0, 50_000),
    "ppo_cartpole": Target("CartPole-v1", 475.0, 50_000),
    "rsac_cartpole_novel": Target("trajrl/CartPoleNoVel-v1", 475.0, 16_000),
    "rsac_pendulum_novel": Target("trajrl/PendulumNoVel-v1", -200.0, 30_000),
    "rppo_pendulum_novel": Target("trajrl/PendulumNoVel-v1", -200.0, 100_000),  # continuous actions
    # long memory: a cue at the first step named at the 60th (eval return: +1 right, -1 wrong, 20 episodes)
    "r2d2_cue_memory": Target("trajrl/CueMemory-v0", 0.9, 50_000),
    "rppo_cue_memory": Target("trajrl/CueMemory-v0", 0.9, 50_000),
    "rsac_cue_memory": Target("trajrl/CueMemory-v0", 0.9, 30_000, {"continuous": True}),  # its total_frames
    "ppo_cue_memory": Target("trajrl/CueMemory-v0", 0.9, 50_000),  # no memory: the baseline that cannot
    # hindsight relabelling: HER's bit flipping, 15 bits, with and without it (eval success, 20 episodes)
    "r2d2_bit_flipping_her": Target("trajrl/BitFlipping-v0", 0.9, 60_000, {"n": 15}, "eval/success"),
    "r2d2_bit_flipping": Target("trajrl/BitFlipping-v0", 0.9, 60_000, {"n": 15}, "eval/success"),
    # the memory version: the goal shown at the first step only
    "r2d2_bit_flipping_memory_her": Target(
        "trajrl/BitFlipping-v0", 0.9, 60_000, {"n": 5, "goal_first_step_only": True}, "eval/success"
    ),
    "r2d2_bit_flipping_memory": Target(
        "trajrl/BitFlipping-v0", 0.9, 60_000, {"n": 5, "goal_first_step_only": True}, "eval/success"
    ),
    # the continuous goal task, recurrent SAC, with and without hindsight
    "rsac_point_reach_her": Target("trajrl/PointReach-v0", 0.9, 15_000, None, "eval/success"),
    "rsac_point_reach": Target("trajrl/PointReach-v0", 0.9, 15_000, None, "eval/success"),
}


def default_target(overrides: list[str], threshold: float) -> Target:
    """The default run with ``overrides``: its environment, ``threshold`` times its
    ``env.reward_scale``, within its ``total_frames``."""
    import trajrl

    cfg = trajrl.compose(list(overrides))
    scale = float(cfg.env.reward_scale)
    kwargs = dict(cfg.env.kwargs or {})
    module = cfg.env.get("import_module")
    return Target(
        str(cfg.env.id), threshold * scale, int(cfg.total_frames), kwargs, reward_scale=scale, import_module=module
    )


def random_policy(target: Target, episodes: int = 20, seed: int = 0) -> float:
    """The target's metric under uniformly random actions: the mean return, or the share
    of episodes that end at their goal (``info["is_success"]`` at the last step)."""
    from trajrl.envs.gym_envs import import_env_module

    import_env_module(target.import_module)
    env = gym.make(target.env_id, **(target.kwargs or {}))
    env.action_space.seed(seed)
    values = []
    for episode in range(episodes):
        env.reset(seed=seed + episode)
        total, done, info = 0.0, False, {}
        while not done:
            _, reward, terminated, truncated, info = env.step(env.action_space.sample())
            total, done = total + float(reward) * target.reward_scale, terminated or truncated
        values.append(float(info.get("is_success", 0.0)) if target.metric == "eval/success" else total)
    env.close()
    return float(np.mean(values))


#: The training runs under way: each is stopped (SIGTERM: it saves a checkpoint) when this script is.
RUNNING: set[subprocess.Popen] = set()


def stop_runs(signum: int, _frame) -> None:
    """SIGTERM (or SIGINT) to this script: the same to each run under way, then exit; none is left running."""
    for proc in list(RUNNING):
        proc.send_signal(signal.SIGTERM)
    raise SystemExit(128 + signum)


def run_seed(preset: str, extra: list[str], reuse: bool, seed: int, run_dir: Path) -> list[dict]:
    """``run`` with the arguments in the order ``pool.map`` gives them."""
    return run(preset, seed, run_dir, extra, reuse)


def run(preset: str, seed: int, run_dir: Path, extra: list[str], reuse: bool = False) -> list[dict]:
    """Train ``preset`` with ``seed`` through the CLI; the rows of its metrics.csv.

    With ``reuse``, a finished run already in ``run_dir`` with the same overrides
    (its overrides.yaml) is read instead of trained again; one stopped before its
    ``total_frames`` (a signal saves its checkpoint too) is trained again."""
    overrides = [*([] if preset == "default" else [f"experiment={preset}"]), f"seed={seed}", *extra]
    if reuse and finished(run_dir) and yaml.safe_load((run_dir / "overrides.yaml").read_text()) == overrides:
        print(f"  seed {seed}: reused ({run_dir})", flush=True)
        return read_rows(run_dir)
    (run_dir / "kept_agents.json").unlink(missing_ok=True)  # measured on an earlier run in this directory
    command = [sys.executable, "-m", "trajrl", *overrides, f"hydra.run.dir={run_dir}"]
    start = time.monotonic()
    proc = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL
    )
    RUNNING.add(proc)
    try:
        _, stderr = proc.communicate()
    finally:
        RUNNING.discard(proc)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed:\n{stderr[-3000:]}")
    print(f"  seed {seed}: {time.monotonic() - start:.0f} s ({run_dir})", flush=True)
    return read_rows(run_dir)


def kept_agents(run_dir: Path, target: Target, episodes: int) -> dict[str, float]:
    """The run's best and last agents, each over ``episodes`` deterministic episodes
    (``trajrl evaluate``'s ``evaluate_run``, seeded as its CLI is): the target's metric of each.
    Written to ``<run dir>/kept_agents.json`` and read from there when already measured."""
    saved = run_dir / "kept_agents.json"
    if saved.exists():
        known = json.loads(saved.read_text())
        if known.get("episodes") == episodes:
            return known
    from trajrl.report.evaluate_run import evaluate_run, load_run

    result: dict = {"episodes": episodes}
    for which in ("best", "latest"):
        cfg, agent = load_run(run_dir, which)
        stats = evaluate_run(cfg, agent, episodes)
        result[which] = stats["success"] if target.metric == "eval/success" else stats["return"]
    saved.write_text(json.dumps(result))
    return result


def kept_in_parallel(dirs: list[Path], target: Target, episodes: int, jobs: int) -> list[dict[str, float]]:
    """``kept_agents`` of every run in ``dirs``, ``jobs`` processes at once (one torch thread each)."""
    if episodes <= 0:
        return []
    with ProcessPoolExecutor(max(1, jobs), initializer=one_thread) as pool:
        return list(pool.map(partial(kept_agents, target=target, episodes=episodes), dirs))


def one_thread() -> None:
    import torch

    torch.set_num_threads(1)


def finished(run_dir: Path) -> bool:
    """Whether the run in ``run_dir`` trained its whole ``total_frames`` (its last metrics row)."""
    needed = [run_dir / name for name in ("overrides.yaml", "config.yaml", "metrics.csv", "checkpoints/latest.pt")]
    if not all(path.exists() for path in needed):
        return False
    rows = read_rows(run_dir)
    return bool(rows) and rows[-1]["frames"] >= yaml.safe_load((run_dir / "config.yaml").read_text())["total_frames"]


def read_rows(run_dir: Path) -> list[dict]:
    with open(run_dir / "metrics.csv") as f:
        return [{k: float(v) for k, v in row.items() if v != ""} for row in csv.DictReader(f)]


def evaluations(rows: list[dict], metric: str = "eval/return") -> list[tuple[float, float, float]]:
    """(frames, ``metric``, wall-clock s) of every evaluation in a run. The metric is read
    back from float32 (a success of 18/20 is 0.8999999762): rounded to 6 decimals, so
    that it compares equal to the threshold it is."""
    return [(r["frames"], round(r[metric], 6), r["time/elapsed_s"]) for r in rows if metric in r]


def first_reaching(evals, threshold: float) -> tuple[float, float] | None:
    for frames, value, elapsed in evals:
        if value >= threshold:
            return frames, elapsed
    return None


def area(evals, budget: int) -> float:
    """Area under the evaluation curve over the budget, divided by the budget: the mean
    evaluation return over the run (0 frames counts as the first evaluation)."""
    frames = [0.0] + [f for f, _, _ in evals if f <= budget * 1.05]
    values = [evals[0][1]] + [v for f, v, _ in evals if f <= budget * 1.05]
    return float(np.trapezoid(values, frames) / max(frames[-1], 1.0))


def mean_std(values: list[float], digits: int = 1) -> str:
    if not values:
        return "-"
    std = statistics.stdev(values) if len(values) > 1 else 0.0
    return f"{statistics.mean(values):.{digits}f} ± {std:.{digits}f}"


def count(successes: int, trials: int) -> str:
    """``k/n`` and its 90 % Wilson interval: ``9/10 [0.65, 0.98]``."""
    low, high = wilson_interval(successes, trials)
    return f"{successes}/{trials} [{low:.2f}, {high:.2f}]"


def kept_cell(values: list[float], threshold: float, digits: int) -> str:
    """How many seeds' agents are at or above ``threshold`` (with the interval), and their mean +- std."""
    if not values:
        return "-"
    return f"{count(sum(v >= threshold for v in values), len(values))} >= {threshold:g}; {mean_std(values, digits)}"


def median_or_miss(values: list[float | None], fmt: str) -> str:
    """Median over seeds, a seed that never reached the threshold counting as infinite."""
    ordered = sorted(math.inf if v is None else v for v in values)
    middle = (
        ordered[len(ordered) // 2]
        if len(ordered) % 2
        else 0.5 * (ordered[len(ordered) // 2 - 1] + ordered[len(ordered) // 2])
    )
    return "not reached" if math.isinf(middle) else format(middle, fmt)


def plot(curves: dict[str, list[list[tuple[float, float, float]]]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(curves), figsize=(5 * len(curves), 3.8), squeeze=False)
    for ax, (preset, runs) in zip(axes[0], curves.items()):
        grid = np.array(sorted({frames for run in runs for frames, _, _ in run}))
        values = np.array([np.interp(grid, [f for f, _, _ in run], [v for _, v, _ in run]) for run in runs])
        for run in runs:
            ax.plot([f for f, _, _ in run], [v for _, v, _ in run], color="grey", alpha=0.35, lw=0.8)
        mean, std = values.mean(0), values.std(0)
        ax.plot(grid, mean, color="C0", label=f"mean of {len(runs)} seeds")
        ax.fill_between(grid, mean - std, mean + std, color="C0", alpha=0.2, label="± std")
        ax.axhline(TARGETS[preset].threshold, color="C3", ls="--", lw=0.8, label="threshold")
        ax.axvline(TARGETS[preset].within_frames, color="C3", ls=":", lw=0.8)
        ax.set(title=preset, xlabel="frames", ylabel=TARGETS[preset].metric.replace("eval/", "evaluation "))
        ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> None:
    signal.signal(signal.SIGTERM, stop_runs)
    signal.signal(signal.SIGINT, stop_runs)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--presets", nargs="+", default=list(TARGETS), choices=list(TARGETS))
    parser.add_argument("--seeds", nargs="+", type=int, default=None, help="default: 0 1 2 3 4")
    parser.add_argument(
        "--confirm",
        action="store_true",
        help=f"a confirmation run: seeds {CONFIRM_SEEDS[0]}..{CONFIRM_SEEDS[-1]}, which no screen uses",
    )
    parser.add_argument(
        "--suite",
        nargs="*",
        default=None,
        choices=list(SUITE),
        metavar="TASK",
        help=f"the default agent on the travel suite (every task, or those named: {', '.join(SUITE)})",
    )
    parser.add_argument("--out", type=Path, default=Path("outputs/bench_learning"), help="where the runs go")
    parser.add_argument(
        "--report", type=Path, default=None, help="where learning.md and learning.png go (default: --out)"
    )
    parser.add_argument(
        "--reuse", action="store_true", help="read finished runs already under --out instead of training them again"
    )
    parser.add_argument("--jobs", type=int, default=1, help="seeds trained at once (2 on a 2-core machine)")
    parser.add_argument(
        "--threshold",
        type=float,
        default=475.0,
        help="the default run's threshold, before env.reward_scale multiplies it (475: CartPole's; "
        "0.9 for env=cue_memory); its task and budget are what the overrides make of the default run",
    )
    parser.add_argument(
        "--final-episodes",
        type=int,
        default=100,
        help="episodes each seed's best and last agents are evaluated over after the run (0: not)",
    )
    parser.add_argument("overrides", nargs="*", help="extra overrides for every run (e.g. total_frames=30000)")
    args = parser.parse_args()
    if any(o.lstrip("+").startswith("loop.stop_at_return") for o in args.overrides):
        parser.error(
            "loop.stop_at_return ends a run when it first reaches a return: this benchmark judges "
            "whether a run keeps what it learnt (final >= threshold), so every run trains to its frames"
        )
    if args.confirm and args.seeds is not None:
        parser.error("--confirm trains seeds 1000..1009, which no screen uses: leave --seeds out")
    args.seeds = CONFIRM_SEEDS if args.confirm else args.seeds if args.seeds is not None else [0, 1, 2, 3, 4]
    report = args.report or args.out
    report.mkdir(parents=True, exist_ok=True)
    if args.suite is not None:
        return suite([SUITE[name] for name in args.suite or SUITE], list(args.suite or SUITE), args, report)

    n = args.final_episodes
    lines = [
        "| preset | threshold | within | seeds reaching it | final >= threshold | frames to reach (median) | "
        "wall-clock to reach (median, s) | final eval | best eval | area under the curve | "
        f"best agent over {n} episodes | last agent over {n} episodes | random policy |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    curves, details = {}, []
    for preset in args.presets:
        target = TARGETS[preset]
        if preset == "default":  # its task, threshold and budget: what the overrides make of it
            target = TARGETS[preset] = default_target(args.overrides, args.threshold)
        print(f"{preset}: threshold {target.threshold:g} within {target.within_frames:,} frames", flush=True)
        baseline = random_policy(target)
        dirs = [args.out / preset / f"seed_{seed}" for seed in args.seeds]
        with ThreadPoolExecutor(max(1, args.jobs)) as pool:  # each job is a CLI process
            rows = list(pool.map(partial(run_seed, preset, args.overrides, args.reuse), args.seeds, dirs))
        runs = [evaluations(r, target.metric) for r in rows]
        kept = kept_in_parallel(dirs, target, n, args.jobs)
        curves[preset] = runs
        reached = [first_reaching(evals, target.threshold) for evals in runs]
        in_budget = [r if r is not None and r[0] <= target.within_frames else None for r in reached]
        finals, bests = [evals[-1][1] for evals in runs], [max(v for _, v, _ in evals) for evals in runs]
        what = "" if target.metric == "eval/return" else f"{target.metric.split('/')[1]} "
        large = target.metric == "eval/return" and abs(target.threshold) >= 10  # CartPole's, not a share
        digits, point = (1, 0) if large else (3, 2)  # table, curves
        row = (
            f"| {preset} | {what}{target.threshold:g} | {target.within_frames:,} | "
            f"{count(sum(r is not None for r in in_budget), len(runs))} | "
            f"{count(sum(v >= target.threshold for v in finals), len(runs))} | "
            f"{median_or_miss([r[0] if r else None for r in in_budget], ',.0f')} | "
            f"{median_or_miss([r[1] if r else None for r in in_budget], '.0f')} | "
            f"{mean_std(finals, digits)} | {mean_std(bests, digits)} | "
            f"{mean_std([area(e, target.within_frames) for e in runs], digits)} | "
            f"{kept_cell([k['best'] for k in kept], target.threshold, digits)} | "
            f"{kept_cell([k['latest'] for k in kept], target.threshold, digits)} | "
            f"{baseline:.{digits}f} |"
        )
        lines.append(row)
        print(row, flush=True)
        for i, (seed, evals, reach) in enumerate(zip(args.seeds, runs, in_budget)):
            curve = ", ".join(f"{f / 1000:.0f}k: {v:.{point}f}" for f, v, _ in evals)
            if kept:
                curve += (
                    f"; over {n} episodes afterwards: best agent {kept[i]['best']:.{point}f}, "
                    f"last agent {kept[i]['latest']:.{point}f}"
                )
            late = [v for f, v, _ in evals if target.within_frames / 2 <= f <= target.within_frames]
            summary = (
                f"first >= {target.threshold:g} {f'at {reach[0]:,.0f} frames' if reach else 'not within the budget'}; "
                f"mean {target.metric} in the budget's second half "
                f"{statistics.mean(late) if late else math.nan:.{point}f}"
            )
            details.append(f"- {preset}, seed {seed} (frames: {target.metric}): {curve} ({summary})")
            print(f"  seed {seed}: {curve} ({summary})", flush=True)
    table = "\n".join(lines)
    command = "python scripts/bench_learning.py " + " ".join(sys.argv[1:])
    kind = (
        f"A confirmation run: seeds {args.seeds[0]}..{args.seeds[-1]}, which no screen used."
        if args.confirm
        else f"Seeds {' '.join(map(str, args.seeds))}: a screen unless no screen used them."
    )
    (report / "learning.md").write_text(
        f"`{command}`\n\n{kind} Counts: k/n [90 % Wilson interval].\n\n{table}\n\nEvery evaluation:\n\n"
        + "\n".join(details)
        + "\n"
    )
    plot(curves, report / "learning.png")
    print("\n" + table)
    print(f"\nwrote {report / 'learning.md'} and {report / 'learning.png'}")


def suite(tasks: list[SuiteTask], names: list[str], args: argparse.Namespace, report: Path) -> None:
    """The default agent on each of ``tasks`` (``env=gym env.id=<task> total_frames=<its budget>``
    and the extra overrides), ``args.seeds`` each; one table, written to ``<report>/suite.md``."""
    n = args.final_episodes
    lines = [
        "| task | what it asks | threshold | within | final >= threshold | reached | "
        f"best agent over {n} episodes >= threshold | final, normalised | best agent, normalised | "
        "random policy (measured) |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    jobs = []  # every (task, seed) at once, so that --jobs keeps every core busy across tasks
    budgets = [o.split("=", 1)[1] for o in args.overrides if o.startswith("total_frames=")]  # a smoke test's
    for name, task in zip(names, tasks):
        budget = [] if budgets else [f"total_frames={task.frames}"]
        extra = ["env=gym", f"env.id={task.env_id}", *budget, *args.overrides]
        jobs += [(name, seed, extra) for seed in args.seeds]
    with ThreadPoolExecutor(max(1, args.jobs)) as pool:
        done = list(pool.map(lambda j: run("default", j[1], args.out / j[0] / f"seed_{j[1]}", j[2], args.reuse), jobs))
    details = []
    for name, task in zip(names, tasks):
        target = Target(task.env_id, task.threshold, task.frames)
        rows = [rows for (job, *_), rows in zip(jobs, done) if job == name]
        runs = [evaluations(r) for r in rows]
        dirs = [args.out / name / f"seed_{seed}" for seed in args.seeds]
        kept = [k["best"] for k in kept_in_parallel(dirs, target, n, args.jobs)]
        finals = [evals[-1][1] for evals in runs]
        reached = [first_reaching(evals, task.threshold) is not None for evals in runs]
        score = [task.normalised(v) for v in finals]
        kept_score = [task.normalised(v) for v in kept]
        lines.append(
            f"| {name} | {task.kind} | {task.threshold:g} | {int(budgets[-1] if budgets else task.frames):,} | "
            f"{count(sum(v >= task.threshold for v in finals), len(finals))} | {count(sum(reached), len(runs))} | "
            f"{count(sum(v >= task.threshold for v in kept), len(kept)) if kept else '-'} | "
            f"{mean_std(score, 2)} | {mean_std(kept_score, 2)} | {random_policy(target):.3g} |"
        )
        print(lines[-1], flush=True)
        for seed, evals, best in zip(args.seeds, runs, kept or [None] * len(runs)):
            curve = ", ".join(f"{f / 1000:.0f}k: {v:.3g}" for f, v, _ in evals)
            after = "" if best is None else f"; best agent over {n} episodes {best:.3g}"
            details.append(f"- {name}, seed {seed}: {curve}{after}")
    table = "\n".join(lines)
    command = "python scripts/bench_learning.py " + " ".join(sys.argv[1:])
    (report / "suite.md").write_text(
        f"`{command}`\n\nThe default agent, {len(args.seeds)} seeds a task; counts: k/n [90 % Wilson interval]; "
        "normalised: 0 = the random policy, 1 = the threshold (mean ± std over seeds).\n\n"
        f"{table}\n\nEvery evaluation:\n\n" + "\n".join(details) + "\n"
    )
    print("\n" + table + f"\n\nwrote {report / 'suite.md'}")


if __name__ == "__main__":
    main()
