"""Why a trained agent's greedy episodes on CartPole without velocities end.

    python scripts/cartpole_episodes.py <run dir> [--which latest|best] [--episodes 20]
        [--checkpoint FILE] [--cart-at X] [--sampled] [--values]

Loads the run's agent (``trajrl.load_agent``, any algorithm; ``--checkpoint`` another
checkpoint file of the same run, e.g. one copied while it trained), plays ``--episodes``
episodes of the run's environment seeded 1000, 1001, ... with its greedy policy (what
``trajrl evaluate`` plays: the same environment, inputs and policy), and prints for each
how long it lasted, why it ended (the pole fell, the cart left the track, or the 500-step
limit), where the cart and the pole were then, the largest pole angle, the share of pushes
to the right, how many times in a row the policy pushed the same way on average, and the
largest |cell state| of an LSTM core. ``--cart-at X`` starts every episode at rest with
the cart at X (the pole as the seed sets it): where a policy that balances at the centre
can no longer. ``--sampled`` plays the policy's actions sampled (as the collectors do; epsilon-
greedy for the recurrent DQN) instead of its greedy choice: whether a drift is the greedy choice's.
``--values`` (recurrent SAC-discrete) also prints, every 25 steps of the first episode and at its
last 5, the cart's position as the networks read it (standardised), the twin critics' smaller
value of each action, the policy's probability of pushing right and the LSTM's |cell state|:
whether the critics see the end of the track coming.
"""

from __future__ import annotations

import argparse
import statistics

import gymnasium as gym
import numpy as np
import torch
from torchrl.envs.utils import ExplorationType, set_exploration_type

import trajrl
from trajrl.checkpoint import load_checkpoint, restore
from trajrl.collect.collector_env import make_env
from trajrl.envs.gym_envs import env_spaces, gym_options
from trajrl.report.evaluate_run import load_run


class CartAt(gym.Wrapper):
    """Every episode starts at rest with the cart at ``x`` (the pole's angle as the seed sets it)."""

    def __init__(self, env: gym.Env, x: float):
        super().__init__(env)
        self.x = x

    def reset(self, **kwargs):
        obs, info = self.env.reset(**kwargs)
        cartpole = self.env.unwrapped
        cartpole.state = np.array([self.x, 0.0, cartpole.state[2], 0.0])
        obs = np.array(obs, dtype=np.float32)
        obs[0] = self.x  # the cart's position leads every observation of the CartPole ids
        return obs, info


class Track(gym.Wrapper):
    """Records the true state after every step (the observation hides the velocities)."""

    def __init__(self, env: gym.Env):
        super().__init__(env)
        self.states: list[np.ndarray] = []

    def reset(self, **kwargs):
        self.states = []
        return self.env.reset(**kwargs)

    def step(self, action):
        out = self.env.step(action)
        self.states.append(np.array(self.env.unwrapped.state, dtype=np.float64))
        return out


@torch.no_grad()
def play(env, tracked: list[Track], policy, seed: int, step_limit: int, sampled: bool = False) -> dict:
    env.set_seed(seed)
    with set_exploration_type(ExplorationType.RANDOM if sampled else ExplorationType.DETERMINISTIC):
        td = env.rollout(step_limit, policy, break_when_any_done=True)
    states = np.stack(tracked[0].states)
    cartpole = tracked[0].env.unwrapped  # its termination thresholds
    x, angle = states[-1, 0], states[-1, 2]
    reason = (
        "pole"
        if abs(angle) > cartpole.theta_threshold_radians
        else "cart"
        if abs(x) > cartpole.x_threshold
        else "limit"
    )
    action = td["action"]
    actions = (action.argmax(-1) if action.dim() > 1 else action).reshape(-1).tolist()
    runs = 1 + sum(a != b for a, b in zip(actions, actions[1:]))
    cell = td.get(("next", "recurrent_state_c"), None)
    return {
        "steps": len(actions),
        "reason": reason,
        "cart": float(x),
        "max_angle": float(np.abs(states[:, 2]).max()),
        "right": sum(actions) / len(actions),
        "push_run": len(actions) / runs,
        "cell": float(cell.abs().max()) if cell is not None else float("nan"),
        "rollout": td,
    }


@torch.no_grad()
def print_values(algo, td) -> None:
    """What ``--values`` prints (the module's docstring) for one episode ``td``."""
    from trajrl.algos.rsac.networks import critic_features

    obs = td["observation"].unsqueeze(0).to(algo.device)
    q = torch.stack([c.values(f) for c, f in zip(algo.critics, critic_features(algo.critics, obs, 0))])
    q = q.min(0).values[0].cpu()  # [T, 2], each critic from a zero state at the episode's first step
    right = algo.actor.head.log_probs(td["features"].to(algo.device))[:, 1].exp().cpu()
    loc, scale = (
        t.flatten()[0].item() for t in (algo.actor.encoder[0].standardize.loc, algo.actor.encoder[0].standardize.scale)
    )
    steps = td.shape[0]
    for t in sorted(set(range(0, steps, 25)) | set(range(max(steps - 5, 0), steps))):
        x = td["observation"][t, 0].item()
        print(
            f"  step {t:3d}: cart {x:+.2f} (read as {(x - loc) / scale:+.1f}), action {int(td['action'][t])}, "
            f"Q left {q[t, 0]:.1f} right {q[t, 1]:.1f}, P(right) {right[t]:.2f}, "
            f"|cell state| {td['next', 'recurrent_state_c'][t].abs().max():.0f}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_dir")
    parser.add_argument("--which", default="latest", choices=("latest", "best"), help="the run's agent to load")
    parser.add_argument("--episodes", type=int, default=20)
    parser.add_argument("--checkpoint", default=None, help="a checkpoint file of this run (default: --which's)")
    parser.add_argument("--cart-at", type=float, default=None, help="start at rest with the cart here")
    parser.add_argument("--sampled", action="store_true", help="actions sampled from the policy, not its greedy choice")
    parser.add_argument("--values", action="store_true", help="recurrent SAC-discrete: the critics' values along it")
    args = parser.parse_args()
    cfg, agent = load_run(args.run_dir, args.which)
    if args.values and cfg.algo.name != "rsac":
        parser.error(f"--values reads recurrent SAC's critics; this run trained algo={cfg.algo.name}")
    if args.checkpoint is not None:
        restore(load_checkpoint(args.checkpoint, algo_name=cfg.algo.name), agent.algo, agent.policy_state(), rng=False)
        agent.evaluated.pull()
    tracked: list[Track] = []

    def wrap(env: gym.Env) -> gym.Env:
        env = CartAt(env, args.cart_at) if args.cart_at is not None else env
        tracked.append(Track(env))
        return tracked[-1]

    kwargs = dict(cfg.env.kwargs or {})
    env = make_env(cfg.env.id, kwargs, cfg.env.import_module, primer=agent.primer, wrap=wrap, **gym_options(cfg.env))
    step_limit = env_spaces(cfg.env).step_limit
    if args.sampled:
        agent.acting.pull()  # the collectors' policy, with the run's weights
    policy = agent.policy if args.sampled else agent.greedy_policy
    episodes = [play(env, tracked, policy, 1000 + i, step_limit, args.sampled) for i in range(args.episodes)]
    env.close()
    for i, e in enumerate(episodes):
        print(
            f"seed {1000 + i}: {e['steps']:3d} steps, ended by {e['reason']:5s} cart {e['cart']:+.2f}, "
            f"largest pole angle {e['max_angle']:.3f} rad, {e['right']:.0%} of pushes to the right, "
            f"same push {e['push_run']:.1f} steps in a row, largest |cell state| {e['cell']:.0f}"
        )
    if args.values:
        print(f"seed 1000, along the episode (temperature {agent.algo.log_alpha.exp().item():.2f}):")
        print_values(agent.algo, episodes[0]["rollout"])
    counts = {reason: sum(e["reason"] == reason for e in episodes) for reason in ("limit", "pole", "cart")}
    fell = sorted(abs(e["cart"]) for e in episodes if e["reason"] == "pole")
    print(
        f"{args.episodes} episodes: mean length {statistics.mean(e['steps'] for e in episodes):.1f}; "
        f"500-step limit {counts['limit']}, pole fell {counts['pole']}, cart left the track {counts['cart']}; "
        f"cart {fell[0] if fell else 0:.2f} to {fell[-1] if fell else 0:.2f} from the centre when the pole fell; "
        f"same push {statistics.mean(e['push_run'] for e in episodes):.1f} steps in a row on average"
    )


if __name__ == "__main__":
    trajrl.envs.gym_envs.register()  # trajrl's environment ids (idempotent)
    main()
