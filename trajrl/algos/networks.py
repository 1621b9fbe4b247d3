"""Network pieces the algorithms share."""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass

import torch
from tensordict import TensorDict
from tensordict.nn import TensorDictModule
from torch import nn
from torchrl.modules import MLP

from trajrl.algos.memory import run_memory, state_shape
from trajrl.base import internals
from trajrl.base.errors import NonFiniteUpdate
from trajrl.envs.spaces import IMAGE, NUMBERS, Part


class Standardize(internals.StateDictDefaults, nn.Module):
    """(x - loc) / scale (buffers: saved and synced with the weights)."""

    def __init__(self, size: int, loc: torch.Tensor | None = None, scale: torch.Tensor | None = None):
        super().__init__()
        self.register_buffer("loc", torch.zeros(size) if loc is None else torch.as_tensor(loc, dtype=torch.float))
        self.register_buffer("scale", torch.ones(size) if scale is None else torch.as_tensor(scale, dtype=torch.float))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return (x - self.loc) / self.scale

    def state_dict_retired(self) -> tuple[str, ...]:
        """Older checkpoints count the batches their statistics tracked, which they no longer do."""
        return ("tracked",)


#: An observation's parts (``trajrl.envs.spaces.parts_of``), or the size of a vector of numbers.
Parts = tuple[Part, ...] | int


@dataclass
class Inputs:
    """How an observation's numbers reach a network: standardised with ``loc`` and ``scale``
    (None: as they are)."""

    loc: torch.Tensor | None = None
    scale: torch.Tensor | None = None


class ObservationInputs(nn.Module):
    """The flat observation (``trajrl.envs.spaces``) as the MLP's input: numbers standardised,
    one-hot codes and bits as they are, each image through a small convolution (pixels / 255)."""

    def __init__(self, parts: tuple[Part, ...], inputs: Inputs | None = None):
        super().__init__()
        inputs = inputs or Inputs()
        loc, scale = inputs.loc, inputs.scale
        flat = [i for p in parts if p.kind != IMAGE for i in range(p.start, p.start + p.size)]
        numbers = torch.zeros(sum(p.size for p in parts), dtype=torch.bool)
        for p in parts:
            numbers[p.start : p.start + p.size] = p.kind == NUMBERS
        # Codes and bits keep loc 0 and scale 1: a one-hot code is an input at unit scale already.
        loc = torch.zeros(len(numbers)) if loc is None else torch.where(numbers, torch.as_tensor(loc).float(), 0.0)
        scale = torch.ones(len(numbers)) if scale is None else torch.where(numbers, torch.as_tensor(scale).float(), 1.0)
        self.standardize = Standardize(len(flat), loc[flat], scale[flat])
        self.register_buffer("flat", torch.tensor(flat, dtype=torch.long))
        self.everything_flat = flat == list(range(len(numbers)))  # no image: no columns to pick
        self.image_parts = [p for p in parts if p.kind == IMAGE]
        self.images = nn.ModuleList(ImageEncoder(p.image_shape, p.channels_last) for p in self.image_parts)
        self.out_features = len(flat) + sum(image.out_features for image in self.images)

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        flat = obs if self.everything_flat else obs.index_select(-1, self.flat)
        inputs = [self.standardize(flat.float())] if len(self.flat) else []
        for part, image in zip(self.image_parts, self.images):
            inputs.append(image(obs[..., part.start : part.start + part.size]))
        return inputs[0] if len(inputs) == 1 else torch.cat(inputs, -1)


class ImageEncoder(nn.Module):
    """A small convolutional encoder of one ``(channels, height, width)`` image, flattened:
    Mnih et al.'s three layers for images of 36 pixels or more a side, two 3x3 layers for smaller ones."""

    def __init__(self, shape: tuple[int, ...], channels_last: bool = True):
        super().__init__()
        channels, height, width = shape
        self.shape, self.channels_last = shape, channels_last
        if min(height, width) >= 36:
            layers = [
                nn.Conv2d(channels, 32, 8, stride=4),
                nn.ReLU(),
                nn.Conv2d(32, 64, 4, stride=2),
                nn.ReLU(),
                nn.Conv2d(64, 64, 3, stride=1),
                nn.ReLU(),
            ]
        else:
            layers = [nn.Conv2d(channels, 16, 3, padding=1), nn.ReLU(), nn.Conv2d(16, 32, 3, padding=1), nn.ReLU()]
        self.net = nn.Sequential(*layers, nn.Flatten())
        with torch.no_grad():
            self.out_features = int(self.net(torch.zeros(1, *shape)).shape[-1])

    def forward(self, pixels: torch.Tensor) -> torch.Tensor:
        batch = pixels.shape[:-1]
        c, h, w = self.shape
        images = pixels.reshape(-1, h, w, c).permute(0, 3, 1, 2) if self.channels_last else pixels.reshape(-1, c, h, w)
        return self.net(images.float() / 255.0).reshape(*batch, self.out_features)


def encoder(
    parts: Parts,
    sizes: list[int],
    inputs: Inputs | None = None,
    activation: type[nn.Module] = nn.ReLU,
) -> nn.Module:
    """observation -> its inputs (``ObservationInputs``: standardised numbers, codes, images)
    -> MLP of ``sizes`` (activated last layer).

    Standardising inside the network keeps raw observations in the buffer; partial
    observations (positions without velocities) carry their signal in small
    step-to-step differences, which a recurrent core picks up far more easily at unit scale.
    """
    if isinstance(parts, int):
        parts = (Part(NUMBERS, 0, parts),)
    prepared = ObservationInputs(parts, inputs)
    return nn.Sequential(
        prepared,
        MLP(
            in_features=prepared.out_features,
            out_features=sizes[-1],
            num_cells=list(sizes[:-1]),
            activation_class=activation,
            activate_last_layer=True,
        ),
    )


class DuelingHead(nn.Module):
    """Q = V + A - mean(A) (Wang et al., 2016): the state's value learnt apart from the actions' advantages."""

    def __init__(self, hidden_size: int, num_actions: int):
        super().__init__()
        self.value, self.advantage = nn.Linear(hidden_size, 1), nn.Linear(hidden_size, num_actions)

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        advantage = self.advantage(features)
        return self.value(features) + advantage - advantage.mean(-1, keepdim=True)


class KeyedModule(internals.WriteOutputsWithSet, TensorDictModule):
    """``TensorDictModule`` for modules that return tensors: writes each output with
    ``set`` (``trajrl.base.internals.WriteOutputsWithSet``). tensordict 0.14 passes every output
    through ``TensorDict.from_any``, which looks pandas up with ``importlib.util.find_spec``
    on each call (about 0.1 ms when pandas is not installed): on a policy's per-step path, a
    few of those cost as much as the network."""


@torch.no_grad()
def states_along(
    encoder: nn.Module,
    rnn: nn.Module,
    obs: torch.Tensor,
    run: torch.Tensor,
    offset: torch.Tensor,
    lengths: torch.Tensor,
    initial: tuple[torch.Tensor, ...],
) -> tuple[torch.Tensor, ...]:
    """The recurrent state before each of the steps ``obs`` (``[N, obs]``): step ``i`` is step
    ``offset[i]`` of run ``run[i]``, the runs of ``lengths`` sorted longest first, each run from
    ``initial`` (each ``[layers, runs, H]``). Returns each ``[N, layers, H]``, in ``state_keys``
    order, on ``obs``'s device. Only stored steps are encoded; the core steps the runs still
    going, side by side (on the networks' device)."""
    home, device = obs.device, next(encoder.parameters()).device  # the buffer's (CPU), the network's
    obs, run, offset, lengths = obs.to(device), run.to(device), offset.to(device), lengths.to(device)
    initial = tuple(s.to(device) for s in initial)
    features = encoder(obs)
    grid = features.new_zeros(lengths.numel(), int(lengths.max()), features.shape[-1])
    grid[run, offset] = features
    states = [s.new_zeros(grid.shape[0], grid.shape[1], *s.shape[::2]) for s in initial]
    state = list(initial)
    for t in range(grid.shape[1]):
        active = int((lengths > t).sum())  # runs still going: a prefix, longest first
        for out, s in zip(states, state):
            out[:active, t] = s[:, :active].transpose(0, 1)
        _, after = run_memory(rnn, grid[:active, t : t + 1], tuple(s[:, :active] for s in state))
        state = list(after)
    return tuple(out[run, offset].to(home) for out in states)


class PrefixStates:
    """The recurrent state of ``net`` (its ``encoder`` and ``rnn``: the learner's online
    network) before each of the given steps, from a zero state at each run's first step,
    without gradients (``states_along``); hindsight recomputes a relabelled slice's
    initial state with it."""

    def __init__(self, net: nn.Module):
        self.net = net

    @torch.no_grad()
    def __call__(
        self, obs: torch.Tensor, run: torch.Tensor, offset: torch.Tensor, lengths: torch.Tensor
    ) -> tuple[torch.Tensor, ...]:
        rnn = self.net.rnn
        layers, size = state_shape(rnn)
        if lengths.numel() == 0:
            return tuple(torch.zeros(0, layers, size) for _ in self.net.state_keys)
        zeros = tuple(torch.zeros(layers, lengths.numel(), size) for _ in self.net.state_keys)
        return states_along(self.net.encoder, rnn, obs, run, offset, lengths, zeros)


@torch.no_grad()
def soft_update(target: list[torch.Tensor], source: list[torch.Tensor], tau: float) -> None:
    """Polyak averaging of a network's parameters (``list(net.parameters())``, listed once by the
    learner): ``target += tau * (source - target)``, every parameter in one call; ``tau=1`` copies them exactly."""
    if tau == 1:
        internals.foreach_copy_(target, source)
    else:
        internals.foreach_lerp_(target, source, tau)


class TargetSync:
    """When a target network follows its online one: every ``every`` updates it moves ``tau``
    of the way (``soft_update``): a soft update each step (``every=1``), or DQN's hard copy
    every ``every`` updates (``tau=1``)."""

    def __init__(self, tau: float, every: int = 1):
        self.tau, self.every = tau, every

    def after(self, updates: int, target: list[torch.Tensor], source: list[torch.Tensor]) -> bool:
        """After the ``updates``-th update (counted from 1): sync if it is due; whether it was."""
        if updates % self.every:
            return False
        soft_update(target, source, self.tau)
        return True


@contextmanager
def frozen(parameters: list[torch.Tensor]):
    """A network's ``parameters`` without gradient inside the block (a loss that reads it as a
    fixed function: no gradient of its weights is computed), then as they were."""
    grads = [p.requires_grad for p in parameters]
    for p in parameters:
        p.requires_grad_(False)
    try:
        yield
    finally:
        for p, g in zip(parameters, grads):
            p.requires_grad_(g)


def clipped_step(
    optimizer: torch.optim.Optimizer, parameters: list[torch.Tensor], max_norm: float, loss: torch.Tensor, name: str
) -> torch.Tensor:
    """The step of ``optimizer`` on the gradient of a network's ``parameters`` (``loss``'s, already
    back-propagated; ``list(net.parameters())``, listed once by the learner: an update does not walk
    the module tree), clipped to ``max_norm``; its norm before clipping. ``NonFiniteUpdate`` naming
    ``name`` instead where the loss or the gradient is not finite: no step taken, the weights stay finite."""
    norm = nn.utils.clip_grad_norm_(parameters, max_norm)
    if not bool(torch.isfinite(norm) & torch.isfinite(loss.detach())):
        raise NonFiniteUpdate(name, float(loss.detach()), float(norm))
    optimizer.step()
    return norm


def read_statistics(stats: dict[str, torch.Tensor]) -> dict[str, float]:
    """An update's statistics (one-number tensors, all on one device) as floats: on a GPU read together, one
    synchronisation instead of one a statistic; on a CPU each read alone (a load: stacking them costs more)."""
    if next(iter(stats.values())).device.type == "cpu":
        return {name: float(value.detach()) for name, value in stats.items()}
    values = torch.stack([v.detach().float().reshape(()) for v in stats.values()]).tolist()
    return dict(zip(stats, values))


def adam(params, lr: float, **kwargs) -> torch.optim.Adam:
    """Adam with its fused step: one kernel over every parameter, where torch picks its
    per-parameter loop on a CPU; the same arithmetic (``tests/integration/test_speedups.py``;
    ``scripts/bench_pipeline.py`` times both). Each group keeps its rate in ``base_lr``, which
    schedules scale (``scale_lr``)."""
    if isinstance(params, nn.Module):
        params = list(params.parameters())
    optimizer = torch.optim.Adam(params, lr=lr, fused=True, **kwargs)
    for group in optimizer.param_groups:
        group["base_lr"] = group["lr"]
    return optimizer


def scale_lr(optimizer: torch.optim.Optimizer, factor: float) -> None:
    """Each parameter group's learning rate at ``factor`` times its own (``base_lr``)."""
    for group in optimizer.param_groups:
        group["lr"] = group.setdefault("base_lr", group["lr"]) * factor


class CpuCopies:
    """CPU copies of learner networks that act (the collector's policy, evaluation's):
    ``pull()`` copies the learners' current parameters and buffers into them, wherever
    the learners train. Each pair is ``(copy, learner)``, of one architecture."""

    def __init__(self, pairs: list[tuple[nn.Module, nn.Module]]):
        self.pairs = [(TensorDict.from_module(copy), TensorDict.from_module(learner)) for copy, learner in pairs]

    @torch.no_grad()
    def pull(self) -> None:
        for copy, learner in self.pairs:
            copy.update_(learner)


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
