"""A memory core added from outside trajrl, as a user would (docs/development.md, "A memory core"):
importing this module registers ``algo.rnn=decaying_sum`` (from the CLI: ``env.import_module=toy_core``)."""

import torch
from torch import nn

from trajrl.algos.memory import LinearMemory, Memory, linear_scan, register_core


class DecayingSum(LinearMemory):
    """A toy linear core: ``h_t = a * h_{t-1} + W x_t`` with a learnt decay ``a`` in (0, 1) for each of
    ``size`` channels, read out as ``tanh(V h_t)``."""

    def __init__(self, in_size: int, hidden_size: int, size: int):
        super().__init__()
        self.num_layers, self.state_size, self.hidden_size = 1, size, hidden_size
        self.logit = nn.Parameter(torch.linspace(-1.0, 3.0, size))
        self.inputs, self.out = nn.Linear(in_size, size), nn.Linear(size, hidden_size)

    def forward(self, x, state=None, starts=None):
        state = self.initial_state(x) if state is None else state
        h = linear_scan(torch.sigmoid(self.logit), self.inputs(x), state[0], starts)
        return torch.tanh(self.out(h)), h[:, -1].unsqueeze(0)


def decaying_sum(in_size: int, hidden_size: int, memory: Memory) -> DecayingSum:
    return DecayingSum(in_size, hidden_size, memory.size)


register_core("decaying_sum", decaying_sum)
