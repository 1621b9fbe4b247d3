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
            obs_scale: torch.Tensor | None = None, activation: type[nn.Module] = nn.ReLU,
            layer_norm: bool = False) -> nn.Module:
    """observation -> fixed standardisation -> MLP of ``sizes`` (activated last layer)
    -> layer normalisation (with ``layer_norm``).

    Standardising inside the network keeps raw observations in the buffer; partial
    observations (positions without velocities) carry their signal in small
    step-to-step differences, which a recurrent core picks up far more easily at unit scale.
    """
    return nn.Sequential(
        Standardize(obs_dim, obs_loc, obs_scale),
        MLP(in_features=obs_dim, out_features=sizes[-1], num_cells=list(sizes[:-1]),
            activation_class=activation, activate_last_layer=True),
        *([nn.LayerNorm(sizes[-1])] if layer_norm else []),
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


def recurrent_core(kind: str, in_size: int, hidden_size: int) -> nn.Module:
    """``nn.LSTM`` or ``nn.GRU`` (batch first), as ``algo.rnn`` names it."""
    return {"lstm": nn.LSTM, "gru": nn.GRU}[kind](in_size, hidden_size, batch_first=True)


def acting_core(rnn: nn.Module, in_key: str, out_key: str):
    """TorchRL's recurrent module around ``rnn`` for acting step by step: it stores its
    state with every step and restarts from zero where ``is_init`` is set (its
    ``make_tensordict_primer()`` must be on every environment)."""
    from torchrl.modules import GRUModule, LSTMModule

    if isinstance(rnn, nn.LSTM):
        return LSTMModule(lstm=rnn, in_key=in_key, out_key=out_key)
    return GRUModule(gru=rnn, in_key=in_key, out_key=out_key)


def state_keys(rnn: nn.Module) -> list[str]:
    """Keys under which the acting core stores the recurrent state with each step."""
    return ["recurrent_state_h", "recurrent_state_c"] if isinstance(rnn, nn.LSTM) else ["recurrent_state"]


@torch.no_grad()
def soft_update(target: nn.Module, source: nn.Module, tau: float) -> None:
    """Polyak averaging: ``target += tau * (source - target)``, parameter by parameter."""
    for p_target, p in zip(target.parameters(), source.parameters()):
        p_target.lerp_(p, tau)


class PolicyVersion(nn.Module):
    """Stamps every step the collector takes with the version of the weights it
    acted with (``policy_version``). The version is a buffer of the behaviour
    policy, so it travels with each weight push; the learner bumps it before
    pushing, and the staleness of a sample is the learner's version minus its steps'."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("version", torch.zeros((), dtype=torch.int32))  # stored with every step

    def forward(self, observation: torch.Tensor) -> torch.Tensor:
        return self.version.expand(observation.shape[:-1]).clone()

    def bump(self) -> int:
        """The next version (in place, so the pushed weights carry it)."""
        self.version += 1
        return int(self.version)
