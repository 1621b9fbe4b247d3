"""Recurrent SAC's settings (``algo=rsac``). Nothing here imports torch."""

from __future__ import annotations

from dataclasses import dataclass

from trajrl.algos.settings import ReplayLearnerSettings
from trajrl.base.declare import ANY_NUMBER, above, at_least, between, option, setting


@dataclass
class RSACSettings(ReplayLearnerSettings):
    """Recurrent SAC (continuous actions; SAC-discrete for Discrete ones)."""

    name: str = option("rsac", checkpointed=True)
    hidden_size: int = setting(128, "recurrent cells (the memory core's outputs)", range=at_least(1), checkpointed=True)
    lr: float = setting(3e-4, "learning rate (Adam; Ni et al., 2022's for recurrent SAC)", range=above(0))
    initial_state: str = setting(
        "stored",
        "actor's state at a slice's first step: stored | zero (critics start at zero)",
        choices=("stored", "zero"),
    )
    refresh_states_every: int | None = setting(
        None,
        "recompute the actor's recurrent state stored with every step with the current actor every this "
        "many updates (null: never)",
        range=at_least(1),
    )
    n_step: int = setting(
        1,
        "rewards summed before the critics' target bootstraps with the soft value (the entropy of the "
        "steps between is not added)",
        range=at_least(1),
    )
    critic_core: str = setting(
        "separate",
        "the twin critics' encoder and recurrent core: separate (one each) | shared (one read by both Q "
        "heads: one sequence pass for the critics and one for their targets, where separate takes two each) "
        "| acting (shared, and it is also the actor's: trained by the critics' loss alone, the actor's head "
        "reading it without gradient; it acts and stores its state, so the critics start each slice from "
        "that state, not from zero, and the actor's own core is gone)",
        choices=("separate", "shared", "acting"),
        checkpointed=True,
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
    soft_target: bool = setting(
        True,
        "the critics' target adds the next step's entropy bonus (SAC's soft value); false: the policy's "
        "expected Q of the next step alone, the entropy kept in the actor's objective only (decoupled, as in "
        "'Dissecting Discrete SAC', 2025): values on the rewards' scale, not the temperature's",
    )
    soft_target_fade: int | None = setting(
        10000,
        "soft_target only: the level of the bonus in the critics' target (alpha x the target entropy a step) fades "
        "linearly to nothing over this many updates, the bonus alpha (H - the target entropy) after them: the "
        "values keep how the next step's entropy differs from the target, not the level that moves with the "
        "temperature (the level teaches the travel suite's 3-step recall early; its moves with the temperature "
        "slow the first-observation recall late); null: the level stays (with algo.soft_target=false: null)",
        range=at_least(1),
    )
    critic_loss: str = setting(
        "huber",
        "the critics' loss per step: huber (the squared TD error up to an error of 1 (algo.huber_delta), "
        "then linear: an outlying error, a burst of the critics' loss, moves them by a bounded step, as the "
        "recurrent DQN's loss does; what teaches the travel suite's 3-step recall) | mse (the squared TD "
        "error: terminal steps' large errors count in full) | huber_bootstrapped (Huber's where the target "
        "bootstraps, the squared error where the episode terminates within the target's steps: foreseeable "
        "ends are learnt as with mse, and so are unforeseeable ones: CartPole 2/2, the 3-step recall at chance)",
        choices=("mse", "huber", "huber_bootstrapped"),
    )
    huber_delta: float = setting(
        1.0,
        "critic_loss=huber or huber_bootstrapped: the TD error past which the loss grows linearly. The values "
        "are on the scale of the "
        "rewards (after algo.reward_scaling) times about 1 / (1 - gamma), plus the entropy bonus: on CartPole "
        "100-260, where an error of 1 mutes a terminal step's error of 150 as much as an outlier's",
        range=above(0),
    )
    dueling: bool = setting(
        False,
        "Discrete actions only: each critic's head is Q = V + A - mean(A) (Wang et al., 2016), the value "
        "common to the actions learnt apart from their differences, which are all the policy reads",
        checkpointed=True,
    )
    learner_threads: int = setting(
        1,
        "threads an update runs on: 2 runs the actor's pass, the target critics' and the second critic's "
        "backward on a second thread beside the first (two cores at once, each update the same bits as with 1; "
        "inside the default run 1.15x the learner's steps a second of one thread, the run 0.88x the time; not the "
        "default: both confirmations with it ended fewer seeds at 475, 6/10 and 6/10: docs/performance.md)",
        range=between(1, 2),
    )
    twin_value: str = setting(
        "min",
        "how the twin critics' values combine in the targets and the actor's loss: min (clipped double Q, "
        "Fujimoto et al., 2018) | mean (Zhou et al., 2022's double average: min underestimates, and more so "
        "over a categorical policy's every action)",
        choices=("min", "mean"),
    )
    q_clip: float | None = setting(
        None,
        "Zhou et al. (2022)'s Q-clip: each step's critic loss is the larger of its own and that of the target "
        "critic's value moved at most q_clip towards the critic's (in the rewards' unit after reward_scaling), "
        "so a critic gains nothing from moving further than q_clip from its target an update; null: off",
        range=above(0),
    )
    entropy_penalty: float = setting(
        0.0,
        "Discrete actions only: beta of Zhou et al. (2022)'s penalty beta * (H_acting - H)^2 on the actor's loss, "
        "each step's entropy held near the one the policy acted with there (stored with each step): the "
        "policy's entropy cannot swing from one update to the next; 0: off",
        range=at_least(0),
        checkpointed=True,  # 0 or not: the stored steps (the checkpoint's buffer) hold policy_entropy or do not
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
        "continuous actions, target_entropy_fraction for Discrete ones)",
        range=ANY_NUMBER,
    )
    target_entropy_fraction: float | None = setting(
        None,
        "Discrete actions only: the target entropy as a fraction of log |A|, the uniform policy's (null: 0.7)",
        range=between(0, 1, low_open=True),
    )
