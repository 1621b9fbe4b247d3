"""``train(cfg)``: check the config once, build the pipeline, run its loop, leave a run directory."""

from __future__ import annotations

import contextlib
import csv
import datetime
import logging
import os
import time
from collections.abc import Iterator
from pathlib import Path

import torch
from omegaconf import DictConfig, OmegaConf

from trajrl.base.files import held_by_this_run
from trajrl.base.signals import interrupts_raise
from trajrl.checkpoint import Checkpointer, LoopState, checkpoint_path
from trajrl.configuration.compose import validate
from trajrl.configuration.settings import settings_of
from trajrl.factory import build
from trajrl.factory.logger import flat_hparams
from trajrl.replay.audit import LiveAudit
from trajrl.training.evaluator import Evaluator
from trajrl.training.loops import RunParts, loop_of
from trajrl.training.metrics import MetricsLog
from trajrl.training.progress import Progress

log = logging.getLogger("trajrl")


def new_run_dir() -> Path:
    """``outputs/<date>/<time>`` like the CLI's, for runs started from Python."""
    now = datetime.datetime.now()
    run_dir = Path("outputs") / now.strftime("%Y-%m-%d") / now.strftime("%H-%M-%S-%f")
    run_dir.mkdir(parents=True, exist_ok=False)
    return run_dir


def train(cfg: DictConfig, run_dir: str | Path | None = None, progress: Progress | None = None) -> dict[str, float]:
    """Run the training the CLI would run for ``cfg``; return the final metrics.

    The run directory gets the resolved config (``config.yaml``), ``metrics.csv``,
    ``checkpoints/latest.pt`` (every ``loop.checkpoint_every_frames`` and at the end) and
    ``checkpoints/best.pt`` (the agent at its best evaluation);
    ``progress`` prints the metrics rows (default: to stdout, a live status line on a terminal).
    With ``resume=<run dir>`` in ``cfg``, the run continues from that directory's
    checkpoint (and, unless ``run_dir`` says otherwise, in that directory).
    """
    cfg = validate(cfg)
    if run_dir is None and cfg.resume is not None:
        run_dir = cfg.resume
    run_dir = Path(run_dir) if run_dir is not None else new_run_dir()
    with held_by_this_run(run_dir):  # another process writing there: refused before a file is written
        return train_in(cfg, run_dir, progress)


def train_in(cfg: DictConfig, run_dir: Path, progress: Progress | None) -> dict[str, float]:
    """``train``'s run, in ``run_dir``, which this process holds."""
    if cfg.resume is None:  # a new run's config is there even if it fails to build
        OmegaConf.save(cfg, run_dir / "config.yaml", resolve=True)
    torch.set_num_threads(1)
    loop_settings = settings_of(cfg, "loop")
    ordered = bool(cfg.deterministic)
    with interrupts_raise(), deterministic_algorithms(ordered, cfg.device), build(cfg, run_dir) as pipe:
        solved = still_solved(pipe.resumed, loop_settings.stop_at_return, int(cfg.total_frames))
        if solved is not None:  # nothing to train: the run's config, metrics and checkpoints stay as they are
            return {**last_row(run_dir), **finished_files(run_dir), "nothing_trained": solved}
        if cfg.resume is not None:
            OmegaConf.save(cfg, run_dir / "config.yaml", resolve=True)
        resume_at = (pipe.resumed.frames, pipe.algo.updates) if pipe.resumed else None
        metrics = MetricsLog(run_dir, pipe.loggers, resume_at=resume_at)
        metrics.hparams(flat_hparams(OmegaConf.to_container(cfg, resolve=True)))
        evaluator = None
        if loop_settings.eval_episodes > 0:
            evaluator = Evaluator(
                pipe.eval_env_fn,
                pipe.greedy_policy,
                loop_settings.eval_episodes,
                seed=int(cfg.seed) + 10_000,
                max_steps=pipe.eval_max_steps,
                env_id=cfg.env.id,
                step_timeout_s=loop_settings.stall_timeout_s,
                same_episodes=ordered,
            )
        checkpointer = Checkpointer(run_dir, cfg.algo.name, pipe.algo, pipe.policy_state, pipe.stored)
        parts = RunParts(
            log=metrics,
            progress=progress or Progress(int(cfg.total_frames)),
            evaluate=evaluator,
            audit=LiveAudit(int(cfg.audit_every)) if cfg.audit else None,
            checkpoint=checkpointer,
            keep_best=checkpointer.best,
        )
        loop = loop_of(pipe, parts, loop_settings, int(cfg.total_frames))
        try:
            final = loop.run()
        finally:
            if evaluator is not None:
                evaluator.close()
        if pipe.counters is not None:
            final["restarts"] = pipe.counters.fault_log.read()
    return {**final, **finished_files(run_dir)}


@contextlib.contextmanager
def deterministic_algorithms(on: bool, device: str) -> Iterator[None]:
    """``deterministic=true``: torch's deterministic algorithms for the run (on CUDA, with the cuBLAS
    workspace they need, set before cuBLAS starts), as they were before afterwards."""
    if not on:
        yield
        return
    if device != "cpu":
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    before = torch.are_deterministic_algorithms_enabled()
    torch.use_deterministic_algorithms(True)
    try:
        yield
    finally:
        torch.use_deterministic_algorithms(before)


def finished_files(run_dir: Path) -> dict[str, str]:
    """Where a finished run is: its directory and checkpoints."""
    files = {"run_dir": str(run_dir), "checkpoint": str(checkpoint_path(run_dir))}
    if checkpoint_path(run_dir, "best").exists():
        files["best_checkpoint"] = str(checkpoint_path(run_dir, "best"))
    return files


def still_solved(resumed: LoopState | None, stop_at_return: float | None, total_frames: int) -> str | None:
    """Why a resumed run has nothing to train (None: it trains): it stopped at an evaluation
    that reached ``loop.stop_at_return``, and neither that threshold nor the budget was raised."""
    if resumed is None or resumed.solved_return is None or stop_at_return is None:
        return None
    budget = resumed.total_frames if resumed.total_frames is not None else total_frames
    if stop_at_return > resumed.solved_return or total_frames > budget:
        return None
    return (
        f"the run was solved at {resumed.frames:,} frames (its evaluation returned {resumed.solved_return:.1f}, "
        f"loop.stop_at_return={stop_at_return:g}): nothing trained; raise loop.stop_at_return above "
        f"{resumed.solved_return:.1f} or total_frames above {budget:,} to train on"
    )


def last_row(run_dir: Path) -> dict:
    """The last row of the run's ``metrics.csv`` (its numbers; empty cells left out)."""
    with open(run_dir / "metrics.csv", newline="") as rows:
        last = list(csv.DictReader(rows))[-1]
    return {key: float(value) for key, value in last.items() if value not in ("", None)}


def summary(final: dict) -> str:
    """The lines printed at the end of a run."""

    def fmt(key, spec=".1f"):
        value = final.get(key)
        return "n/a" if value is None else format(value, spec)

    return "\n".join(
        [
            "== trajrl run finished ==",
            *([f"nothing trained: {final['nothing_trained']}"] if "nothing_trained" in final else []),
            f"frames {'stored ' if 'buffer/frames' in final else 'learnt '}  {int(final['frames']):,}",
            *(
                [
                    f"frames stepped  {int(final['collect/frames_stepped']):,} "
                    f"({int(final['buffer/frames_in_flight_dropped']):,} in flight at the end, never handed over"
                    + (
                        f"; {int(final['batch/frames_dropped_stale']):,} dropped: a weight push cut their episodes"
                        if final.get("batch/frames_dropped_stale")
                        else ""
                    )
                    + (
                        f"; {int(final['collect/frames_lost_to_faults']):,} lost to faults"
                        if final.get("collect/frames_lost_to_faults")
                        else ""
                    )
                    + ")"
                ]
                if "collect/frames_stepped" in final
                else []
            ),
            *restart_lines(final),
            f"wall-clock      {fmt('time/elapsed_s')} s ({fmt('time/frames_per_s', '.0f')} frames/s)",
            f"updates         {int(final['train/updates']):,}",
            "eval return     "
            + ("not finite (a reward was not)" if final.get("eval/return_not_finite") else fmt("eval/return"))
            + f" (best {fmt('eval/best_return')})",
            *(
                [
                    f"solved          at {int(final['run/solved_at_frames']):,} frames: the evaluation reached "
                    f"loop.stop_at_return, and the run stopped there"
                ]
                if "run/solved_at_frames" in final
                else []
            ),
            *(
                [f"eval success    {fmt('eval/success', '.2f')} (episodes that ended at their goal)"]
                if "eval/success" in final
                else []
            ),
            f"train return    {fmt('episode/return')} (last episodes)",
            *(
                [
                    f"audit           {int(final['audit/violations'])} violations "
                    f"({int(final['audit/batches_checked'])} batches and the buffer checked)"
                ]
                if "audit/violations" in final
                else []
            ),
            f"checkpoint      {final['checkpoint']}",
            *(
                [
                    f"best agent      {final['best_checkpoint']} (eval return {fmt('eval/best_return')}; "
                    f"trajrl evaluate {final['run_dir']})"
                ]
                if "best_checkpoint" in final
                else []
            ),
            f"run directory   {final['run_dir']}",
        ]
    )


def restart_lines(final: dict, most: int = 20) -> list[str]:
    """One line per restart the run survived (the first ``most``), oldest first; one for the
    episodes dropped for a bad step."""
    entries = [entry for entry in final.get("restarts") or [] if not entry.get("gave_up")]
    restarts = [entry for entry in entries if entry["what"] != "bad_step"]
    dropped = [entry for entry in entries if entry["what"] == "bad_step"]
    lines = []
    if dropped:
        lines.append(
            f"dropped         {len(dropped):,} episodes with a bad step (collector.bad_steps=drop); the first: "
            + dropped[0]["cause"]
        )
    if not restarts:
        return lines
    lines.append(f"restarts        {len(restarts)} (collection went on; their episodes dropped)")
    for entry in restarts[:most]:
        what = {"env": f"environment {entry['slot']}", "worker": f"worker {entry['slot']}"}.get(
            entry["what"], "collector"
        )
        at = time.strftime("%H:%M:%S", time.localtime(entry["time"]))
        lines.append(f"  {what} at {at}: {entry['cause']}")
    if len(restarts) > most:
        lines.append(f"  ... and {len(restarts) - most} more")
    return lines
