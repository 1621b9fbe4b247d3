"""What the algorithms' settings have in common: the memory core and the networks
(``NetworkSettings``), and the replay learners' (``ReplayLearnerSettings``). Nothing here imports torch."""

from __future__ import annotations

from dataclasses import dataclass

from trajrl.base.declare import FRACTION, above, at_least, between, option, setting

#: Memory cores (``algo.rnn``; ``trajrl.algos.memory``): torch's, stepped one step after another,
#: then the linear ones, whose whole sequence is one parallel pass that restarts inside it at each
#: episode start (``sampler=tape`` needs one). ``trajrl.algos.memory.register_core`` adds a linear one
#: to both lists (the choices of ``algo.rnn`` are the list itself).
LINEAR_CORES: list[str] = ["lru", "ffm"]
MEMORY_CORES: list[str] = ["lstm", "gru", *LINEAR_CORES]


@dataclass
class NetworkSettings:
    name: str = option("r2d2", checkpointed=True)
    rnn: str = setting(
        "lstm",
        "memory core: lstm, gru (stepped through a sequence) | lru (Linear Recurrent Unit), ffm (Fast and "
        "Forgetful Memory): linear, a whole sequence in one pass, restarting inside it at each episode "
        "start (what sampler=tape needs)",
        choices=MEMORY_CORES,
        checkpointed=True,
    )
    hidden_size: int = setting(64, "recurrent cells (the memory core's outputs)", range=at_least(1), checkpointed=True)
    memory_size: int = setting(
        64,
        "rnn=lru: complex state channels of each layer; rnn=ffm: length of its trace (one decay rate each)",
        range=between(1, 4096),
        checkpointed=True,
    )
    memory_context: int = setting(
        4, "rnn=ffm: frequencies each element of the trace turns at", range=between(1, 256), checkpointed=True
    )
    memory_layers: int = setting(1, "rnn=lru: blocks stacked", range=between(1, 16), checkpointed=True)
    forget_bias: float | None = setting(
        None,
        "rnn=lstm: every cell's forget-gate bias at initialisation (1: Gers et al., 2000; Jozefowicz et al., "
        "2015): a new core keeps sigmoid(b) of what it holds each step instead of about half; rnn=gru: its "
        "update gate's, to the same end; null: torch's initialisation",
        range=between(-10, 10),
        checkpointed=True,
    )
    chrono_horizon: int | None = setting(
        None,
        "rnn=lstm: Tallec & Ollivier (2018)'s chrono initialisation: each cell's forget-gate bias drawn as "
        "log U(1, T - 1) and its input gate's the opposite, T this many steps (the longest dependency to learn): "
        "a new core's cells keep their content over a spread of time scales up to T instead of about a step; "
        "null: torch's initialisation (or forget_bias's)",
        range=at_least(3),
        checkpointed=True,
    )
    chrono_spread: str = setting(
        "uniform",
        "rnn=lstm with chrono_horizon: how the time scales u are drawn: uniform in [1, T - 1] (Tallec & Ollivier's: "
        "most cells long) | log: log-uniform over it, the forget biases log u uniform in [0, log(T - 1)] (as many "
        "cells keep about a step as keep the whole horizon)",
        choices=("uniform", "log"),
        checkpointed=True,
    )
    encoder_sizes: list[int] = setting(
        [64], "MLP layers before the recurrent core (or the head)", range=at_least(1), checkpointed=True
    )
    normalize_observations: bool = setting(
        True, "standardise inputs with statistics of 2,000 random-policy steps", checkpointed=True
    )
    observation_stats: str = setting(
        "fixed",
        "fixed: standardise with the statistics measured at the start; "
        "running: they follow the observations the learner trains on (the "
        "mean over every batch, then a moving one, rate observation_rate)",
        choices=("fixed", "running"),
    )
    observation_rate: float = setting(
        1e-3, "observation_stats=running: the least weight of each batch", range=between(0, 1)
    )
    squash_observations: bool = setting(
        False,
        "symlog the standardised inputs: states a learnt policy reaches far "
        "outside a random policy's statistics stay within a few units",
    )
    gamma: float = setting(0.99, "discount", range=FRACTION)
    lr: float = setting(1e-3, "learning rate (Adam)", range=above(0))
    rnn_lr: float | None = setting(
        None,
        "learning rate of the memory core (algo.rnn), which RESeL (Luo et al., "
        "2024) trains far slower than the rest; null: lr",
        range=above(0),
        checkpointed=True,  # null or not: one group of parameters in the optimiser, or two
    )
    max_grad_norm: float = setting(10.0, "gradient norm clipping", range=above(0))
    layer_norm: bool = setting(
        False,
        "layer-normalise each encoder's output, and the recurrent features of the Q-network and the critics",
        checkpointed=True,
    )


@dataclass
class ReplayLearnerSettings(NetworkSettings):
    """What the learners that train from the replay buffer (recurrent DQN and SAC) have in common."""

    lr_end: float | None = setting(
        None,
        "decay lr linearly to this over the run's planned updates, rnn_lr in the same proportion (the "
        "temperature's rate stays); null: constant",
        range=at_least(0),
    )
