"""trajrl: reinforcement learning from complete trajectories, configured with Hydra, on TorchRL.

Python API::

    cfg = trajrl.compose(["collector=multi_async", "sampler=slice"])
    with trajrl.build(cfg) as pipe:      # real TorchRL objects, not started
        pipe.collector, pipe.buffer, pipe.policy, pipe.algo
    final = trajrl.train(cfg)            # what the CLI runs; returns the final metrics
"""
from trajrl.config import ConfigError, compose
from trajrl.factory import Pipeline, build
from trajrl.train import train

__all__ = ["ConfigError", "Pipeline", "build", "compose", "train"]
