"""Logger factory: TorchRL's TensorBoard and wandb loggers (several at once). ``csv`` is
the run directory's ``metrics.csv``, which every run writes (``trajrl.training.metrics``):
each metric is written once."""

from __future__ import annotations

import os
import threading
from pathlib import Path

from torchrl.record.loggers import Logger


def build_loggers(backends: list[str], run_dir: Path, exp_name: str, wandb_mode: str = "offline") -> list[Logger]:
    """One TorchRL logger per backend but ``csv``, each in its own ``run_dir/logs/<backend>``.

    wandb runs offline unless ``wandb_mode='online'``: no account, no network.
    """
    log_dir = str(Path(run_dir) / "logs")
    loggers: list[Logger] = []
    for backend in backends:
        if backend == "tensorboard":
            from torchrl.record.loggers import TensorboardLogger

            writer_errors_said_once()
            loggers.append(TensorboardLogger(exp_name="tensorboard", log_dir=log_dir))
        elif backend == "wandb":
            from torchrl.record.loggers import WandbLogger

            os.environ.setdefault("WANDB_SILENT", "true")
            loggers.append(
                WandbLogger(exp_name=exp_name, save_dir=log_dir, project="trajrl", offline=wandb_mode != "online")
            )
    return loggers


def writer_errors_said_once() -> None:
    """TensorBoard's writer thread that fails (its event file gone, a full disk) prints its traceback,
    then the run's next write raises the same error, which the run says in one line and goes on without
    TensorBoard (``trajrl.training.metrics.MetricsLog``): the thread's traceback is not printed (with
    ``TRAJRL_FULL_ERROR=1``, the CLI's ``HYDRA_FULL_ERROR=1``, it is)."""
    if os.environ.get("TRAJRL_FULL_ERROR") == "1" or getattr(threading.excepthook, "trajrl_writers", False):
        return
    previous = threading.excepthook

    def hook(args) -> None:
        if not type(args.thread).__module__.startswith("tensorboard."):
            previous(args)

    hook.trajrl_writers = True
    threading.excepthook = hook


def flat_hparams(config: dict, prefix: str = "") -> dict[str, int | float | str | bool]:
    """A nested config as ``{"loop.warmup_frames": 2000, ...}`` with scalar values
    (what TensorBoard's hparams accept; lists and None become strings)."""
    flat: dict[str, int | float | str | bool] = {}
    for key, value in config.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            flat.update(flat_hparams(value, f"{name}."))
        elif isinstance(value, (int, float, str, bool)):
            flat[name] = value
        else:
            flat[name] = str(value)
    return flat
