"""What the algorithms' settings have in common: the memory core and the networks
(``NetworkSettings``). Nothing here imports torch."""

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
        main="the memory core (docs/configuration.md: memory cores)",
    )
    hidden_size: int = setting(
        64,
        "recurrent cells (the memory core's outputs)",
        range=at_least(1),
        checkpointed=True,
        main="recurrent cells (the memory core's outputs)",
    )
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
    encoder_sizes: list[int] = setting(
        [64], "MLP layers before the recurrent core (or the head)", range=at_least(1), checkpointed=True
    )
    normalize_observations: bool = setting(
        True, "standardise inputs with statistics of 2,000 random-policy steps", checkpointed=True
    )
    gamma: float = setting(0.99, "discount", range=FRACTION, main="discount")
    lr: float = setting(1e-3, "learning rate (Adam)", range=above(0), main="learning rate (Adam)")
    max_grad_norm: float = setting(10.0, "gradient norm clipping", range=above(0))
