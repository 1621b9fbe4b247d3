"""The ways to run a linear recurrence ``h_t = a_t h_{t-1} + b_t`` over a whole sequence on a CPU,
timed forward and backward, and their error against float64 step by step; then each memory
core (``trajrl/algos/memory.py``) against torch's LSTM at the same sizes.

PyTorch has no associative scan on a CPU; the candidates: a plain loop of element-wise steps,
a log-depth (Hillis-Steele) scan, the chunked scan under autograd, and trajrl's (``Scan``:
the chunked scan with its gradient written out as the same scan backwards).

    python scripts/bench_memory.py              # one torch thread, as the learner runs
"""

from __future__ import annotations

import argparse
import time

import torch

from trajrl.algos.memory import FFM, LRU, Scan


def loop(a: torch.Tensor, b: torch.Tensor, state: torch.Tensor) -> torch.Tensor:
    h, out = state, []
    for t in range(b.shape[1]):
        h = a[:, t] * h + b[:, t]
        out.append(h)
    return torch.stack(out, 1)


def doubling(a: torch.Tensor, b: torch.Tensor, state: torch.Tensor) -> torch.Tensor:
    """Hillis-Steele: log2(T) passes over the whole sequence (O(T log T) memory under autograd)."""
    b = torch.cat([a[:, :1] * state.unsqueeze(1) + b[:, :1], b[:, 1:]], 1)
    d = 1
    while d < b.shape[1]:
        b = torch.cat([b[:, :d], b[:, d:] + a[:, d:] * b[:, :-d]], 1)
        a = torch.cat([a[:, :d], a[:, d:] * a[:, :-d]], 1)
        d *= 2
    return b


def chunked(a: torch.Tensor, b: torch.Tensor, state: torch.Tensor) -> torch.Tensor:
    """trajrl's chunks (``trajrl.algos.memory.scan``) written for autograd: no in-place steps."""
    batch, horizon, size = b.shape
    chunk = max(1, round(horizon**0.5))
    pad = -horizon % chunk
    a = torch.cat([a, a.new_ones(batch, pad, size)], 1)
    b = torch.cat([b, b.new_zeros(batch, pad, size)], 1)
    chunks = (horizon + pad) // chunk
    a, b = a.reshape(batch, chunks, chunk, size), b.reshape(batch, chunks, chunk, size)
    h, decayed, local, decays = torch.zeros_like(b[:, :, 0]), torch.ones_like(a[:, :, 0]), [], []
    for i in range(chunk):
        h = a[:, :, i] * h + b[:, :, i]
        decayed = decayed * a[:, :, i]
        local.append(h)
        decays.append(decayed)
    local, decays = torch.stack(local, 2), torch.stack(decays, 2)
    carry, before = state, []
    for k in range(chunks):
        before.append(carry)
        carry = local[:, k, -1] + decays[:, k, -1] * carry
    h = local + decays * torch.stack(before, 1).unsqueeze(2)
    return h.reshape(batch, chunks * chunk, size)[:, :horizon]


WAYS = {
    "plain loop": loop,
    "log-depth scan": doubling,
    "chunked, autograd": chunked,
    "chunked, Scan (trajrl)": Scan.apply,
}


def timed(function, args: tuple, repeats: int) -> float:
    """Milliseconds a forward and backward pass of ``function(*args)`` takes (its output summed)."""

    def run():
        out = function(*args)
        (out[0] if isinstance(out, tuple) else out).abs().sum().backward()

    for _ in range(3):
        run()
    start = time.perf_counter()
    for _ in range(repeats):
        run()
    return 1000 * (time.perf_counter() - start) / repeats


def inputs(batch: int, horizon: int, size: int, dtype=torch.cfloat, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    decay = torch.polar(torch.rand(size, generator=g) * 0.999, torch.rand(size, generator=g) * 6.28).to(dtype)
    starts = torch.rand(batch, horizon, generator=g) < 0.01
    a = decay.expand(batch, horizon, size) * ~starts.unsqueeze(-1)
    b = torch.randn(batch, horizon, size, generator=g).to(dtype)
    return a, b, torch.zeros(batch, size, dtype=dtype)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=20)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    shapes = [(1, 1000, 64), (1, 1000, 256), (1, 4000, 64), (16, 41, 64), (4, 41, 256)]
    print("# the recurrence over [B, T, N] complex64, forward and backward (ms, median of runs); error: the largest")
    print("# |h - h_float64| / max |h_float64| over 4,000 steps")
    print()
    print("| way | " + " | ".join(f"[{b}, {t}, {n}]" for b, t, n in shapes) + " | error |")
    print("|---|" + "---|" * (len(shapes) + 1))
    a64, b64, s64 = inputs(1, 4000, 16, torch.cdouble)
    exact = loop(a64, b64, s64)
    for name, way in WAYS.items():
        cells = []
        for batch, horizon, size in shapes:
            a, b, state = inputs(batch, horizon, size)
            b.requires_grad_()
            cells.append(f"{timed(way, (a, b, state), args.repeats):.2f}")
        with torch.no_grad():
            got = way(a64.to(torch.cfloat), b64.to(torch.cfloat), s64.to(torch.cfloat)).to(torch.cdouble)
        error = float((got - exact).abs().max() / exact.abs().max())
        print(f"| {name} | " + " | ".join(cells) + f" | {error:.1e} |", flush=True)
    print()
    print("# each memory core, in 64 -> out 128, forward and backward (ms)")
    print()
    cores = {
        "LSTM (torch)": lambda: torch.nn.LSTM(64, 128, batch_first=True),
        "LRU, 64 channels, 1 block": lambda: LRU(64, 128, 64, 1),
        "FFM, trace 64 x 4": lambda: FFM(64, 128, 64, 4),
        "FFM, trace 32 x 4": lambda: FFM(64, 128, 32, 4),
    }
    sequences = [(1, 1000), (16, 41), (4, 41)]
    print("| core | " + " | ".join(f"[{b}, {t}]" for b, t in sequences) + " |")
    print("|---|" + "---|" * len(sequences))
    for name, make in cores.items():
        core, cells = make(), []
        for batch, horizon in sequences:
            x = torch.randn(batch, horizon, 64)
            cells.append(f"{timed(core, (x,), args.repeats):.2f}")
        print(f"| {name} | " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    main()
