"""The CLI: ``python -m trajrl [overrides]`` trains (also the ``trajrl`` console script);
``trajrl plot <dir>``, ``trajrl summary <dir>``, ``trajrl evaluate <run dir>`` and ``trajrl export
<run dir>`` read finished runs instead.

Every command runs inside ``one_line_errors`` (an error trajrl expects ends it with one
line and its exit code) and returns only once the processes it started have ended.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import shlex
import shutil
import signal
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import NoReturn

import hydra
import yaml
from hydra.core.hydra_config import HydraConfig
from hydra.errors import HydraException
from hydra.types import RunMode
from omegaconf import DictConfig

from trajrl.base.errors import (
    CheckpointError,
    CollectorFailed,
    ConfigError,
    EnvironmentFailed,
    LearnerFailed,
    RunInterrupted,
)
from trajrl.base.files import held_by_this_run
from trajrl.base.processes import end_child_processes, exit_now, start_fork_server, workers_from_a_fork_server
from trajrl.base.signals import interrupts_raise, stacks_on_sigusr1
from trajrl.configuration.checks import check_launcher, check_overrides, key_of
from trajrl.configuration.compose import CONFIG_DIR, compose, explain, validate
from trajrl.configuration.topology import starts_processes

log = logging.getLogger("trajrl")
#: HYDRA_FULL_ERROR=1 as the user set it: errors show their traceback instead of one line.
#: (main() sets HYDRA_FULL_ERROR for Hydra itself; the user's value travels to sweep jobs
#: started in other processes as TRAJRL_FULL_ERROR.)
SHOW_TRACEBACK = os.environ.get("TRAJRL_FULL_ERROR", os.environ.get("HYDRA_FULL_ERROR", "")) == "1"


def cli() -> NoReturn:
    """The ``trajrl`` command (and ``python -m trajrl``): ``main()``, then the process ends with
    its exit code at once (``exit_now``: its exit handlers run, its modules are not torn down)."""
    try:
        main()
    except SystemExit as stop:
        code = stop.code
    else:
        code = 0
    if code is not None and not isinstance(code, int):  # sys.exit("message"), as Python reports it
        print(code, file=sys.stderr)
        code = 1
    exit_now(code or 0)


def main(argv: list[str] | None = None) -> None:
    """Run the command in ``argv`` (default: this process's arguments): a subcommand of
    ``commands()``, or else training, with everything else passed to Hydra as it is."""
    argv = sys.argv[1:] if argv is None else list(argv)
    command = argv[0] if argv and argv[0] in SUBCOMMANDS else None
    quiet_torchrl()
    try:
        with interrupts_raise(), one_line_errors(f"trajrl {command}" if command else "trajrl"):
            if command:
                args = commands().parse_args(argv)
                args.run(args)
            else:
                train_from_the_command_line(argv)
    finally:
        end_child_processes()


# ---------------------------------------------------------------- errors: one line each
@contextlib.contextmanager
def one_line_errors(command: str = "trajrl", run_dir: Path | None = None) -> Iterator[None]:
    """An error ``command`` expects ends it with one line on stderr and its exit code
    (``one_line``); with ``HYDRA_FULL_ERROR=1``, and for any other error, its traceback shows."""
    try:
        yield
    except BrokenPipeError:  # a reader that stopped early (``trajrl --help | head``): nothing more to say
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # Python's own flush at exit would fail
        sys.exit(128 + signal.SIGPIPE)
    except (RunInterrupted, Exception) as err:
        reported = one_line(err, command, run_dir)
        if reported is None or SHOW_TRACEBACK:
            raise
        line, exit_code = reported
        print(f"{command}: {line}", file=sys.stderr)
        sys.exit(exit_code)


def one_line(err: BaseException, command: str, run_dir: Path | None = None) -> tuple[str, int] | None:
    """What ``command`` says of ``err`` and its exit code: 2 for a command to fix, 1 for a run
    that failed, 128 + the signal for one stopped by a signal; None for an error not expected.
    ``run_dir``: the run that was under way."""
    if isinstance(err, RunInterrupted):
        if run_dir is None:
            return f"stopped: {err}", 128 + err.signum
        return (
            f"run stopped: {err}; collectors shut down; {run_dir / 'metrics.csv'} holds the rows "
            f"logged up to {last_logged_frames(run_dir)} frames",
            128 + err.signum,
        )
    if command != "trajrl":
        return subcommand_line(err)
    in_run = f" (run directory {run_dir}; HYDRA_FULL_ERROR=1 shows the traceback)" if run_dir is not None else ""
    match err:
        case ConfigError():
            return f"configuration error: {err}{in_run}", 2
        case CheckpointError():
            return f"cannot resume: {err}{in_run}", 2
        case CollectorFailed() | EnvironmentFailed() | LearnerFailed():
            return f"run failed: {err}{in_run}", 1
        case HydraException() | yaml.YAMLError():
            return f"configuration error: {composition_error(err)}", 2
        case OSError():  # the run directory (hydra.run.dir) or a file in it cannot be written
            where = f"{err.filename}: " if err.filename else ""
            return (
                f"run failed: {where}{err.strerror or err} (the run directory must be writable, with room "
                "for its checkpoints; hydra.run.dir=<dir> puts it elsewhere)",
                1,
            )
    return None


def subcommand_line(err: BaseException) -> tuple[str, int] | None:
    """``one_line`` for plot, summary, evaluate and check-env: the error names what of the run
    (or of the environment) it read is missing or wrong."""
    if isinstance(err, (ConfigError, CheckpointError, EnvironmentFailed)):
        return str(err), 2
    if isinstance(err, (HydraException, yaml.YAMLError)):  # check-env's overrides
        return f"configuration error: {composition_error(err)}", 2
    return (str(err), 1) if isinstance(err, FileNotFoundError) else None


def composition_error(err: Exception) -> str:
    """A value of the wrong type or an unknown key as trajrl's one line (``trajrl.configuration.compose.explain``);
    otherwise Hydra's or YAML's message without the config search path (the options it lists stay)."""
    explained = explain(err)
    if explained is not None:
        return str(explained)
    text = str(err).split("\nConfig search path:")[0].strip()
    override = getattr(err, "override", None)  # an override Hydra cannot parse
    if override and override not in text:
        text = f"{override}: {text}"
    cause = err.__cause__
    if cause is not None and str(cause) not in text:
        text += f" ({str(cause).splitlines()[0]})"
    return text


# ---------------------------------------------------------------- training: Hydra composes the config
def train_from_the_command_line(typed: list[str]) -> None:
    """Train with the config Hydra composes from ``typed`` (overrides, ``--multirun``,
    ``--help``, ``--cfg``, ``hydra.*``: Hydra parses them from ``sys.argv``)."""
    stacks_on_sigusr1()
    if "--help-all" in typed:  # Hydra's --help, every setting listed (trajrl.configuration.helptext)
        os.environ["TRAJRL_HELP"] = "all"
        typed = ["--help" if a == "--help-all" else a for a in typed]
    arguments = resume_arguments(typed)  # a resumed run's own overrides: its env.import_module too
    import_the_users_module(arguments)
    workers_from_a_fork_server()
    sys.argv[1:] = arguments
    os.environ["TRAJRL_FULL_ERROR"] = "1" if SHOW_TRACEBACK else "0"
    os.environ["HYDRA_FULL_ERROR"] = "1"  # Hydra raises what it cannot compose; one_line_errors reports it

    sweep = SweepJobs()

    @hydra.main(config_path=str(CONFIG_DIR), config_name="config", version_base="1.3")
    def run(cfg: DictConfig) -> float:
        return sweep.run(train_one_run, cfg, typed)

    run()
    sweep.end()


#: Hydra's launcher that runs a sweep's jobs one after the other in this process (the default).
IN_PROCESS_LAUNCHER = "hydra._internal.core_plugins.basic_launcher.BasicLauncher"


class SweepJobs:
    """The jobs of a ``--multirun`` run by Hydra's default launcher, in this process: one that fails
    has said so in its one line and the sweep goes on with the next; once all have run, one line names
    those that failed and the command exits with the highest of their codes. An interrupted job
    (Ctrl-C, SIGTERM) ends the sweep. Under another launcher (joblib, submitit) a job's exit is the
    launcher's to report, as before."""

    def __init__(self) -> None:
        self.jobs, self.failed = 0, []

    def run(self, train: Callable[[DictConfig, list[str]], float], cfg: DictConfig, typed: list[str]) -> float:
        self.jobs += 1
        try:
            return train(cfg, typed)
        except SystemExit as stop:
            hydra_cfg = HydraConfig.get()
            in_this_process = hydra_cfg.launcher.get("_target_") == IN_PROCESS_LAUNCHER
            failed = isinstance(stop.code, int) and 0 < stop.code < 128
            if hydra_cfg.mode != RunMode.MULTIRUN or not in_this_process or not failed:
                raise
            self.failed.append((hydra_cfg.job.num, hydra_cfg.runtime.output_dir, stop.code))
            return float("nan")

    def end(self) -> None:
        if not self.failed:
            return
        said = "; ".join(f"job {num} ({where}): exit {code}" for num, where, code in self.failed)
        print(
            f"trajrl: {len(self.failed)} of {self.jobs} jobs failed (each said why above), the others ran to "
            f"their end: {said}",
            file=sys.stderr,
        )
        sys.exit(max(code for _, _, code in self.failed))


def import_the_users_module(typed: list[str]) -> None:
    """The module ``env.import_module=<module>`` names on the command line, imported before Hydra
    composes (it may register an option of a group: an algorithm, a sampler: ``docs/development.md``)
    and before the fork server starts (its workers have it)."""
    from trajrl.envs.gym_envs import import_env_module

    for arg in typed:
        key, _, value = arg.partition("=")
        if key.lstrip("+~") == "env.import_module" and value not in ("", "null"):
            import_env_module(value)


def train_one_run(cfg: DictConfig, typed: list[str]) -> float:
    """Train with the composed config (one job of a multirun); return the final evaluation
    return (for sweepers). ``typed``: the command's arguments as typed (for ``command.txt``)."""
    hydra_cfg = HydraConfig.get()
    run_dir = Path(hydra_cfg.runtime.output_dir)
    with contextlib.ExitStack() as held:
        with one_line_errors():  # before torch is even imported: a refusal takes a second and leaves nothing behind
            held.enter_context(held_by_this_run(run_dir))  # another run writing there: refused, nothing written
            try:
                cfg = validate(cfg)
                check_launcher(
                    hydra_cfg.launcher.get("_target_", ""),
                    cfg.collector.kind,
                    cfg.collector.get("env_backend", "threading"),
                )
                check_overrides(list(hydra_cfg.overrides.task), cfg.algo.name)
            except (ConfigError, EnvironmentFailed):  # EnvironmentFailed: its first steps (trajrl.envs.env_check)
                resumed = cfg.get("resume")
                if resumed is None or Path(str(resumed)).resolve() != run_dir.resolve():  # never a resumed run's own
                    discard_run_dir(run_dir)
                raise

        from trajrl.training.run import summary, train

        if starts_processes(cfg.collector.kind, cfg.collector.get("env_backend")):
            start_fork_server()  # a fork of this process, before it starts a thread: the workers' imports are done
        with one_line_errors(run_dir=run_dir):
            record_command(run_dir, list(hydra_cfg.overrides.task), typed)
            final = train(cfg, run_dir=run_dir)
    print(summary(final), flush=True)
    if cfg.logger.plots:
        write_plots(run_dir)
    return final.get("eval/return", float("nan"))


def quiet_torchrl() -> None:
    """TorchRL logs INFO lines (colored, to stdout) in every process; a run prints its
    own progress. Warnings still show; ``RL_LOGGING_LEVEL=INFO`` brings them all back."""
    if "RL_LOGGING_LEVEL" not in os.environ:
        os.environ["RL_LOGGING_LEVEL"] = "WARNING"  # worker processes read it when they import torchrl
        logging.getLogger("torchrl").setLevel(logging.WARNING)


def resume_arguments(argv: list[str]) -> list[str]:
    """``resume=<run dir>``: the run's own overrides (its ``overrides.yaml``) come
    first, so its config is composed again, then the ones given now (which win),
    and Hydra's run directory is the resumed one. Other arguments pass unchanged."""
    given = [a for a in argv if key_of(a) == "resume" and "=" in a]
    if not given:
        return argv
    run_dir = Path(given[-1].split("=", 1)[1])
    if "-m" in argv or "--multirun" in argv:
        raise ConfigError(
            "resume", str(run_dir), "a resumed run cannot be swept; resume one run at a time, without --multirun"
        )
    try:
        original = yaml.safe_load((run_dir / "overrides.yaml").read_text()) or []
    except OSError:
        return argv  # the config check says what is missing
    now = {key_of(a) for a in argv}
    merged = [o for o in original if key_of(o) not in now] + argv
    import_the_users_module(merged)  # the run's own module (an option it registers) before composing again
    if not any(a in ("--help", "-h", "--cfg", "-c", "--info") for a in argv):
        # before Hydra writes into the run's directory: an override its checkpoint contradicts is refused
        validate(
            compose([a for a in merged if "=" in a and not a.startswith("-") and not key_of(a).startswith("hydra")])
        )
    return merged + [f"hydra.run.dir={run_dir}"]


def record_command(run_dir: Path, overrides: list[str], typed: list[str]) -> None:
    """This run's overrides and the command that reruns it, beside its config (in a
    multirun, each job's own command, and the sweep's command that launched it).
    A resumed run keeps its files and gets a line saying how it was resumed."""
    launched = shlex.join(["python", "-m", "trajrl", *typed])
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


def discard_run_dir(run_dir: Path) -> None:
    """Remove what Hydra wrote for a run that was refused before it began (its
    ``.hydra/`` and log), and the directories above it that this leaves empty (a
    sweep's, with only its ``multirun.yaml``). A directory holding anything else is
    left alone."""
    hydra_files = {".hydra", f"{HydraConfig.get().job.name}.log", ".lock"}
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


def last_logged_frames(run_dir: Path) -> str:
    """Frames of the last metrics row written (what the run leaves behind)."""
    from trajrl.report.runs import read_metrics

    try:
        return f"{int(read_metrics(run_dir / 'metrics.csv')[-1]['frames']):,}"
    except (OSError, IndexError, KeyError):
        return "0"


def write_plots(run_dir: Path) -> None:
    from trajrl.report.plot import plot

    try:
        paths = plot(run_dir)
    except Exception as err:  # a plot is a convenience: never fail a finished run over it
        log.warning("plots not written: %s", err)
        return
    print(f"plots           {run_dir / 'plots'} ({len(paths)} figures)", flush=True)


# ---------------------------------------------------------------- subcommands: finished runs
SUBCOMMANDS = ("plot", "summary", "evaluate", "export", "check-env")


def commands() -> argparse.ArgumentParser:
    """``trajrl plot|summary|evaluate|export|check-env``, each with its options (``trajrl <command> --help``)."""
    parser = argparse.ArgumentParser(
        prog="trajrl",
        epilog="Without a command, python -m trajrl [overrides] trains (python -m trajrl --help: every setting).",
    )
    subcommands = parser.add_subparsers(metavar="command")
    plot = subcommands.add_parser(
        "plot",
        help="learning-curve PNGs of a run or a multirun",
        description="Learning-curve PNGs, one per topic; in a multirun, the mean across seeds and their band.",
    )
    plot.add_argument("path", type=Path, help="a run directory or a multirun directory")
    plot.add_argument("--out", type=Path, default=None, help="where the PNGs go (default: <path>/plots)")
    plot.set_defaults(run=plot_runs)

    summary = subcommands.add_parser(
        "summary",
        help="a markdown table of final metrics per configuration",
        description="A markdown table of final metrics per configuration (mean ± std across seeds), "
        "printed and written to <path>/summary.md.",
    )
    summary.add_argument("path", type=Path, help="a multirun directory (or one run directory)")
    summary.set_defaults(run=summarise_runs)

    evaluate = subcommands.add_parser(
        "evaluate",
        help="the return of a finished run's agent, and a video of it",
        description="The return of a finished run's agent (its best or its latest checkpoint) over "
        "deterministic episodes, and a video of one.",
    )
    run_and_agent(evaluate)
    evaluate.add_argument(
        "--episodes", type=at_least(1), default=10, help="deterministic episodes averaged (default 10)"
    )
    evaluate.add_argument("--seed", type=int, default=0, help="seed of the environments (default 0)")
    evaluate.add_argument(
        "--video",
        nargs="?",
        const="",
        default=None,
        metavar="DIR",
        help="also record one episode as an mp4 in DIR (default: <run dir>/videos)",
    )
    evaluate.set_defaults(run=evaluate_agent)

    export = subcommands.add_parser(
        "export",
        help="a finished run's agent as one file that acts with onnxruntime or torch alone",
        description="The greedy agent of a finished run (its memory, input standardisation and action "
        "scaling inside) as one file: ONNX (onnxruntime alone; needs trajrl[export]) or a torch.export "
        "program (torch alone), called as agent(observation, state, episode_start[, reward]) -> (action, "
        "next_state). The file is then checked against trajrl's greedy agent on the same episodes "
        "(docs/export.md).",
    )
    run_and_agent(export)
    export.add_argument(
        "--format", choices=("onnx", "torch"), default="onnx", help="onnx (default, .onnx) or torch (.pt2)"
    )
    export.add_argument("--out", type=Path, default=None, help="the file (default: <run dir>/agent-<which>.<suffix>)")
    export.add_argument(
        "--check-episodes",
        type=at_least(0),
        default=10,
        help="episodes (seeds 0, 1, ...) on which the file must act as trajrl's agent (default 10; 0: no check)",
    )
    export.set_defaults(run=export_agent_file)

    check_env = subcommands.add_parser(
        "check-env",
        help="what trajrl sees of an environment, and what it would refuse, without training",
        description="The environment's spaces, a few hundred random steps against what it declares (finite "
        "rewards, observations of the declared shape and dtype), and the config checks a run makes, "
        "without training: e.g. trajrl check-env env=gym env.id=<id> env.import_module=<module>.",
    )
    check_env.add_argument("overrides", nargs="*", help="the overrides a run would get (env=..., algo=...)")
    check_env.add_argument("--steps", type=at_least(1), default=500, help="random steps played (default 500)")
    check_env.add_argument("--seed", type=int, default=0, help="seed of the reset and the actions (default 0)")
    check_env.set_defaults(run=check_environment)
    return parser


def run_and_agent(command: argparse.ArgumentParser) -> None:
    """A command's run directory and which of its agents (``evaluate``, ``export``)."""
    command.add_argument("run_dir", type=Path, help="a run directory (outputs/<date>/<time>)")
    command.add_argument(
        "--which",
        choices=("best", "latest"),
        default="best",
        help="the agent of the best evaluation (default) or the last checkpoint",
    )


def at_least(minimum: int):
    """An argument type: an integer of at least ``minimum``."""

    def number(text: str) -> int:
        value = int(text)
        if value < minimum:
            raise argparse.ArgumentTypeError(f"{value}: must be at least {minimum}")
        return value

    return number


def plot_runs(args: argparse.Namespace) -> None:
    from trajrl.report.plot import plot

    for path in plot(args.path, args.out):
        print(path)


def summarise_runs(args: argparse.Namespace) -> None:
    from trajrl.report.summary import summary_table

    table = summary_table(args.path)
    (args.path / "summary.md").write_text(table + "\n")
    print(table)


def one_torch_thread() -> None:
    """An agent played one step at a time computes in one thread, as a run's learner and workers
    do: torch's default, a thread a core, makes ``evaluate`` and ``export`` no faster and busies
    every core (twice the CPU time on 2 cores)."""
    import torch

    torch.set_num_threads(1)


def evaluate_agent(args: argparse.Namespace) -> None:
    from trajrl.report.evaluate_run import evaluate_run, load_run, record_video

    one_torch_thread()
    cfg, agent = load_run(args.run_dir, args.which)
    stats = evaluate_run(cfg, agent, args.episodes, args.seed)
    print(
        f"{args.run_dir} ({args.which} agent): return {stats['return']:.1f} ± {stats['return_std']:.1f} "
        f"over {args.episodes} deterministic episodes (length {stats['length']:.1f}"
        + (f", success {stats['success']:.2f}" if "success" in stats else "")
        + ")",
        flush=True,
    )
    if args.video is not None:
        folder = Path(args.video) if args.video else args.run_dir / "videos"
        print(f"video: {record_video(cfg, agent, folder, args.which, args.seed)}", flush=True)


def export_agent_file(args: argparse.Namespace) -> None:
    from trajrl.report.export import export_agent

    one_torch_thread()
    path, check = export_agent(args.run_dir, args.which, args.format, args.out, args.check_episodes)
    print(f"{path} ({path.stat().st_size / 1024:.1f} kB, {args.format}, {args.which} agent)", flush=True)
    if check["episodes"]:
        print(
            f"checked: the same actions as trajrl's greedy agent over {check['episodes']} episodes "
            f"({check['steps']:,} steps; largest difference {check['max_difference']:.2g}); "
            f"return {check['return']:.1f}",
            flush=True,
        )


def check_environment(args: argparse.Namespace) -> None:
    """``trajrl check-env``: print what trajrl sees of the environment the overrides name, then
    run the checks a run makes (a refusal: its one line, exit 2)."""
    import gymnasium as gym

    from trajrl.algos.registry import algo_spec
    from trajrl.envs.env_check import check_first_steps
    from trajrl.envs.gym_envs import check_env_id, env_spaces, make_refused_in_one_line

    cfg = compose(args.overrides)
    env_id, module = str(cfg.env.id), cfg.env.get("import_module")
    check_env_id(env_id, module)
    env = make_refused_in_one_line(env_id, dict(cfg.env.kwargs or {}))
    limit = env.spec.max_episode_steps if env.spec and env.spec.max_episode_steps else None
    observed = gym.spaces.flatdim(env.observation_space)
    print(f"environment     {env_id}" + (f" (env.import_module={module})" if module else ""))
    print(f"observations    {env.observation_space}")
    print(f"actions         {env.action_space}")
    print("episodes        " + (f"up to {limit} steps (its TimeLimit)" if limit else "no TimeLimit"))
    env.close()
    seen = check_first_steps(cfg.env, args.steps, args.seed, cfg.loop.stall_timeout_s, in_check_env=True)
    low, high = seen.rewards
    print(f"random steps    {seen.steps:,} (seed {args.seed}): {seen.episodes()}; rewards {low:.4g} .. {high:.4g}")
    for note in seen.notes:
        print(f"                {note}")
    asked_time = cfg.env.get("observe_time")
    cfg = validate(cfg)
    print(f"inputs          {added_inputs(cfg, observed, asked_time)}")
    acts = algo_spec(cfg.algo.name).acts
    if acts is not None:
        print(f"policy          algo={cfg.algo.name}: {acts(env_spaces(cfg.env))}")
    command = shlex.join(["python", "-m", "trajrl", *args.overrides])
    print(f"algo={cfg.algo.name:<10} nothing refused: {command} trains on it")


def added_inputs(cfg, observed: int, asked_time) -> str:
    """What the agent observes besides the environment's ``observed`` numbers (its flat observation)."""
    from trajrl.envs.gym_envs import env_spaces, gym_options

    options = gym_options(cfg.env)
    parts = [f"the observation ({observed} numbers flat)"]
    if options["time_scales"]:
        parts.append(f"the episode's time (tanh(t / s), s = {', '.join(f'{s:g}' for s in options['time_scales'])})")
    if options["previous_action"]:
        parts.append("the previous action")
    if options["previous_reward"]:
        parts.append("the previous reward")
    line = f"{env_spaces(cfg.env).observations} numbers: " + ", ".join(parts)
    if asked_time == "auto":
        line += "; env.observe_time=auto: " + (
            "every random episode terminated at one length (a clock)" if options["time_scales"] else "no clock"
        )
    return line


if __name__ == "__main__":
    cli()
