"""Memory cores: what carries an agent's history from one step to the next (``algo.rnn``).

Two kinds, one calling convention (``torch.nn.GRU``'s, batch first): ``core(x, state)`` takes
features ``[B, T, in]`` and a state ``[layers, B, size]`` (an LSTM: a pair of them) and returns
the outputs ``[B, T, hidden]`` and the state after the last step.

- ``lstm`` and ``gru``: torch's own, stepped one step after another.
- ``lru`` and ``ffm``: **linear** recurrences, ``h_t = lambda * h_{t-1} + b(x_t)`` with a complex
  diagonal ``lambda``, whose whole sequence is computed at once (``linear_scan``) and which
  can restart at any step inside it (``starts``): one call runs a tape of many episodes laid
  end to end (``sampler=tape``) without any state crossing from one episode into the next.

  ``LRU``: the Linear Recurrent Unit (Orvieto et al., 2023), in pre-norm residual blocks
  (layer norm, LRU, GELU, a gated linear unit, plus the input), as Morad et al. (2024,
  "Recurrent Reinforcement Learning with Memoroids") stack it for DQN.
  ``FFM``: Fast and Forgetful Memory (Morad et al., 2023): a trace of ``size`` gated inputs,
  each decayed at its own rate and turned at ``context`` frequencies, mixed into the
  output, which a gate blends with a skip path.

  Their state is complex; it is stored with each step as real numbers (real parts, then
  imaginary ones), so the buffer, the samplers and the checkpoints see what they see of a GRU's.

``MemoryStep`` acts with a linear core one step at a time in the workers (TorchRL's
``GRUModule`` and ``LSTMModule`` do it for torch's cores): the state stored with every step,
zero where ``is_init`` is set.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, fields

import torch
from tensordict import TensorDictBase
from tensordict.nn import TensorDictModuleBase
from torch import nn

from trajrl.algos.settings import LINEAR_CORES, MEMORY_CORES, NetworkSettings
from trajrl.base.declare import default_of

_DECLARED = {f.name: default_of(f) for f in fields(NetworkSettings)}


@dataclass(frozen=True)
class Memory:
    """Which core, and its sizes (``algo.rnn``, ``algo.memory_size``, ``algo.memory_context``,
    ``algo.memory_layers``, their defaults the settings'); ``hidden_size`` (its outputs) is the network's."""

    kind: str = _DECLARED["rnn"]
    size: int = _DECLARED["memory_size"]  # lru: complex state channels a layer; ffm: the trace's length
    context: int = _DECLARED["memory_context"]  # ffm: frequencies each trace element turns at
    layers: int = _DECLARED["memory_layers"]  # lru: stacked blocks


def linear_scan(
    decay: torch.Tensor, inputs: torch.Tensor, state: torch.Tensor | None = None, starts: torch.Tensor | None = None
) -> torch.Tensor:
    """Every ``h_t = decay * h_{t-1} + inputs_t`` (``h_{-1} = state``; zero where ``starts[:, t]``:
    the sequence restarts before step ``t``), all ``T`` at once: ``[B, T, N]`` from ``decay [N]``,
    ``inputs [B, T, N]``, ``state [B, N]``, ``starts [B, T]`` (bool). Differentiable in all three
    (``Scan``: its gradient is the same recurrence run backwards)."""
    batch, horizon, size = inputs.shape
    a = decay.expand(batch, horizon, size)
    if starts is not None:
        a = a * ~starts.unsqueeze(-1)
    if state is None:
        state = inputs.new_zeros(batch, size)
    if horizon == 1:  # one step (acting): no scan
        return (a[:, 0] * state + inputs[:, 0]).unsqueeze(1)
    return Scan.apply(a, inputs, state)


def scan(a: torch.Tensor, b: torch.Tensor, state: torch.Tensor) -> torch.Tensor:
    """``h_t = a_t * h_{t-1} + b_t`` for every ``t`` of ``[B, T, N]`` (``h_{-1} = state``), exact and safe
    for any length: only products of the ``a`` (``|a| <= 1``) and sums, in chunks of about sqrt(T)
    steps: the steps inside every chunk from a zero start (all chunks side by side), then each
    chunk's start state carried from the last (one step a chunk), then added in, decayed. O(T)
    memory; ``scripts/bench_memory.py`` times it against a plain loop and a log-depth scan."""
    batch, horizon, size = b.shape
    if horizon == 1:
        return (a[:, 0] * state + b[:, 0]).unsqueeze(1)
    chunk = max(1, round(math.sqrt(horizon)))
    pad = -horizon % chunk
    if pad:  # a 1 and a b 0: the state goes through unchanged
        a = torch.cat([a, a.new_ones(batch, pad, size)], 1)
        b = torch.cat([b, b.new_zeros(batch, pad, size)], 1)
    chunks = (horizon + pad) // chunk
    # step by step inside the chunks: [chunk, batch, chunks, size], each step of every chunk contiguous
    a = a.reshape(batch, chunks, chunk, size).permute(2, 0, 1, 3).contiguous()
    b = b.reshape(batch, chunks, chunk, size).permute(2, 0, 1, 3).contiguous()
    local, decays = torch.empty_like(b), torch.empty_like(a)
    local[0], decays[0] = b[0], a[0]
    for i in range(1, chunk):  # inside every chunk at once, each from zero
        torch.addcmul(b[i], a[i], local[i - 1], out=local[i])
        torch.mul(decays[i - 1], a[i], out=decays[i])  # how much of its start state is left
    ends, end_decays = local[-1], decays[-1]
    before, carry = torch.empty_like(ends), state
    for k in range(chunks):  # the state each chunk starts from
        before[:, k] = carry
        carry = torch.addcmul(ends[:, k], end_decays[:, k], carry)
    h = local.addcmul_(decays, before.unsqueeze(0))
    return h.permute(1, 2, 0, 3).reshape(batch, chunks * chunk, size)[:, :horizon]


class Scan(torch.autograd.Function):
    """``scan`` with its gradient written out: for ``h_t = a_t h_{t-1} + b_t`` the gradient
    ``d_t`` reaching ``h_t`` is ``g_t + conj(a_{t+1}) d_{t+1}`` (a scan backwards in time), then
    ``b`` gets ``d_t``, ``a`` gets ``d_t conj(h_{t-1})`` and the state ``conj(a_0) d_0``
    (torch's convention for complex gradients). Autograd through the chunks would record
    a few hundred small operations a pass; this is two scans."""

    @staticmethod
    def forward(ctx, a: torch.Tensor, b: torch.Tensor, state: torch.Tensor) -> torch.Tensor:
        h = scan(a, b, state)
        ctx.save_for_backward(a, h, state)
        return h

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        a, h, state = ctx.saved_tensors
        after = torch.cat([a[:, 1:], torch.zeros_like(a[:, :1])], 1).conj()
        d = scan(after.flip(1), grad.flip(1), torch.zeros_like(state)).flip(1)
        previous = torch.cat([state.unsqueeze(1), h[:, :-1]], 1)
        return d * previous.conj(), d, a[:, 0].conj() * d[:, 0]


def as_real(state: torch.Tensor) -> torch.Tensor:
    """A complex state ``[..., N]`` stored as ``[..., 2N]`` real numbers."""
    return torch.cat([state.real, state.imag], -1)


def as_complex(state: torch.Tensor) -> torch.Tensor:
    """The complex state that ``as_real`` stored."""
    real, imag = state.chunk(2, -1)
    return torch.complex(real, imag)


def linear_step(
    decay: tuple[torch.Tensor, torch.Tensor], inputs: tuple[torch.Tensor, torch.Tensor], state: torch.Tensor
) -> torch.Tensor:
    """One step of ``h = decay * h + inputs`` in real arithmetic (acting: no complex numbers, which
    ONNX cannot carry): ``decay`` and ``inputs`` as (real, imaginary) parts, ``state`` and the
    result ``[B, 2N]`` in ``as_real``'s layout."""
    (a_re, a_im), (b_re, b_im) = decay, inputs
    h_re, h_im = state.chunk(2, -1)
    return torch.cat([a_re * h_re - a_im * h_im + b_re, a_re * h_im + a_im * h_re + b_im], -1)


class LinearMemory(nn.Module):
    """What a linear core is (``lru``, ``ffm``, and any ``register_core`` adds): ``forward(x, state=None,
    starts=None)`` takes ``x [B, T, in]``, its state ``[num_layers, B, state_size]`` (real numbers;
    None: ``initial_state``, zeros) and ``starts [B, T]`` (bool; None: no restart), and returns
    ``(outputs [B, T, hidden_size], the state after the last step)``, the state back to zeros before
    each step ``starts`` flags (a tape of episodes laid end to end; the one-step call, ``T = 1``, acts).
    Its state is stored with every step, so its size is fixed at construction."""

    num_layers: int
    state_size: int
    hidden_size: int

    def initial_state(self, x: torch.Tensor) -> torch.Tensor:
        return x.new_zeros(self.num_layers, x.shape[0], self.state_size)


class LRULayer(nn.Module):
    """One Linear Recurrent Unit: ``h_t = lambda * h_{t-1} + gamma * B u_t``, ``y_t = Re(C h_t) + D u_t``
    with ``lambda = exp(-exp(nu) + i exp(theta))`` (so ``|lambda| < 1``), ``|lambda|`` drawn uniformly on
    the ring ``[r_min, r_max]`` and its phase in ``[0, max_phase]``, and ``gamma = sqrt(1 - |lambda|^2)``
    (learnt from there) keeping the state at the inputs' scale."""

    def __init__(self, width: int, size: int, r_min: float = 0.0, r_max: float = 1.0, max_phase: float = 2 * math.pi):
        super().__init__()
        u1, u2 = torch.rand(size), torch.rand(size)
        nu_log = torch.log(-0.5 * torch.log(u1 * (r_max**2 - r_min**2) + r_min**2))
        self.nu_log = nn.Parameter(nu_log)
        self.theta_log = nn.Parameter(torch.log(max_phase * u2))
        self.gamma_log = nn.Parameter(torch.log(torch.sqrt(1 - torch.exp(-2 * nu_log.exp()))))
        self.B = nn.Parameter(torch.randn(2 * size, width) / math.sqrt(2 * width))  # real parts, then imaginary
        self.C = nn.Parameter(torch.randn(width, 2 * size) / math.sqrt(size))  # Re(C h) = [C_re, -C_im] [h_re; h_im]
        self.D = nn.Parameter(torch.randn(width))

    def decay(self) -> torch.Tensor:
        return torch.exp(torch.complex(-self.nu_log.exp(), self.theta_log.exp()))

    def forward(self, u: torch.Tensor, state: torch.Tensor, starts: torch.Tensor | None) -> tuple:
        """``u [B, T, width]``, ``state [B, size]`` complex -> (``y [B, T, width]``, every ``h [B, T, size]``)."""
        bu = as_complex(u @ (self.B.T * self.gamma_log.exp().repeat(2)))
        h = linear_scan(self.decay(), bu, state, starts)
        y = torch.addcmul(as_real(h) @ self.C.T, self.D, u)
        return y, h

    def step(self, u: torch.Tensor, state: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """One step in real arithmetic: ``u [B, width]``, ``state [B, 2 size]`` (``as_real``) -> (``y``, ``h``)."""
        magnitude, angle = torch.exp(-self.nu_log.exp()), self.theta_log.exp()
        bu = u @ (self.B.T * self.gamma_log.exp().repeat(2))
        h = linear_step((magnitude * torch.cos(angle), magnitude * torch.sin(angle)), bu.chunk(2, -1), state)
        return torch.addcmul(h @ self.C.T, self.D, u), h


class LRU(LinearMemory):
    """``layers`` pre-norm residual blocks ``x + GLU(GELU(LRU(LayerNorm(x))))`` of width
    ``hidden_size`` (a linear map first where the input is of another width), each with a
    complex state of ``size`` channels."""

    def __init__(self, in_size: int, hidden_size: int, size: int, layers: int = 1):
        super().__init__()
        self.num_layers, self.state_size, self.hidden_size = layers, 2 * size, hidden_size
        self.project = nn.Identity() if in_size == hidden_size else nn.Linear(in_size, hidden_size)
        self.norms = nn.ModuleList(nn.LayerNorm(hidden_size) for _ in range(layers))
        self.cores = nn.ModuleList(LRULayer(hidden_size, size) for _ in range(layers))
        self.glus = nn.ModuleList(nn.Linear(hidden_size, 2 * hidden_size) for _ in range(layers))

    def forward(self, x: torch.Tensor, state: torch.Tensor | None = None, starts: torch.Tensor | None = None):
        x = self.project(x)
        state = self.initial_state(x) if state is None else state
        if x.shape[1] == 1:  # one step (acting): real arithmetic
            return self.step(x[:, 0], restarted(state, starts))
        finals = []
        for layer, (norm, core, glu) in enumerate(zip(self.norms, self.cores, self.glus)):
            y, h = core(norm(x), as_complex(state[layer]), starts)
            x = x + nn.functional.glu(glu(nn.functional.gelu(y)), -1)
            finals.append(as_real(h[:, -1]))
        return x, torch.stack(finals)

    def step(self, x: torch.Tensor, state: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """One step of ``x [B, hidden]`` from ``state [layers, B, state_size]``: ``([B, 1, hidden], state after)``."""
        finals = []
        for layer, (norm, core, glu) in enumerate(zip(self.norms, self.cores, self.glus)):
            y, h = core.step(norm(x), state[layer])
            x = x + nn.functional.glu(glu(nn.functional.gelu(y)), -1)
            finals.append(h)
        return x.unsqueeze(1), torch.stack(finals)


class FFM(LinearMemory):
    """Fast and Forgetful Memory: a trace ``S_t = gamma * S_{t-1} + x~_t`` of ``size`` gated
    inputs ``x~``, each element turned at ``context`` frequencies, ``gamma = exp(a + i w)`` with
    ``a < 0`` (decays ``e^a`` from about 0.5 to about 0.995 a step) and periods ``2 pi / w`` from 1 to
    1,024 steps (both learnt); the output ``LayerNorm(mix(S_t)) * g + skip(x_t) * (1 - g)``, ``g`` a
    gate of the input."""

    def __init__(self, in_size: int, hidden_size: int, size: int, context: int):
        super().__init__()
        self.num_layers, self.state_size, self.hidden_size = 1, 2 * size * context, hidden_size
        self.size, self.context = size, context
        self.pre = nn.Linear(in_size, 2 * size + 2 * hidden_size)  # trace input, skip, both gates
        self.log_decay = nn.Parameter(torch.linspace(math.log(0.51), math.log(0.01) / 1024, size))
        self.frequency = nn.Parameter(2 * math.pi / torch.linspace(1, 1024, context))
        self.mix = nn.Linear(2 * size * context, hidden_size)
        self.norm = nn.LayerNorm(hidden_size, elementwise_affine=False)

    def decay(self) -> torch.Tensor:
        """``gamma``, ``[size * context]``: the decays (kept below 1) by the frequencies."""
        log_decay = self.log_decay.clamp(max=-1e-6).unsqueeze(-1).expand(self.size, self.context)
        return torch.exp(torch.complex(log_decay, self.frequency.expand(self.size, self.context))).reshape(-1)

    def forward(self, x: torch.Tensor, state: torch.Tensor | None = None, starts: torch.Tensor | None = None):
        state = self.initial_state(x) if state is None else state
        trace, skip, gates = self.pre(x).split([self.size, self.hidden_size, self.size + self.hidden_size], -1)
        gate_in, gate_out = torch.sigmoid(gates).split([self.size, self.hidden_size], -1)
        trace = (trace * gate_in).unsqueeze(-1).expand(*trace.shape, self.context).flatten(-2)
        if x.shape[1] == 1:  # one step (acting): real arithmetic
            log_decay = self.log_decay.clamp(max=-1e-6).unsqueeze(-1)
            angle = self.frequency.expand(self.size, self.context)
            decay = ((log_decay.exp() * torch.cos(angle)).reshape(-1), (log_decay.exp() * torch.sin(angle)).reshape(-1))
            inputs = (trace[:, 0], torch.zeros_like(trace[:, 0]))
            s = linear_step(decay, inputs, restarted(state, starts)[0]).unsqueeze(1)
        else:
            s = linear_scan(self.decay(), torch.complex(trace, torch.zeros_like(trace)), as_complex(state[0]), starts)
            s = as_real(s)
        out = self.norm(self.mix(s)) * gate_out + skip * (1 - gate_out)
        return out, s[:, -1].unsqueeze(0)


def restarted(state: torch.Tensor, starts: torch.Tensor | None) -> torch.Tensor:
    """``state [layers, B, N]`` from zeros where a one-step sequence restarts (``starts [B, 1]``)."""
    return state if starts is None else torch.where(starts.reshape(1, -1, 1), 0.0, state)


#: How each memory core of ``algo.rnn`` is built: ``(in_size, hidden_size, memory) -> module``.
BUILDERS: dict[str, Callable[[int, int, Memory], nn.Module]] = {
    "lstm": lambda in_size, hidden_size, memory: nn.LSTM(in_size, hidden_size, batch_first=True),
    "gru": lambda in_size, hidden_size, memory: nn.GRU(in_size, hidden_size, batch_first=True),
    "lru": lambda in_size, hidden_size, memory: LRU(in_size, hidden_size, memory.size, memory.layers),
    "ffm": lambda in_size, hidden_size, memory: FFM(in_size, hidden_size, memory.size, memory.context),
}


def register_core(name: str, build: Callable[[int, int, Memory], LinearMemory]) -> None:
    """Add the memory core ``algo.rnn=<name>``: ``build(in_size, hidden_size, memory)`` returns a
    ``LinearMemory`` (``memory``: ``algo.memory_size`` and the other sizes). Every algorithm, sampler
    (``sampler=tape`` too) and collector takes it; a worker process that unpickles the policy imports
    ``build``'s module, which registers it there (the same ``build`` again: nothing; another: an error)."""
    if BUILDERS.get(name) is build:
        return
    if name in BUILDERS:
        raise ValueError(f"algo.rnn={name} is registered already ({BUILDERS[name]!r})")
    BUILDERS[name] = build
    MEMORY_CORES.append(name)
    LINEAR_CORES.append(name)


def recurrent_core(memory: Memory | str, in_size: int, hidden_size: int) -> nn.Module:
    """The core ``memory`` names (a name alone: its default sizes), batch first."""
    memory = Memory(memory) if isinstance(memory, str) else memory
    return BUILDERS[memory.kind](in_size, hidden_size, memory)


#: Every kind of core (``recurrent_parameters`` gives their parameters a learning rate of their own).
CORES = (nn.LSTM, nn.GRU, LinearMemory)


def run_memory(
    core: nn.Module, x: torch.Tensor, state: tuple[torch.Tensor, ...] | None = None, starts: torch.Tensor | None = None
) -> tuple[torch.Tensor, tuple[torch.Tensor, ...]]:
    """``(outputs [B, T, hidden], state after the last step)`` of any core over ``x [B, T, in]`` from
    ``state`` (a tuple of ``[layers, B, size]``: an LSTM's two, one otherwise; None: zeros), restarting
    from zeros before each step flagged in ``starts [B, T]`` (linear cores only: torch's step
    through a sequence as one)."""
    if isinstance(core, LinearMemory):
        out, final = core(x, None if state is None else state[0], starts)
        return out, (final,)
    if starts is not None:
        raise ValueError(f"{type(core).__name__} cannot restart inside a sequence: use a core of {LINEAR_CORES}")
    if isinstance(core, nn.LSTM):
        out, final = core(x, state)
        return out, tuple(final)
    out, final = core(x, None if state is None else state[0])
    return out, (final,)


def state_keys(core: nn.Module) -> list[str]:
    """Keys under which the acting core stores the recurrent state with each step."""
    return ["recurrent_state_h", "recurrent_state_c"] if isinstance(core, nn.LSTM) else ["recurrent_state"]


def state_shape(core: nn.Module) -> tuple[int, int]:
    """The shape of each stored state of ``core``, ``(layers, size)``."""
    if isinstance(core, LinearMemory):
        return core.num_layers, core.state_size
    return core.num_layers, core.hidden_size


class MemoryStep(TensorDictModuleBase):
    """A linear core acting one step at a time: reads ``in_key`` and the state stored under
    ``recurrent_state`` (zero where ``is_init`` is set, or where there is none), writes
    ``out_key`` and the state after the step under ``("next", "recurrent_state")``;
    ``make_tensordict_primer()`` gives every environment that state, as TorchRL's
    recurrent modules do."""

    def __init__(self, core: LinearMemory, in_key: str, out_key: str, state_key: str = "recurrent_state"):
        super().__init__()
        self.core, self.state_key = core, state_key
        self.in_keys = [in_key, "is_init", state_key]
        self.out_keys = [out_key, ("next", state_key)]

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        x = tensordict.get(self.in_keys[0])
        batch, shape = x.shape[:-1], state_shape(self.core)
        x = x.reshape(-1, 1, x.shape[-1])
        state = tensordict.get(self.state_key, None)
        state = x.new_zeros(x.shape[0], *shape) if state is None else state.reshape(-1, *shape)
        is_init = tensordict.get("is_init").reshape(-1, 1, 1)
        state = torch.where(is_init, 0.0, state).transpose(0, 1)
        out, after = self.core(x, state)
        tensordict.set(self.out_keys[0], out.reshape(*batch, out.shape[-1]))
        tensordict.set(self.out_keys[1], after.transpose(0, 1).reshape(*batch, *shape))
        return tensordict

    def make_tensordict_primer(self):
        from torchrl.data import Unbounded
        from torchrl.envs import TensorDictPrimer

        return TensorDictPrimer({self.state_key: Unbounded(shape=state_shape(self.core))}, expand_specs=True)


def acting_core(core: nn.Module, in_key: str, out_key: str) -> TensorDictModuleBase:
    """The module around ``core`` for acting step by step: it stores its state with every step
    and restarts from zero where ``is_init`` is set (its ``make_tensordict_primer()`` must be on
    every environment). TorchRL's ``LSTMModule``/``GRUModule`` for torch's cores."""
    if isinstance(core, LinearMemory):
        return MemoryStep(core, in_key, out_key)
    from torchrl.modules import GRUModule, LSTMModule

    if isinstance(core, nn.LSTM):
        return LSTMModule(lstm=core, in_key=in_key, out_key=out_key)
    return GRUModule(gru=core, in_key=in_key, out_key=out_key)
