"""trajrl: reinforcement learning from complete trajectories, configured with Hydra, on TorchRL.

Python API::

    cfg = trajrl.compose(["collector=multi_async", "sampler=slice"])
    with trajrl.build(cfg) as pipe:      # real TorchRL objects, not started
        pipe.collector, pipe.buffer, pipe.policy, pipe.algo
    final = trajrl.train(cfg)            # what the CLI runs; returns the final metrics
    agent = trajrl.load_agent(final["run_dir"])  # the trained agent, from the run's checkpoint

Names are imported on first use, so that checking a configuration (``trajrl.configuration.compose``)
does not load torch.

The packages follow the data: ``configuration`` (every setting declared, a config composed and
checked), ``envs`` (trajrl's tasks, spaces, a user's environment checked), ``factory`` (config ->
objects), ``collect`` (environments, episode assembly, workers), ``replay`` (storage layouts,
samplers, audit), ``algos`` (the learners, memory cores), ``training`` (the loops, evaluation,
metrics, checkpoints), ``report`` (plots and summaries of finished runs), all on ``base``
(errors, keys, signals, processes, dependency internals).
"""

from __future__ import annotations

import importlib

_HOME = {
    "CheckpointError": "trajrl.base.errors",
    "ConfigError": "trajrl.base.errors",
    "compose": "trajrl.configuration.compose",
    "Pipeline": "trajrl.factory",
    "build": "trajrl.factory",
    "load_agent": "trajrl.factory",
    "train": "trajrl.training.run",
}
__all__ = sorted(_HOME)


def __getattr__(name: str):
    if name not in _HOME:
        raise AttributeError(f"module 'trajrl' has no attribute {name!r}")
    value = getattr(importlib.import_module(_HOME[name]), name)
    globals()[name] = value
    return value
