"""How far the recurrent states stored in a recurrent DQN's buffer are from its own.

    python scripts/stored_state_drift.py <run dir> [--slices 300] [--seed 0]

Loads the run's last checkpoint (Q-network and replay buffer) and draws slices that
start at least 60 steps into their episode. For each, it compares the Q-values the
learner computes from the state stored with the slice's first step (the acting
network's, as old as the step) after 0, 10 (the default burn-in) and 40 steps, and
from a zero state, against the Q-values of the same network run from the episode's
first step (the state it reaches itself, as in evaluation). It prints the median and
90th percentile of the largest difference over the actions, beside the gap between
the two best actions there: where the first is as large as the second, the learner
fits values to states its network never reaches (notebook/learning/tuning.md).
"""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path

import torch

import trajrl


def quantiles(values: list[float]) -> str:
    ordered = sorted(values)
    return f"median {statistics.median(ordered):.2f}, p90 {ordered[int(0.9 * len(ordered))]:.2f}"


@torch.no_grad()
def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--slices", type=int, default=300)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    torch.set_num_threads(1)
    agent = trajrl.load_agent(args.run_dir)
    qnet = agent.algo.qnet
    payload = torch.load(args.run_dir / "checkpoints" / "latest.pt", map_location="cpu", weights_only=True)
    steps = payload["buffer"]["_storage"]["_storage"]
    size = min(int(payload["frames"]), steps["observation"].shape[0])
    obs, step_count = steps["observation"][:size], steps["step_count"][:size, 0]
    stored = [steps[key][:size] for key in qnet.state_keys]  # each [N, layers, H]
    zero = tuple(torch.zeros_like(s[0]).unsqueeze(1) for s in stored)

    generator = torch.Generator().manual_seed(args.seed)
    after = {0: [], 10: [], 40: []}
    from_zero = {10: [], 40: []}
    gaps = []
    while len(gaps) < args.slices:
        i = int(torch.randint(size, (), generator=generator))
        t = int(step_count[i])
        if t < 60 or i - t < 0 or i + 41 > size or int(step_count[i + 40]) != t + 40:
            continue  # a slice 60+ steps into an episode that lasts 40 more, whole in the storage
        own, _ = qnet.run(obs[i - t : i + 41].unsqueeze(0), zero)  # from the episode's first step
        state = tuple(s[i].unsqueeze(1) for s in stored)
        for steps_on, out in after.items():
            q, _ = qnet.run(obs[i : i + steps_on + 1].unsqueeze(0), state)
            out.append(float((q[0, -1] - own[0, t + steps_on]).abs().max()))
        for steps_on, out in from_zero.items():
            q, _ = qnet.run(obs[i : i + steps_on + 1].unsqueeze(0), zero)
            out.append(float((q[0, -1] - own[0, t + steps_on]).abs().max()))
        top = own[0, t + 10].topk(2).values
        gaps.append(float(top[0] - top[1]))
    print(f"{args.run_dir}: {size:,} stored frames, {args.slices} slices starting 60+ steps into their episode")
    for steps_on, out in after.items():
        print(f"  |Q from the stored state after {steps_on:2d} steps - Q from the episode start|: {quantiles(out)}")
    for steps_on, out in from_zero.items():
        print(f"  |Q from a zero state after {steps_on:2d} steps   - Q from the episode start|: {quantiles(out)}")
    print(f"  gap between the two best actions there: {quantiles(gaps)}")


if __name__ == "__main__":
    main()
