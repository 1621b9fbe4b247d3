"""Network pieces the algorithms share."""
from __future__ import annotations

import torch
from tensordict import TensorDict
from tensordict.nn import TensorDictModule
from torch import nn
from torchrl.modules import MLP


class Standardize(nn.Module):
    """(x - loc) / scale with fixed statistics (buffers: saved and synced with the weights)."""

    def __init__(self, size: int, loc: torch.Tensor | None = None, scale: torch.Tensor | None = None):
        super().__init__()
        self.register_buffer("loc", torch.zeros(size) if loc is None else torch.as_tensor(loc, dtype=torch.float))
        self.register_buffer("scale", torch.ones(size) if scale is None else torch.as_tensor(scale, dtype=torch.float))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return (x - self.loc) / self.scale


def encoder(obs_dim: int, sizes: list[int], obs_loc: torch.Tensor | None = None,
            obs_scale: torch.Tensor | None = None, activation: type[nn.Module] = nn.ReLU) -> nn.Module:
    """observation -> fixed standardisation -> MLP of ``sizes`` (activated last layer).

    Standardising inside the network keeps raw observations in the buffer; partial
    observations (positions without velocities) carry their signal in small
    step-to-step differences, which a recurrent core picks up far more easily at unit scale.
    """
    return nn.Sequential(
        Standardize(obs_dim, obs_loc, obs_scale),
        MLP(in_features=obs_dim, out_features=sizes[-1], num_cells=list(sizes[:-1]),
            activation_class=activation, activate_last_layer=True),
    )


class KeyedModule(TensorDictModule):
    """``TensorDictModule`` for modules that return tensors: writes each output with
    ``set``. tensordict 0.14 passes every output through ``TensorDict.from_any``,
    which looks pandas up with ``importlib.util.find_spec`` on each call (about
    0.1 ms when pandas is not installed): on a policy's per-step path, a few of
    those cost as much as the network."""

    def _write_to_tensordict(self, tensordict, tensors, tensordict_out=None, out_keys=None):
        out_keys = self.out_keys_source if out_keys is None else out_keys
        if tensordict_out is None:
            tensordict_out = tensordict if self.inplace is True else (
                tensordict.empty() if self.inplace == "empty" else TensorDict())
        if len(tensors) != len(out_keys):
            raise RuntimeError(f"{len(tensors)} outputs for out_keys {out_keys}")
        for key, tensor in zip(out_keys, tensors):
            if key != "_":
                tensordict_out.set(key, tensor)
        return tensordict_out
