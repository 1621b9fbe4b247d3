"""Which steps a trained repeat_previous agent gets wrong, and whether its critics do too.

    python scripts/recall_errors.py <run dir of trajrl/RepeatPrevious-v0> [--which latest|best] [--episodes 40]

Loads the run's agent (``trajrl.load_agent`` through ``load_run``), plays ``--episodes`` greedy episodes
(seeded 2000, 2001, ...: no evaluation's seeds), and at every step that pays (from the task's delay on)
checks the actor's action and the twin critics' smaller value's best action (recurrent SAC; each critic
run from a zero state at the episode's first step, as ``scripts/cartpole_episodes.py --values`` does)
against the answer. Prints the share right over all steps and split by what the step's history holds:
whether the answer equals the agent's own previous action (an input: ``env.previous_action``), the
previous observation, or repeats inside the window of the delay (these overlap: an answer equal to the
previous action is often a symbol repeated in the window, so read the splits together); and the critics'
action gap (best minus mean) along the episodes (0 where the critics cannot tell the actions apart).
"""

from __future__ import annotations

import argparse
import collections

import gymnasium as gym
import torch
from torchrl.envs.utils import ExplorationType, set_exploration_type

import trajrl
from trajrl.algos.rsac.networks import critic_features
from trajrl.collect.collector_env import make_env
from trajrl.envs.gym_envs import gym_options
from trajrl.report.evaluate_run import load_run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_dir")
    parser.add_argument("--which", default="latest", choices=("latest", "best"), help="the run's agent to load")
    parser.add_argument("--episodes", type=int, default=40)
    args = parser.parse_args()
    cfg, agent = load_run(args.run_dir, args.which)
    if cfg.algo.name != "rsac" or "RepeatPrevious" not in str(cfg.env.get("id")):
        parser.error(
            f"reads recurrent SAC on trajrl/RepeatPrevious-v0; this run: algo={cfg.algo.name}, {cfg.env.get('id')}"
        )
    tasks: list[gym.Env] = []

    def keep(env: gym.Env) -> gym.Env:
        tasks.append(env)
        return env

    env = make_env(
        cfg.env.id,
        dict(cfg.env.kwargs or {}),
        cfg.env.import_module,
        primer=agent.primer,
        wrap=keep,
        **gym_options(cfg.env),
    )
    algo, counts, gaps = agent.algo, collections.defaultdict(lambda: [0, 0, 0]), []
    for episode in range(args.episodes):
        env.set_seed(2000 + episode)
        with torch.no_grad(), set_exploration_type(ExplorationType.DETERMINISTIC):
            td = env.rollout(10_000, agent.greedy_policy, break_when_any_done=True)
            obs = td["observation"].unsqueeze(0).to(algo.device)
            values = [c.values(f) for c, f in zip(algo.critics, critic_features(algo.critics, obs, 0))]
            q = torch.stack(values).min(0).values[0].cpu()
        task = tasks[0].unwrapped
        seen, actions = task.seen, td["action"].reshape(-1).tolist()
        for t in range(task.delay, len(actions)):
            answer = seen[t - task.delay]
            window = seen[t - task.delay : t + 1]
            splits = (
                "every step",
                f"the answer is its previous action: {actions[t - 1] == answer}",
                f"the answer is the previous observation: {seen[t - 1] == answer}",
                f"a symbol repeats in the window: {len(set(window)) < len(window)}",
            )
            for split in splits:
                count = counts[split]
                count[0] += 1
                count[1] += actions[t] == answer
                count[2] += int(q[t].argmax()) == answer
            gaps.append(float(q[t].max() - q[t].mean()))
    env.close()
    for split, (n, actor, critics) in sorted(counts.items()):
        print(f"{split:48s} {n:5d} steps: actor right {actor / n:.2f}, critics' best action right {critics / n:.2f}")
    print(f"the critics' action gap along the episodes: {sum(gaps) / len(gaps):.2f}")


if __name__ == "__main__":
    trajrl.envs.gym_envs.register()  # trajrl's environment ids (idempotent)
    main()
