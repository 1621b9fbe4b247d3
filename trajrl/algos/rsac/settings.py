"""Recurrent SAC's settings (``algo=rsac``). Nothing here imports torch."""

from __future__ import annotations

from dataclasses import dataclass

from trajrl.algos.settings import NetworkSettings
from trajrl.base.declare import ANY_NUMBER, above, at_least, between, option, setting


@dataclass
class RSACSettings(NetworkSettings):
    """Recurrent SAC (continuous actions; SAC-discrete for Discrete ones, factored per dimension for
    MultiDiscrete and MultiBinary ones)."""

    name: str = option("rsac", checkpointed=True)
    hidden_size: int = setting(
        128,
        "recurrent cells (the memory core's outputs)",
        range=at_least(1),
        checkpointed=True,
        main="recurrent cells (the memory core's outputs)",
    )
    lr: float = setting(
        3e-4, "learning rate (Adam; Ni et al., 2022's for recurrent SAC)", range=above(0), main="learning rate (Adam)"
    )
    initial_state: str = setting(
        "stored",
        "actor's state at a slice's first step: stored | zero (critics start at zero)",
        choices=("stored", "zero"),
    )
    n_step: int = setting(
        1,
        "rewards summed before the critics' target bootstraps with the soft value (the entropy of the "
        "steps between is not added)",
        range=at_least(1),
    )
    tau: float = setting(
        0.02,
        "share of the way the target critics move toward the critics at each sync (1: a copy); the values "
        "approach their fixed point with a time constant of 1 / (tau (1 - gamma)) updates: 5,000 at 0.02 and "
        "gamma 0.99, 20,000 at SAC's 0.005",
        range=between(0, 1, low_open=True),
    )
    target_sync_every: int = setting(
        1,
        "updates between two target syncs (1: a soft update every step; with tau=1, "
        "a hard copy every this many updates)",
        range=at_least(1),
    )
    soft_target_fade: int | None = setting(
        10000,
        "the critics' target is SAC's soft value, whose entropy bonus alpha x H a step is alpha x (H - the target "
        "entropy) plus a level alpha x the target entropy; the level fades linearly to nothing over this many "
        "updates, so that the values stop following the temperature; null: the level stays (SAC's own target)",
        range=at_least(1),
    )
    critic_loss: str = setting(
        "huber",
        "the critics' loss per step: huber (the squared TD error up to an error of 1, then linear: an outlying "
        "error moves the critics by a bounded step, as the recurrent DQN's loss does) | mse (the squared TD "
        "error: SAC's)",
        choices=("mse", "huber"),
    )
    init_alpha: float = setting(1.0, "initial entropy temperature (learnt)", range=above(0))
    alpha_lr: float | None = setting(
        None,
        "learning rate of the temperature's log (Adam: it moves about this much an update, so reaching a "
        "temperature k times the initial one takes about ln(k) / alpha_lr updates); null: lr",
        range=above(0),
    )
    reward_scaling: str = setting(
        "rms",
        "rms: the learner divides rewards by their running root mean square, so that a task's rewards times "
        "any constant train as the task's own and the temperature meets rewards of one scale whatever the "
        "task pays (the logged returns stay in the task's units; rewards all 1, as CartPole's, are unchanged); "
        "none: the learner takes rewards as the task gives them",
        choices=("none", "rms"),
    )
    target_entropy: float | None = setting(
        None,
        "entropy the temperature aims at (null: -action size for "
        "continuous actions, target_entropy_fraction for discrete ones)",
        range=ANY_NUMBER,
    )
    target_entropy_fraction: float | None = setting(
        None,
        "discrete actions only: the target entropy as a fraction of log |A|, the uniform policy's (null: 0.7; "
        "MultiDiscrete and MultiBinary: of the sum over dimensions of log n_d)",
        range=between(0, 1, low_open=True),
    )
