"""How much gradient a new memory core passes from its first input to a later step's output.

    python scripts/memory_gradient.py [--draws 20] [--horizon 40]

For torch's initialisation of an LSTM(64, 128) (the default critics' core) and for chrono's
(``algo.chrono_horizon``), the norm of the gradient of the outputs' sum at step t with respect to
the input at step 0, averaged over ``--draws`` cores and random inputs: how strongly a loss t steps
after an observation can teach a core to keep it (tuning.md, thirteenth session).
"""

from __future__ import annotations

import argparse

import torch

from trajrl.algos.memory import Memory, recurrent_core

LAGS = (1, 5, 9, 10, 20, 39)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--draws", type=int, default=20)
    parser.add_argument("--horizon", type=int, default=40, help="chrono's longest time scale, and the steps run")
    args = parser.parse_args()
    torch.manual_seed(0)
    lags = [lag for lag in LAGS if lag < args.horizon]
    for name, memory in (
        ("torch's", Memory("lstm")),
        (f"chrono, T = {args.horizon}", Memory("lstm", chrono_horizon=args.horizon)),
    ):
        norms = torch.zeros(len(lags))
        for _ in range(args.draws):
            core = recurrent_core(memory, 64, 128)
            x = torch.randn(1, args.horizon, 64, requires_grad=True)
            out, _ = core(x)
            for i, lag in enumerate(lags):
                (grad,) = torch.autograd.grad(out[0, lag].sum(), x, retain_graph=True)
                norms[i] += grad[0, 0].norm() / args.draws
        print(f"{name:16s} " + " ".join(f"lag {lag}: {n:.2g}" for lag, n in zip(lags, norms.tolist())))


if __name__ == "__main__":
    main()
