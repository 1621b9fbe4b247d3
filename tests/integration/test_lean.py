"""The lean stepping path (``env.stepping=lean``, the default) writes exactly what
TorchRL's environment path writes: the same keys, values and episodes, byte for byte,
for every environment trajrl ships and a generic gymnasium id, one environment or a
vector, complete episodes or fixed frames, with environments that raise and are rebuilt."""

import sys

import pytest
import torch

import trajrl
from trajrl.collect.lean import LeanEnv
from trajrl.replay.audit import audit_storage

CASES = {  # name: overrides (each run collects 12 rollouts from the same seed, both ways)
    "cartpole, one env": ["env=cartpole"],
    "cartpole, 3 envs": ["env=cartpole", "env.num_envs=3"],
    "cartpole, 2 envs": ["env=cartpole", "env.num_envs=2"],
    "cartpole_novel, fixed frames": [
        "experiment=r2d2_cartpole_novel",
        "env.num_envs=3",
        "trajs_per_batch=null",
        "sampler=slice",
        "sampler.state_every=null",
    ],
    "pendulum_novel, rsac": ["experiment=rsac_pendulum_novel", "env.num_envs=2", "+env.kwargs.max_episode_steps=40"],
    "cue_memory, ppo": ["experiment=rppo_cue_memory", "env.num_envs=2", "env.kwargs.length=20"],
    "bit_flipping, goals": ["experiment=r2d2_bit_flipping_her", "env.num_envs=3"],
    "point_reach, success": ["experiment=rsac_point_reach_her"],
    "Acrobot-v1 (env=gym)": ["env=gym", "env.id=Acrobot-v1", "env.num_envs=4", "+env.kwargs.max_episode_steps=40"],
    "rebuilt after raising, 4 envs": [
        "env=gym",
        "env.id=Flaky-v0",
        "env.import_module=bad_envs",
        "+env.kwargs.every=37",
        "env.num_envs=4",
        "collector.max_restarts=1000",
        "algo.normalize_observations=false",
    ],
    "rebuilt after raising, one env": [
        "env=gym",
        "env.id=Flaky-v0",
        "env.import_module=bad_envs",
        "+env.kwargs.every=37",
        "collector.max_restarts=1000",
        "algo.normalize_observations=false",
    ],
}


def collect(overrides: list[str], stepping: str, rollouts: int = 12):
    """What a sync collector writes (or yields, for PPO) in ``rollouts`` rollouts, and
    its environments' counters."""
    if "bad_envs" in sys.modules:
        sys.modules["bad_envs"]._steps = 0  # Flaky-v0 counts its process's steps: start both runs alike
    cfg = trajrl.compose(
        [
            *overrides,
            "collector=sync",
            "collector.frames_per_batch=64",
            "loop.warmup_frames=0",
            "seed=3",
            f"env.stepping={stepping}",
        ]
    )
    with trajrl.build(cfg) as pipe:
        pipe.collector.reset()  # the first observation from the seeded environments too
        torch.manual_seed(0)
        batches = []
        for i, batch in enumerate(pipe.collector):
            if batch is not None:
                batches.append(batch.clone())
            if i + 1 == rollouts:
                break
        env_type = type(pipe.collector.env)
        stored = pipe.buffer[:] if not pipe.on_policy else torch.cat([b.reshape(-1) for b in batches])
        return stored, pipe.counters.snapshot(), env_type


def assert_identical(ours, theirs) -> None:
    assert set(ours.keys(True, True)) == set(theirs.keys(True, True))
    assert ours.shape == theirs.shape
    for key in theirs.keys(True, True):
        a, b = ours.get(key), theirs.get(key)
        assert a.dtype == b.dtype and a.shape == b.shape, key
        assert a.numpy().tobytes() == b.numpy().tobytes(), key


# a vector of CartPoles: the same path as the other vectors here (fixed frames, goals, Acrobot, ...)
SLOW = ("cartpole, 3 envs", "cartpole, 2 envs")


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.slow) if n in SLOW else n for n in CASES])
def test_lean_stepping_writes_what_torchrl_writes(name):
    theirs, their_counts, their_env = collect(CASES[name], "torchrl")
    ours, our_counts, our_env = collect(CASES[name], "lean")
    assert our_env is LeanEnv and their_env is not LeanEnv
    assert_identical(ours, theirs)
    assert torch.equal(our_counts, their_counts)
    ended = int(our_counts[:, 1].sum())
    assert ended >= 3, "too few episodes ended to compare their resets"
    if "raising" in name:
        assert our_counts[:, 5].sum() >= 2, "no environment raised"
    if ours.get(("collector", "mask"), None) is None and ours.batch_dims == 1:
        assert not any(audit_storage(ours, full=False).values())


def test_a_vector_whose_environments_all_end_in_one_step_is_reset_again_as_torchrl_does():
    """When every environment of a vector ends in the same step, TorchRL resets the whole
    vector again (gymnasium's own resets of that step are discarded); so does the lean path.
    The roots handed to the policy are the same too (a partial reset zeroes what the reset
    does not give, such as the previous action)."""
    cfg = trajrl.compose(
        [
            "env=cartpole",
            "env.num_envs=2",
            "+env.kwargs.max_episode_steps=12",
            "sampler.slice_len=8",
            "sampler.burn_in=0",
            "trajs_per_batch=null",
            "collector=multi_sync",
            "collector.num_workers=2",
        ]
    )
    with trajrl.build(cfg) as pipe:
        runs = {}
        for lean in (False, True):
            # slot 1 (a second worker's): fixed frames stamp it on every step, resets included
            env = pipe.env_fn.func(*pipe.env_fn.args, **{**pipe.env_fn.keywords, "lean": lean}, slot=1)
            env.set_seed(5)
            torch.manual_seed(0)
            root, steps = env.reset(), []
            for _ in range(200):
                root.set("action", torch.randint(0, 2, (2,)))
                step, root = env.step_and_maybe_reset(root)
                steps.append((step.exclude("action").clone(), root.clone()))
            env.close()
            runs[lean] = steps
    ended = [step["next", "done"] for step, _ in runs[True]]
    assert sum(bool(done.all()) for done in ended) >= 2  # the whole vector reset again
    assert sum(bool(done.any() and not done.all()) for done in ended) >= 2  # one reset by gymnasium
    for (theirs, their_root), (ours, our_root) in zip(runs[False], runs[True]):
        assert_identical(ours, theirs)
        assert_identical(our_root, their_root)
