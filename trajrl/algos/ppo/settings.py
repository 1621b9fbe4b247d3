"""Episodic PPO's settings (``algo=ppo``). Nothing here imports torch."""

from __future__ import annotations

from dataclasses import dataclass

from trajrl.algos.settings import NetworkSettings
from trajrl.base.declare import FRACTION, above, at_least, between, option, setting


@dataclass
class PPOSettings(NetworkSettings):
    """Episodic PPO (optionally recurrent)."""

    name: str = option("ppo", checkpointed=True)
    recurrent: bool = setting(
        False,
        "LSTM/GRU actor and critic over whole episodes",
        checkpointed=True,
        main="an LSTM/GRU actor and critic over whole episodes",
    )
    encoder_sizes: list[int] = setting(
        [64, 64], "MLP layers (tanh) before the recurrent core or the head", range=at_least(1), checkpointed=True
    )
    max_grad_norm: float = setting(0.5, "gradient norm clipping", range=above(0))
    gae_lambda: float = setting(0.95, "GAE lambda", range=FRACTION)
    clip_epsilon: float = setting(
        0.2,
        "ratio clipping of the surrogate objective",
        range=between(0, 1, low_open=True, high_open=True),
        main="PPO's clip range",
    )
    clip_epsilon_end: float | None = setting(
        None,
        "clip_epsilon decays linearly to this over total_frames, so the policy moves less and less (RL Baselines3 "
        "Zoo's CartPole recipes: 0); null: constant",
        range=between(0, 1, high_open=True),
    )
    epochs: int = setting(
        10, "passes over each batch of episodes", range=at_least(1), main="passes over each batch of episodes"
    )
    target_kl: float | None = setting(
        None,
        "stop a batch's passes at the first minibatch whose approximate KL from the acting policy exceeds "
        "1.5x this, before its step (Stable-Baselines3's target_kl: no batch moves the policy far); null: every pass",
        range=above(0),
    )
    anneal_lr: bool = setting(True, "lr decays linearly to 0 over total_frames")
    value_coef: float = setting(0.5, "weight of the value loss", range=at_least(0))
    entropy_coef: float = setting(
        0.0, "weight of the entropy bonus", range=at_least(0), main="weight of the entropy bonus"
    )
    normalize_advantage: bool = setting(True, "standardise advantages over the valid steps of each minibatch")
    normalize_rewards: bool = setting(
        False,
        "divide rewards by the running std of the discounted return "
        "(value targets at unit scale whatever the task's reward scale)",
    )
    on_policy: str = setting(
        "mixed",
        "strict: learn only from episodes every step of which the current weights "
        "took (an episode a weight push cut is dropped: batch/episodes_dropped_stale); "
        "mixed: every complete episode, some begun before the last push",
        choices=("mixed", "strict"),
    )
