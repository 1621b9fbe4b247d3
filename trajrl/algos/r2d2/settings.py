"""The recurrent DQN's settings (``algo=r2d2``). Nothing here imports torch."""

from __future__ import annotations

from dataclasses import dataclass

from trajrl.algos.settings import NetworkSettings
from trajrl.base.declare import FRACTION, at_least, between, setting


@dataclass
class R2D2Settings(NetworkSettings):
    """Recurrent DQN, R2D2-style."""

    n_step: int = setting(
        3, "rewards summed before bootstrapping", range=at_least(1), main="rewards summed before bootstrapping"
    )
    initial_state: str = setting(
        "stored", "state at a slice's first step: stored (the one the policy used) | zero", choices=("stored", "zero")
    )
    double_q: bool = setting(True, "the online network picks the next action, the target network scores it")
    value_rescaling: bool = setting(False, "h(x) = sign(x)(sqrt(|x|+1)-1) + 1e-3 x on targets")
    target_tau: float = setting(
        0.002,
        "share of the way the target network moves toward the online one at each sync (1: a copy)",
        range=between(0, 1, low_open=True),
    )
    target_sync_every: int = setting(
        1,
        "updates between two target syncs (1: a soft update every step; with "
        "target_tau=1, a hard copy every this many updates, as DQN's target network)",
        range=at_least(1),
    )
    eps_start: float = setting(1.0, "epsilon-greedy exploration at the start", range=FRACTION)
    eps_end: float = setting(0.05, "epsilon after eps_decay_frames", range=FRACTION)
    eps_decay_frames: int = setting(
        20_000,
        "frames over which epsilon anneals",
        range=at_least(0),
    )
    eps_spread: float = setting(
        0.0,
        "each collecting environment its own epsilon (Ape-X, R2D2): environment i of the N "
        "(collector.num_workers x env.num_envs) explores with epsilon^(1 + eps_spread x i / (N - 1)), so some "
        "keep exploring while others act almost greedily (R2D2: 7, with eps_start=eps_end=0.4); "
        "0: every environment the same epsilon",
        range=at_least(0),
    )
    dueling: bool = setting(False, "Q = V + A - mean(A) instead of one linear head", checkpointed=True)
