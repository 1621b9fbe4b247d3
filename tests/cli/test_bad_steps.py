"""A user's environment that starts to misbehave while a run trains (``tests/misbehaving_envs.py``,
each misbehaving in collector worker processes only, so that the config check's first steps pass):
a reward or an observation that is not finite or not of the declared shape ends the run in one line
naming the environment, its worker and the step (``collector.bad_steps=stop``), or its episodes are
dropped and counted (``drop``); a loss that overflows ends the run naming the update, with no
step taken and no checkpoint holding a non-finite weight. Each algorithm once; the CLI once
(``run_in``), the other cases in the test's process (``train_in``: the line the CLI would print)."""

import csv

import pytest
import torch

from trajrl.checkpoint import load_checkpoint, non_finite_entry

MISBEHAVING = ("env=gym", "env.import_module=misbehaving_envs", "+env.kwargs.in_workers_only=true")


@pytest.mark.parametrize(
    ("algo", "env_id", "returned"),
    [
        ("rsac", "NanReward-v0", "returned a reward of nan"),
        pytest.param(  # rsac's path (a background collector's worker), another misbehaviour
            "r2d2",
            "WiderObservation-v0",
            "returned an observation of shape (5,); the space declares (4,) float32",
            marks=pytest.mark.slow,
        ),
        ("ppo", "InfObservation-v0", "returned an observation holding inf (entry 1)"),
    ],
)
def test_a_bad_step_in_a_worker_ends_the_run_in_one_line_naming_it(algo, env_id, returned, run_in, train_in, capfd):
    """Not restarted (the same environment would do it again): ended at its first bad step, in the
    line the worker's fault log entry gives, with what would work, and no traceback (the worker exits
    without printing its own)."""
    cli = algo == "rsac"
    run = (run_in if cli else train_in)(
        *MISBEHAVING,
        f"env.id={env_id}",
        f"algo={algo}",
        f"collector={'multi_sync' if algo == 'ppo' else 'multi_async'}",
        "collector.max_restarts=5",
    )
    texts = (
        f"): env.id={env_id}: its step 3 of an episode (step ",
        returned,
        "fix the environment, or collector.bad_steps=drop drops such episodes and counts them",
    )
    line = "trajrl: run failed: collection failed: CollectorFailed: collector environment "
    if cli:
        err = run.failed_with(1, line, *texts)  # and no traceback: the worker exits without its own
    else:
        said = run.failed_with(1, line, *texts, capfd=capfd)
        assert "(worker " in said, said
        err = run.stderr
    assert "started a new collector" not in err and "rebuilt it" not in err, err[-3000:]
    run.assert_nothing_left()


@pytest.mark.parametrize(
    "collector",
    [
        pytest.param(  # stepped in threads of the learner's process; TorchRL's collector reports the error itself
            ("collector=async_batched",), marks=pytest.mark.slow
        ),
        ("collector=sync", "env.num_envs=2", "env.vectorization=async"),  # gymnasium's worker processes
        pytest.param(  # the same vector, made in a collector worker
            ("collector=multi_async", "env.num_envs=2", "env.vectorization=async"), marks=pytest.mark.slow
        ),
    ],
    ids=["async_batched", "async_vector", "async_vector_in_a_worker"],
)
def test_a_bad_step_in_a_collectors_thread_or_a_vectors_worker_is_said_in_the_one_line_alone(collector, run_in):
    """A NaN reward where the environment is stepped by something else than a TorchRL worker: the
    run's one line is all stderr holds, no thread's traceback and none of gymnasium's worker's
    (red ``ERROR:`` warnings) printed before it."""
    run = run_in(
        "env=gym",
        "env.import_module=misbehaving_envs",
        "+env.kwargs.in_collectors_only=true",
        "env.id=NanReward-v0",
        *collector,
    )
    err = run.failed_with(1, "trajrl: run failed: ", "env.id=NanReward-v0: its step 3 of an episode (step ")
    assert err.strip().count("\n") == 0 and "ERROR: " not in err, err[-3000:]
    run.assert_nothing_left()


def test_with_bad_steps_dropped_the_run_trains_on_finite_episodes_and_counts_the_others(train_in):
    """``collector.bad_steps=drop``: every third episode an environment starts (a drop's reset counts
    too) holds a NaN reward from its third step; those are dropped, counted in metrics.csv and the
    summary, the rest stored (the buffer holds finite rewards only) and learnt from."""
    run = train_in(
        "env=gym",
        "env.id=NanReward-v0",
        "env.import_module=misbehaving_envs",
        "+env.kwargs.every=3",
        "collector=sync",
        "collector.bad_steps=drop",
    )
    final = run.train()
    with open(run.dir / "metrics.csv", newline="") as f:
        last = list(csv.DictReader(f))[-1]
    dropped = float(last["collect/episodes_dropped_bad_steps"])
    assert dropped >= 5, last
    assert float(last["collect/env_restarts"]) == 0, last
    assert float(last["episode/completed"]) >= 20, last  # the others are stored
    assert final["train/updates"] > 0
    assert "episodes with a bad step (collector.bad_steps=drop); the first: env.id=NanReward-v0" in run.out
    stored = load_checkpoint(run.dir)["buffer"]
    rewards = [v for k, v in flat_tensors(stored) if k.endswith("reward")]
    assert rewards and all(torch.isfinite(r).all() for r in rewards)
    run.assert_nothing_left()


@pytest.mark.parametrize(
    ("overrides", "refused"),
    [
        pytest.param(  # the unchecked case's path, another key refused
            ("env.id=HugeReward-v0", "+env.kwargs.huge=3e38"),
            "'episode_reward' holds inf at step ",
            marks=pytest.mark.slow,
        ),
        (("env.id=NanReward-v0", "collector.bad_steps=unchecked"), "('next', 'reward') holds nan at step 2 "),
    ],
    ids=["sum_overflows", "unchecked"],
)
def test_a_workers_write_the_buffer_refuses_ends_the_run_without_restarts(overrides, refused, train_in, capfd):
    """Rewards that are finite but whose episode's sum is not (float32), or a NaN reward where steps
    are not checked (``collector.bad_steps=unchecked``): the worker's write is refused at the buffer's
    door, and the run ends with the refusal as its cause, not a restart (and no traceback: the worker
    exits without its own)."""
    run = train_in(*MISBEHAVING, *overrides, "collector=multi_async", "collector.max_restarts=5")
    run.failed_with(
        1,
        "trajrl: run failed: collection failed: CollectorFailed: worker ",
        "'s write into the replay buffer was refused: " + refused,
        "nothing was written",
        capfd=capfd,
    )
    assert "started a new collector" not in run.stderr, run.stderr[-3000:]
    run.assert_nothing_left()


@pytest.mark.parametrize(
    ("algo", "loss", "overrides"),
    [
        ("rsac", "critic loss", ("algo.reward_scaling=none", "algo.critic_loss=mse")),  # huber: 2e36 a step, finite
        ("r2d2", "Q loss", ()),
        ("ppo", "PPO loss", ()),
    ],
)
def test_a_loss_that_is_not_finite_ends_the_run_naming_the_update_and_no_checkpoint_holds_it(
    algo, loss, overrides, train_in, capfd
):
    """Rewards of 1e36 from each episode's third step: finite and stored, and the losses overflow at
    the first update. The step is not taken; the checkpoint saved before it (at 500 frames, before the
    first update at 600) holds finite weights and loads."""
    run = train_in(
        "env=gym",
        "env.id=HugeReward-v0",
        "env.import_module=misbehaving_envs",
        f"algo={algo}",
        "collector=sync",
        "loop.warmup_frames=600",
        *overrides,
    )
    run.failed_with(
        1,
        f"trajrl: run failed: update 1: the {loss} is ",
        "the batch holds steps of episodes ",
        "No step was taken: the weights and checkpoints stay finite",
        capfd=capfd,
    )
    if algo != "ppo":  # PPO learns its first batch before any checkpoint
        saved = run.assert_checkpoint_loads()
        assert non_finite_entry({"algo": saved["algo"], "policy": saved["policy"]}) is None
    run.assert_nothing_left()


def flat_tensors(state, key=""):
    """``(key, tensor)`` of every tensor in nested dicts, lists and tuples."""
    if isinstance(state, torch.Tensor):
        yield key, state
    elif isinstance(state, dict):
        for name, value in state.items():
            yield from flat_tensors(value, f"{key}/{name}")
    elif isinstance(state, (list, tuple)):
        for index, value in enumerate(state):
            yield from flat_tensors(value, f"{key}/{index}")
