"""Logger factory: TorchRL's CSV, TensorBoard and wandb loggers (several at once)."""
from __future__ import annotations

import os
from pathlib import Path

from torchrl.record.loggers import Logger


def build_loggers(backends: list[str], run_dir: Path, exp_name: str, wandb_mode: str = "offline") -> list[Logger]:
    """One TorchRL logger per backend, writing under ``run_dir/logs``.

    wandb runs offline unless ``wandb_mode='online'``: no account, no network.
    """
    log_dir = str(Path(run_dir) / "logs")
    loggers: list[Logger] = []
    for backend in backends:
        if backend == "csv":
            from torchrl.record.loggers import CSVLogger

            loggers.append(CSVLogger(exp_name=exp_name, log_dir=log_dir))
        elif backend == "tensorboard":
            from torchrl.record.loggers import TensorboardLogger

            loggers.append(TensorboardLogger(exp_name=exp_name, log_dir=log_dir))
        elif backend == "wandb":
            from torchrl.record.loggers import WandbLogger

            os.environ.setdefault("WANDB_SILENT", "true")
            loggers.append(
                WandbLogger(exp_name=exp_name, save_dir=log_dir, project="trajrl", offline=wandb_mode != "online")
            )
    return loggers
