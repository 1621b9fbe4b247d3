"""The CLI: ``python -m trajrl [overrides]`` (also the ``trajrl`` console script).

``trajrl plot <dir>`` and ``trajrl summary <dir>`` read finished runs instead.
"""
from __future__ import annotations

import logging
import os
import shlex
import sys
from pathlib import Path

import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig

from trajrl.config import CONFIG_DIR, ConfigError
from trajrl.factory.collector import CollectorFailed
from trajrl.interrupts import RunInterrupted

log = logging.getLogger("trajrl")


def quiet_torchrl() -> None:
    """TorchRL logs INFO lines (colored, to stdout) in every process; a run prints its
    own progress. Warnings still show; ``RL_LOGGING_LEVEL=INFO`` brings them all back."""
    if "RL_LOGGING_LEVEL" not in os.environ:
        os.environ["RL_LOGGING_LEVEL"] = "WARNING"  # worker processes read it when they import torchrl
        logging.getLogger("torchrl").setLevel(logging.WARNING)


@hydra.main(config_path=str(CONFIG_DIR), config_name="config", version_base="1.3")
def run(cfg: DictConfig) -> float:
    """Train with the composed config; return the final evaluation return (for sweepers)."""
    from trajrl.train import summary, train

    hydra_cfg = HydraConfig.get()
    run_dir = hydra_cfg.runtime.output_dir
    record_command(Path(run_dir), list(hydra_cfg.overrides.task))
    try:
        final = train(cfg, run_dir=run_dir)
    except (ConfigError, CollectorFailed) as err:
        if os.environ.get("HYDRA_FULL_ERROR") == "1":
            raise
        kind = "configuration error" if isinstance(err, ConfigError) else "run failed"
        print(f"trajrl: {kind}: {err}" + ("" if isinstance(err, ConfigError) else
              f" (run directory {run_dir}; HYDRA_FULL_ERROR=1 shows the traceback)"), file=sys.stderr)
        sys.exit(2 if isinstance(err, ConfigError) else 1)
    except RunInterrupted as stop:
        if os.environ.get("HYDRA_FULL_ERROR") == "1":
            raise
        print(f"trajrl: run stopped: {stop}; collectors shut down; {Path(run_dir) / 'metrics.csv'} holds the rows "
              f"logged up to {last_logged_frames(Path(run_dir))} frames", file=sys.stderr)
        sys.exit(128 + stop.signum)
    print(summary(final), flush=True)
    write_plots(Path(run_dir))
    return final.get("eval/return", float("nan"))


def last_logged_frames(run_dir: Path) -> str:
    """Frames of the last metrics row written (what the run leaves behind)."""
    from trajrl.runs import read_metrics

    try:
        return f"{int(read_metrics(run_dir / 'metrics.csv')[-1]['frames']):,}"
    except (OSError, IndexError, KeyError):
        return "0"


def record_command(run_dir: Path, overrides: list[str]) -> None:
    """This run's overrides and the command that reruns it, beside its config (in a
    multirun, each job's own command, and the sweep's command that launched it)."""
    import yaml

    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "overrides.yaml").write_text(yaml.safe_dump(overrides, default_flow_style=False))
    command = shlex.join(["python", "-m", "trajrl", *overrides])
    launched = shlex.join(["python", "-m", "trajrl", *sys.argv[1:]])
    (run_dir / "command.txt").write_text(command + "\n" + (f"# launched by: {launched}\n" if launched != command else ""))


def write_plots(run_dir: Path) -> None:
    from trajrl.plot import plot

    try:
        paths = plot(run_dir)
    except Exception as err:  # a plot is a convenience: never fail a finished run over it
        log.warning("plots not written: %s", err)
        return
    print(f"plots           {run_dir / 'plots'} ({len(paths)} figures)", flush=True)


SUBCOMMANDS = {"plot": "trajrl.plot", "summary": "trajrl.summary"}


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] in SUBCOMMANDS:
        import importlib

        importlib.import_module(SUBCOMMANDS[sys.argv[1]]).main(sys.argv[2:])
        return
    quiet_torchrl()
    run()


if __name__ == "__main__":
    main()
