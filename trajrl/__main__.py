"""The CLI: ``python -m trajrl [overrides]`` (also the ``trajrl`` console script).

``trajrl plot <dir>``, ``trajrl summary <dir>`` and ``trajrl evaluate <run dir>`` read
finished runs instead.
"""

from __future__ import annotations

import logging
import os
import shlex
import shutil
import sys
from pathlib import Path

import hydra
import yaml
from hydra.core.hydra_config import HydraConfig
from hydra.errors import HydraException
from omegaconf import DictConfig

from trajrl.checks import check_launcher, check_overrides, key_of
from trajrl.config import CONFIG_DIR, explain, validate
from trajrl.errors import CheckpointError, CollectorFailed, ConfigError, EnvironmentFailed, RunInterrupted
from trajrl.signals import stacks_on_sigusr1
from trajrl.topology import starts_processes

log = logging.getLogger("trajrl")
#: HYDRA_FULL_ERROR=1 as the user set it: errors show their traceback instead of one line.
#: (main() sets HYDRA_FULL_ERROR for Hydra itself; the user's value travels to sweep jobs
#: started in other processes as TRAJRL_FULL_ERROR.)
SHOW_TRACEBACK = os.environ.get("TRAJRL_FULL_ERROR", os.environ.get("HYDRA_FULL_ERROR", "")) == "1"
#: The arguments as typed (``resume=`` adds the resumed run's own before Hydra sees them).
TYPED_ARGS: list[str] = sys.argv[1:]


def quiet_torchrl() -> None:
    """TorchRL logs INFO lines (colored, to stdout) in every process; a run prints its
    own progress. Warnings still show; ``RL_LOGGING_LEVEL=INFO`` brings them all back."""
    if "RL_LOGGING_LEVEL" not in os.environ:
        os.environ["RL_LOGGING_LEVEL"] = "WARNING"  # worker processes read it when they import torchrl
        logging.getLogger("torchrl").setLevel(logging.WARNING)


def workers_from_a_fork_server() -> None:
    """Collector workers are forked from a server process that imported what they run once
    (``trajrl.factory``, ``trajrl.collect.forkserver``) rather than spawned, each importing torch and TorchRL
    anew: a smoke run with two workers takes about a fifth less CPU (``scripts/bench_pipeline.py``,
    part ``startup``). Unless the start method is already set (TorchRL's own default is ``spawn``)."""
    import multiprocessing

    if (
        multiprocessing.get_start_method(allow_none=True) is None
        and "forkserver" in multiprocessing.get_all_start_methods()
    ):  # not on Windows
        multiprocessing.set_start_method("forkserver")
        multiprocessing.set_forkserver_preload(["trajrl.factory", "trajrl.collect.forkserver"])


def start_fork_server() -> None:
    """Start the fork server now, where workers come from one: it imports what they run
    while this process imports the learner (the two imports overlap on two cores)."""
    import multiprocessing
    from multiprocessing import forkserver

    if multiprocessing.get_start_method(allow_none=True) == "forkserver":
        forkserver.ensure_running()


@hydra.main(config_path=str(CONFIG_DIR), config_name="config", version_base="1.3")
def run(cfg: DictConfig) -> float:
    """Train with the composed config; return the final evaluation return (for sweepers)."""
    hydra_cfg = HydraConfig.get()
    run_dir = Path(hydra_cfg.runtime.output_dir)
    try:  # before torch is even imported: a refusal takes a second and leaves nothing behind
        cfg = validate(cfg)
        check_launcher(
            hydra_cfg.launcher.get("_target_", ""), cfg.collector.kind, cfg.collector.get("env_backend", "threading")
        )
        check_overrides(list(hydra_cfg.overrides.task), cfg.algo.name)
    except ConfigError as err:
        resumed = cfg.get("resume")
        if resumed is None or Path(str(resumed)).resolve() != run_dir.resolve():  # never a resumed run's own
            discard_run_dir(run_dir)
        if SHOW_TRACEBACK:
            raise
        print(f"trajrl: configuration error: {err}", file=sys.stderr)
        sys.exit(2)

    if starts_processes(cfg.collector.kind, cfg.collector.get("env_backend")):
        start_fork_server()  # its imports run beside the learner's own (below)
    from trajrl.training.run import summary, train

    record_command(run_dir, list(hydra_cfg.overrides.task))
    try:
        final = train(cfg, run_dir=run_dir)
    except (ConfigError, CheckpointError, CollectorFailed, EnvironmentFailed) as err:
        if SHOW_TRACEBACK:
            raise
        kind = {ConfigError: "configuration error", CheckpointError: "cannot resume"}.get(type(err), "run failed")
        print(
            f"trajrl: {kind}: {err} (run directory {run_dir}; HYDRA_FULL_ERROR=1 shows the traceback)", file=sys.stderr
        )
        sys.exit(2 if isinstance(err, (ConfigError, CheckpointError)) else 1)
    except RunInterrupted as stop:
        if SHOW_TRACEBACK:
            raise
        print(
            f"trajrl: run stopped: {stop}; collectors shut down; {Path(run_dir) / 'metrics.csv'} holds the rows "
            f"logged up to {last_logged_frames(Path(run_dir))} frames",
            file=sys.stderr,
        )
        sys.exit(128 + stop.signum)
    print(summary(final), flush=True)
    if cfg.logger.plots:
        write_plots(Path(run_dir))
    return final.get("eval/return", float("nan"))


def last_logged_frames(run_dir: Path) -> str:
    """Frames of the last metrics row written (what the run leaves behind)."""
    from trajrl.report.runs import read_metrics

    try:
        return f"{int(read_metrics(run_dir / 'metrics.csv')[-1]['frames']):,}"
    except (OSError, IndexError, KeyError):
        return "0"


def discard_run_dir(run_dir: Path) -> None:
    """Remove what Hydra wrote for a run that was refused before it began (its
    ``.hydra/`` and log), and the directories above it that this leaves empty (a
    sweep's, with only its ``multirun.yaml``). A directory holding anything else is
    left alone."""
    hydra_files = {".hydra", f"{HydraConfig.get().job.name}.log"}
    if not run_dir.is_dir() or any(p.name not in hydra_files for p in run_dir.iterdir()):
        return
    shutil.rmtree(run_dir, ignore_errors=True)
    cwd = Path.cwd().resolve()
    for parent in run_dir.resolve().parents:
        if parent == cwd or cwd not in parent.parents:  # only what the run made under the working directory
            break
        if [p.name for p in parent.iterdir()] == ["multirun.yaml"]:  # a sweep that ran no job
            (parent / "multirun.yaml").unlink()
        try:
            parent.rmdir()  # only if empty
        except OSError:
            break


def record_command(run_dir: Path, overrides: list[str]) -> None:
    """This run's overrides and the command that reruns it, beside its config (in a
    multirun, each job's own command, and the sweep's command that launched it).
    A resumed run keeps its files and gets a line saying how it was resumed."""
    launched = shlex.join(["python", "-m", "trajrl", *TYPED_ARGS])
    run_dir.mkdir(parents=True, exist_ok=True)
    if any(key_of(o) == "resume" for o in overrides) and (run_dir / "command.txt").exists():
        with open(run_dir / "command.txt", "a") as out:
            out.write(f"# resumed by: {launched}\n")
        return
    (run_dir / "overrides.yaml").write_text(yaml.safe_dump(overrides, default_flow_style=False))
    command = shlex.join(["python", "-m", "trajrl", *overrides])
    (run_dir / "command.txt").write_text(
        command + "\n" + (f"# launched by: {launched}\n" if launched != command else "")
    )


def resume_arguments(argv: list[str]) -> list[str]:
    """``resume=<run dir>``: the run's own overrides (its ``overrides.yaml``) come
    first, so its config is composed again, then the ones given now (which win),
    and Hydra's run directory is the resumed one. Other arguments pass unchanged."""
    given = [a for a in argv if key_of(a) == "resume" and "=" in a]
    if not given:
        return argv
    run_dir = Path(given[-1].split("=", 1)[1])
    if "-m" in argv or "--multirun" in argv:
        print(
            f"trajrl: configuration error: resume={run_dir}: a resumed run cannot be swept; "
            "resume one run at a time, without --multirun",
            file=sys.stderr,
        )
        sys.exit(2)
    try:
        original = yaml.safe_load((run_dir / "overrides.yaml").read_text()) or []
    except OSError:
        return argv  # the config check says what is missing
    now = {key_of(a) for a in argv}
    return [o for o in original if key_of(o) not in now] + argv + [f"hydra.run.dir={run_dir}"]


def write_plots(run_dir: Path) -> None:
    from trajrl.report.plot import plot

    try:
        paths = plot(run_dir)
    except Exception as err:  # a plot is a convenience: never fail a finished run over it
        log.warning("plots not written: %s", err)
        return
    print(f"plots           {run_dir / 'plots'} ({len(paths)} figures)", flush=True)


SUBCOMMANDS = {"plot": "trajrl.report.plot", "summary": "trajrl.report.summary", "evaluate": "trajrl.report.evaluate"}


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] in SUBCOMMANDS:
        import importlib

        importlib.import_module(SUBCOMMANDS[sys.argv[1]]).main(sys.argv[2:])
        return
    quiet_torchrl()
    stacks_on_sigusr1()
    workers_from_a_fork_server()
    global TYPED_ARGS
    TYPED_ARGS = sys.argv[1:]
    sys.argv[1:] = resume_arguments(sys.argv[1:])
    os.environ["TRAJRL_FULL_ERROR"] = "1" if SHOW_TRACEBACK else "0"
    os.environ["HYDRA_FULL_ERROR"] = "1"  # Hydra raises what it cannot compose; it is reported here in one go
    try:
        run()
    except (HydraException, yaml.YAMLError) as err:
        if SHOW_TRACEBACK:
            raise
        print(f"trajrl: configuration error: {composition_error(err)}", file=sys.stderr)
        sys.exit(2)
    except OSError as err:  # the run directory (hydra.run.dir) or a file in it cannot be written
        if SHOW_TRACEBACK:
            raise
        where = f"{err.filename}: " if err.filename else ""
        print(
            f"trajrl: run failed: {where}{err.strerror or err} (the run directory must be writable, with room "
            "for its checkpoints; hydra.run.dir=<dir> puts it elsewhere)",
            file=sys.stderr,
        )
        sys.exit(1)


def composition_error(err: Exception) -> str:
    """A value of the wrong type or an unknown key as trajrl's one line (``trajrl.config.explain``);
    otherwise Hydra's or YAML's message without the config search path (the options it lists stay)."""
    explained = explain(err)
    if explained is not None:
        return str(explained)
    text = str(err).split("\nConfig search path:")[0].strip()
    override = getattr(err, "override", None)  # an override Hydra cannot parse
    if override and override not in text:
        text = f"{override}: {text}"
    missing_plugin = "Could not find" in text or "Could not load" in text
    if missing_plugin and any(name in text for name in ("submitit", "optuna", "launcher/parallel", "launcher/slurm")):
        text += "\n(the sweep launchers and the Optuna sweeper are an optional extra: pip install 'trajrl[sweep]')"
    cause = err.__cause__
    if cause is not None and str(cause) not in text:
        text += f" ({str(cause).splitlines()[0]})"
    return text


if __name__ == "__main__":
    main()
