"""Why a trained recurrent DQN's greedy episodes on CartPole without velocities end.

    python scripts/cartpole_episodes.py <run dir> [--episodes 20] [--checkpoint FILE] [--cart-at X]

Loads the run's agent (``trajrl.load_agent``; ``--checkpoint`` another checkpoint file
of the same run, e.g. one copied while it trained), plays ``--episodes`` episodes of
``trajrl/CartPoleNoVel-v1`` seeded 1000, 1001, ... with its greedy Q-network, and
prints for each how long it lasted, why it ended (the pole fell, the cart left the
track, or the 500-step limit), where the cart and the pole were then, the largest
pole angle, how many times in a row the policy pushed the same way on average, and
the largest |cell state| its LSTM reached. ``--cart-at X`` starts every episode at
rest with the cart at X (the pole as the seed sets it): where a policy that
balances at the centre can no longer.
"""

from __future__ import annotations

import argparse
import statistics

import gymnasium as gym
import numpy as np
import torch

import trajrl
import trajrl.gym_envs
from trajrl.checkpoint import load_checkpoint, restore

trajrl.gym_envs.register()  # trajrl's environment ids (idempotent)


@torch.no_grad()
def play(qnet, seed: int, cart_at: float | None = None) -> dict:
    env = gym.make("trajrl/CartPoleNoVel-v1")
    obs, _ = env.reset(seed=seed)
    if cart_at is not None:
        cartpole = env.unwrapped
        cartpole.state = np.array([cart_at, 0.0, cartpole.state[2], 0.0])
        obs = np.array([cart_at, cartpole.state[2]], dtype=np.float32)
    state = tuple(torch.zeros(qnet.rnn.num_layers, 1, qnet.rnn.hidden_size) for _ in qnet.state_keys)
    actions, angles, steps, ended, largest_cell = [], [], 0, False, 0.0
    while not ended:
        q, state = qnet.run(torch.as_tensor(obs, dtype=torch.float).view(1, 1, -1), state)
        largest_cell = max(largest_cell, float(state[-1].abs().max()))
        actions.append(int(q[0, -1].argmax()))
        obs, _, terminated, truncated, _ = env.step(actions[-1])
        x, _, angle, _ = env.unwrapped.state
        angles.append(abs(float(angle)))
        steps, ended = steps + 1, terminated or truncated
    cartpole = env.unwrapped  # its termination thresholds
    reason = (
        "pole"
        if angles[-1] > cartpole.theta_threshold_radians
        else "cart"
        if abs(float(x)) > cartpole.x_threshold
        else "limit"
    )
    runs = 1 + sum(a != b for a, b in zip(actions, actions[1:]))
    env.close()
    return {
        "steps": steps,
        "reason": reason,
        "cart": float(x),
        "max_angle": max(angles),
        "push_run": steps / runs,
        "cell": largest_cell,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_dir")
    parser.add_argument("--episodes", type=int, default=20)
    parser.add_argument("--checkpoint", default=None, help="a checkpoint file of this run (default: its latest)")
    parser.add_argument("--cart-at", type=float, default=None, help="start at rest with the cart here")
    args = parser.parse_args()
    agent = trajrl.load_agent(args.run_dir)
    if args.checkpoint is not None:
        restore(load_checkpoint(args.checkpoint, algo_name="r2d2"), agent.algo, agent.policy_state(), rng=False)
    qnet = agent.algo.qnet
    episodes = [play(qnet, 1000 + i, args.cart_at) for i in range(args.episodes)]
    for i, e in enumerate(episodes):
        print(
            f"seed {1000 + i}: {e['steps']:3d} steps, ended by {e['reason']:5s} cart {e['cart']:+.2f}, "
            f"largest pole angle {e['max_angle']:.3f} rad, same push {e['push_run']:.1f} steps in a row, "
            f"largest |cell state| {e['cell']:.0f}"
        )
    counts = {reason: sum(e["reason"] == reason for e in episodes) for reason in ("limit", "pole", "cart")}
    fell = sorted(abs(e["cart"]) for e in episodes if e["reason"] == "pole")
    print(
        f"{args.episodes} episodes: mean length {statistics.mean(e['steps'] for e in episodes):.1f}; "
        f"500-step limit {counts['limit']}, pole fell {counts['pole']}, cart left the track {counts['cart']}; "
        f"cart {fell[0] if fell else 0:.2f} to {fell[-1] if fell else 0:.2f} from the centre when the pole fell; "
        f"same push {statistics.mean(e['push_run'] for e in episodes):.1f} steps in a row on average"
    )


if __name__ == "__main__":
    main()
