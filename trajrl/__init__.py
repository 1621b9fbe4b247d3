"""trajrl: reinforcement learning from complete trajectories, configured with Hydra, on TorchRL.

Python API::

    cfg = trajrl.compose(["collector=multi_async", "sampler=slice"])
    with trajrl.build(cfg) as pipe:      # real TorchRL objects, not started
        pipe.collector, pipe.buffer, pipe.policy, pipe.algo
    final = trajrl.train(cfg)            # what the CLI runs; returns the final metrics
    agent = trajrl.load_agent(final["run_dir"])  # the trained agent, from the run's checkpoint
"""
from trajrl.checkpoint import CheckpointError, load_agent
from trajrl.config import ConfigError, compose
from trajrl.factory import Pipeline, build
from trajrl.train import train

__all__ = ["CheckpointError", "ConfigError", "Pipeline", "build", "compose", "load_agent", "train"]
