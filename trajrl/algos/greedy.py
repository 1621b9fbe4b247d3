"""The greedy choice of an action from a network's features, in plain torch: what an algorithm's greedy
network gives as its ``greedy_parts()`` (encoder, memory core, choice), from which ``trajrl export``
writes a file that acts without trajrl."""

from __future__ import annotations

import torch
from torch import nn


class Argmax(nn.Module):
    """features -> the index of the largest of ``net``'s outputs (a Q-value, a logit)."""

    def __init__(self, net: nn.Module):
        super().__init__()
        self.net = net

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        return self.net(features).argmax(-1)


class PartsArgmax(nn.Module):
    """features -> each part's most likely category (``MultiDiscrete``), ``[B, parts]``."""

    def __init__(self, net: nn.Module, categories: tuple[int, ...]):
        super().__init__()
        self.net, self.categories = net, list(categories)

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        return torch.stack([part.argmax(-1) for part in self.net(features).split(self.categories, -1)], -1)


class Bits(nn.Module):
    """features -> each bit's more likely value (``MultiBinary``): 1 where its logit is positive."""

    def __init__(self, net: nn.Module):
        super().__init__()
        self.net = net

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        return (self.net(features) > 0).long()


class TanhMean(nn.Module):
    """features -> a squashed Gaussian's action at its mean: ``loc + scale * tanh(mean)`` (recurrent SAC)."""

    def __init__(self, head: nn.Module):
        super().__init__()
        self.head = head

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        mean = self.head.net(features).chunk(2, -1)[0]
        return self.head.loc + self.head.scale * torch.tanh(mean)


class BoundedMean(nn.Module):
    """features -> a Gaussian's mean, clipped and scaled to the action's bounds (PPO)."""

    def __init__(self, net: nn.Module, bounds: nn.Module):
        super().__init__()
        self.net, self.bounds = net, bounds

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        return self.bounds(self.net(features))
