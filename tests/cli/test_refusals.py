"""Bad input, through the real CLI: one clear message naming the setting, the value and
what would work; exit code 2; under 10 s; no run directory written; no process left.

The cases in ``FRESH_INTERPRETER`` (one per way a refusal comes about: Hydra's grammar, a group
option, a setting's range, the environment, a config file) start ``python -m trajrl``; the others
run the CLI in a process forked from one that imported it once (``helpers.cli_forks()``)."""

import importlib.util
import time

import pytest
import torch
from helpers import TESTS, exited

#: Config files a user might write (``hydra.searchpath`` adds their directory).
USER_CONFIGS = {
    "experiment/wrong_type.yaml": "# @package _global_\nloop:\n  weight_sync_every: often\n",
    "experiment/unknown_key.yaml": "# @package _global_\nloop:\n  warmup: 10\n",
    "experiment/broken_yaml.yaml": "# @package _global_\nloop: [1, 2\n",
    "experiment/unknown_option.yaml": "# @package _global_\ndefaults:\n  - override /collector: threads\n",
    "experiment/contradiction.yaml": (
        "# @package _global_\ndefaults:\n  - override /algo: ppo\ncollector:\n  kind: multi_async\n"
    ),
}

#: A test environment with MultiBinary actions (tests/action_envs.py).
MATCH_BITS = ["env=gym", "env.id=MatchMultiBinary-v0", "env.import_module=action_envs"]


#: An environment of tests/misbehaving_envs.py: what it returns misbehaves from step 3 of each episode on.
def misbehaving(env_id: str) -> list[str]:
    return ["env=gym", f"env.id={env_id}", "env.import_module=misbehaving_envs"]


CASES = [
    # unknown group options and keys, with the valid ones
    (["collector=nope"], ["collector='nope'", "use one of async, async_batched, multi_async"]),
    (["algo=dqn"], ["algo='dqn'", "use one of ppo, r2d2, rsac"]),
    (["foo=1"], ["foo=1", "the top level has no such setting", "total_frames"]),
    (
        ["sampler=random", "sampler.burn_in=3"],
        ["sampler.burn_in=3", "sampler=random has no such setting", "transitions_per_batch"],
    ),
    (["sampler=slice", "+sampler.foo=1"], ["sampler.foo=1", "sampler=slice has no such setting", "slice_len"]),
    (["seed=[1,2"], ["seed=[1,2", "override_grammar"]),
    # types
    (["trajs_per_batch=abc"], ["trajs_per_batch='abc'", "must be an integer"]),
    (["algo.lr=fast"], ["algo.lr='fast'", "must be a number"]),
    (["audit=maybe"], ["audit='maybe'", "true or false"]),
    (["algo.encoder_sizes=[a]"], ["algo.encoder_sizes[0]='a'", "a list of integers"]),
    # values and combinations; a value out of its declared range once here (through a fresh interpreter), every
    # numeric setting's below and above its range, and every setting's value outside its choices, in
    # tests/unit/test_settings.py (in the test's process)
    (["trajs_per_batch=0"], ["trajs_per_batch=0", "must be >= 1", "the default is 4"]),
    (["sampler=episode", "trajs_per_batch=null"], ["sampler='episode'", "fixed-frame", "sampler=slice"]),
    (
        ["sampler=slice_without_replacement", "trajs_per_batch=null"],
        ["sampler='slice_without_replacement'", "sampler=prioritized_slice or sampler=random"],
    ),
    (
        [
            "trajs_per_batch=null",
            "collector=async_batched",
            "collector.num_workers=2",
            "env.num_envs=2",
            "storage.ndim=3",
        ],
        ["storage.ndim=3", "4 single environments", "[N=4, T]", "storage.ndim=auto or 2"],
    ),
    (
        ["trajs_per_batch=null", "env.num_envs=4", "storage.capacity=100"],
        ["storage.capacity=100", "8 lanes", "storage.capacity>=400"],
    ),
    (["collector=async_batched", "trajs_per_batch=4"], ["trajs_per_batch=4", "async_batched", "trajs_per_batch=1"]),
    # the recipes' settings contradicting another
    (["algo.twin_value=mean"], ["algo.twin_value='mean'", "has no such setting"]),  # a setting trajrl no longer has
    (
        ["algo=r2d2", "collector=sync", "env.num_envs=1", "algo.eps_spread=7"],
        ["algo.eps_spread=7", "this run has 1", "env.num_envs=4", "algo.eps_spread=0"],
    ),
    (["algo=ppo", "algo.clip_epsilon_end=0.3"], ["algo.clip_epsilon_end=0.3", "algo.clip_epsilon=0.2", "null"]),
    (["algo=r2d2", "algo.target_sync_every=100"], ["algo.target_sync_every=100", "algo.target_tau=1"]),
    (["algo=rsac", "env=pendulum_novel", "algo.target_sync_every=100"], ["algo.target_sync_every=100", "algo.tau=1"]),
    (["env.previous_action=often"], ["env.previous_action='often'", "true or false"]),
    (
        ["experiment=r2d2_bit_flipping_her", "env.previous_reward=true"],
        ["env.previous_reward=True", "env.previous_reward=false", "sampler.her_ratio=0"],
    ),
    (["env.observe_time=true", "env.time_scales=[]"], ["env.time_scales=[]", "at least one"]),
    (
        ["experiment=r2d2_bit_flipping_her", "env.reward_scale=0.1"],
        ["env.reward_scale=0.1", "env.reward_scale=1", "sampler.her_ratio=0"],
    ),
    # the recurrent state kept every k steps only, against the other settings
    (
        ["sampler=slice", "sampler.state_every=10", "sampler.weighting=episode"],
        ["sampler.state_every=10", "sampler.weighting=step"],
    ),
    (["sampler.state_every=10", "trajs_per_batch=null"], ["sampler.state_every=10", "trajs_per_batch=4"]),
    (["sampler.state_every=10", "algo.initial_state=zero"], ["sampler.state_every=10", "no state is read"]),
    (["sampler=episode", "sampler.state_every=10"], ["sampler.state_every=10", "sampler=episode has no such setting"]),
    (["sampler.state_every=31"], ["sampler.state_every=31", "never be learnt from", "sampler.state_every<=30"]),
    # hindsight relabelling
    (["sampler.her_ratio=0.5"], ["env.id='trajrl/CartPoleNoVel-v1'", "not a Dict with keys", "env=bit_flipping"]),
    (
        ["env=bit_flipping", "sampler=random", "sampler.her_ratio=0.5"],
        ["sampler.her_ratio=0.5", "sampler=random has no such setting", "a setting of sampler=slice"],
    ),
    (
        ["env=bit_flipping", "sampler=slice_without_replacement", "sampler.her_ratio=0.5"],
        ["sampler='slice_without_replacement'", "episode index", "sampler=prioritized_slice or sampler=episode"],
    ),
    (
        ["env=bit_flipping", "sampler.her_ratio=0.5", "algo.initial_state=zero"],
        ["sampler.her_state='recompute'", "algo.initial_state=zero", "sampler.her_state=zero"],
    ),
    (
        ["env=bit_flipping", "trajs_per_batch=null", "sampler.her_ratio=0.5"],
        ["trajs_per_batch=null", "complete stored episodes", "trajs_per_batch=4"],
    ),
    (
        ["env=bit_flipping", "algo=ppo", "storage=none", "sampler=episode", "sampler.her_ratio=0.5"],
        ["sampler.her_ratio=0.5", "on-policy", "algo=r2d2 or algo=rsac"],
    ),
    (["sampler.burn_in=40"], ["sampler.burn_in=40", "slice_len", "sampler.burn_in<=39"]),
    (
        ["algo=ppo", "collector=multi_async"],
        ["collector='multi_async'", "on-policy", "collector=sync or collector=multi_sync"],
    ),
    (["algo=ppo", "collector=async_batched"], ["collector='async_batched'", "collector=sync or collector=multi_sync"]),
    (["algo=ppo", "storage=lazy_tensor"], ["storage='lazy_tensor'", "storage=none"]),
    (["algo=ppo", "sampler=slice"], ["sampler='slice'", "sampler=episode"]),
    (["algo=ppo", "trajs_per_batch=null"], ["trajs_per_batch=null", "complete-episode batches"]),
    (["storage=none"], ["storage='none'", "algo=rsac learns from a replay buffer", "storage=lazy_tensor"]),
    (["storage.ndim=2"], ["storage.ndim=2", "complete episodes flat", "storage.ndim=auto or 1"]),
    (
        ["trajs_per_batch=null", "collector=sync", "env.num_envs=4", "storage.ndim=1"],
        ["storage.ndim=1", "[B=4, T=50]", "storage.ndim=auto or 2"],
    ),
    (
        [
            "trajs_per_batch=null",
            "collector=multi_async",
            "collector.num_workers=2",
            "env.num_envs=4",
            "storage.ndim=2",
        ],
        ["storage.ndim=2", "[W=2, B=4, T=50]", "storage.ndim=auto or 3"],
    ),
    (["collector=sync", "collector.num_workers=2"], ["collector.num_workers=2", "multi_sync or multi_async"]),
    (["collector.num_workers=64"], ["collector.num_workers=64", "cores", "at most"]),
    *(
        [(["device=cuda"], ["device='cuda'", "no CUDA device", "device=cpu, or device=auto"])]
        if not torch.cuda.is_available()
        else []
    ),  # a machine with one runs it (tests/integration/test_device.py)
    (["loop.warmup_frames=5000", "total_frames=1000"], ["loop.warmup_frames=5000", "below total_frames=1000"]),
    (["algo=ppo", "loop.updates_per_frame=2"], ["loop.updates_per_frame='2'", "off-policy loop only", "algo.epochs"]),
    # memory cores and tapes
    (["sampler=tape"], ["algo.rnn='lstm'", "sampler=tape restarts", "use algo.rnn=lru or algo.rnn=ffm"]),
    (["sampler=tape", "algo.rnn=lru", "sampler.burn_in=5"], ["sampler.burn_in=5", "sampler=tape has no such setting"]),
    (["sampler=tape", "algo.rnn=lru", "trajs_per_batch=null"], ["sampler='tape'", "fixed-frame", "sampler=slice"]),
    (["algo=ppo", "algo.recurrent=true", "algo.rnn=lru", "sampler=tape"], ["sampler", "use sampler=episode"]),
    # against the environment (actions no algorithm takes, each algorithm: tests/integration/test_action_spaces.py)
    (["env=gym"], ["env.id", "required"]),
    (["env=gym", "env.id=NoSuchEnv-v0"], ["env.id='NoSuchEnv-v0'", "not a registered gymnasium id"]),
    (
        misbehaving("NeedsPhysics-v0"),
        ["env.id='NeedsPhysics-v0': needs a package that is not installed", 'pip install "fakephysics"'],
    ),
    *(
        [(["env=gym", "env.id=LunarLander-v3"], ["env.id='LunarLander-v3'", "Box2D is not installed", "pip install"])]
        if importlib.util.find_spec("Box2D") is None
        else []
    ),
    (["algo=r2d2", "env=gym", "env.id=Pendulum-v1"], ["algo=r2d2 takes Discrete actions", "use algo=ppo or algo=rsac"]),
    (["algo=r2d2", *MATCH_BITS], ["algo=r2d2 takes Discrete actions", "MultiBinary(4)", "use algo=ppo or algo=rsac"]),
    (
        ["experiment=rsac_pendulum_novel", "algo.target_entropy_fraction=0.5"],
        ["algo.target_entropy_fraction=0.5", "SAC-discrete", "continuous actions", "algo.target_entropy"],
    ),
    (
        ["algo=rsac", "algo.target_entropy_fraction=0.5", "algo.target_entropy=0.3"],
        ["algo.target_entropy_fraction=0.5", "algo.target_entropy=0.3", "keep one"],
    ),
    (
        ["loop.stop_at_return=475", "loop.eval_episodes=0"],
        ["loop.stop_at_return=475", "loop.eval_episodes=0 never evaluates", "loop.eval_episodes>=1"],
    ),
    (
        ["loop.stop_at_return=475", "loop.eval_every_frames=0"],
        [
            "loop.stop_at_return=475",
            "loop.eval_every_frames=0 evaluates only at the end",
            "loop.eval_every_frames between",
        ],
    ),
    (
        ["env=gym", "env.id=CartPole-v1", "env.import_module=no_such_module"],
        ["env.import_module='no_such_module'", "cannot be imported"],
    ),
    (["+env.kwargs.gravity_well=1"], ["env.kwargs=", "unexpected keyword argument 'gravity_well'"]),
    (["env=cue_memory", "env.kwargs.length=1"], ["env.kwargs=", "CueMemory needs length >= 2"]),
    (["sampler.slice_len=600"], ["sampler.slice_len=600", "at most 500 steps", "sampler.slice_len<=500"]),
    (["storage.capacity=100"], ["storage.capacity=100", "up to 500 steps", "storage.capacity>=500"]),
    (["resume=nowhere"], ["resume='nowhere'", "checkpoints/latest.pt", "outputs/<date>/<time>"]),
    # config files
    (["experiment=wrong_type"], ["loop.weight_sync_every='often'", "must be an integer"]),
    (
        ["experiment=unknown_key"],
        ["loop.warmup (set in experiment/unknown_key.yaml)", "loop has no such setting", "warmup_frames"],
    ),
    (["experiment=broken_yaml"], ["broken_yaml.yaml", "line 2", "expected ',' or ']'"]),
    (["experiment=unknown_option"], ["collector='threads'", "use one of", "multi_sync"]),
    (["experiment=contradiction"], ["collector='multi_async'", "algo=ppo", "collector=sync or collector=multi_sync"]),
    # an environment that returns what it does not declare, refused before any run directory (each algorithm)
    (
        misbehaving("NanReward-v0"),
        ["env.id='NanReward-v0'", "its step 3 of episode 1 returned a reward of nan", "fix the environment"],
    ),
    (
        [*misbehaving("InfObservation-v0"), "algo=r2d2"],
        ["env.id='InfObservation-v0'", "its step 3 of episode 1 returned an observation holding inf (entry 1)"],
    ),
    (
        [*misbehaving("WiderObservation-v0"), "algo=ppo"],
        ["its step 3 of episode 1 returned an observation of shape (5,); the space declares (4,) float32"],
    ),
    (misbehaving("TextObservation-v0"), ["returned an observation of dtype <U", "not numbers"]),
    (
        misbehaving("UnboundedLine-v0"),
        ["declares Box(-inf, inf, (1,), float32) actions, without finite bounds", "use algo=ppo"],
    ),
]


#: Cases run by a fresh ``python -m trajrl`` (the others forked from ``helpers.cli_forks()``).
FRESH_INTERPRETER = {
    "seed=[1,2",
    "collector=nope",
    "trajs_per_batch=0",
    "env=gym env.id=NoSuchEnv-v0",
    "experiment=broken_yaml",
}


@pytest.mark.parametrize("overrides, words", CASES, ids=[" ".join(o) for o, _ in CASES])
def test_a_setting_that_cannot_work_is_refused_with_a_clear_message(overrides, words, tmp_path):
    for name, text in USER_CONFIGS.items():
        (tmp_path / "conf" / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "conf" / name).write_text(text)
    start = time.monotonic()
    args = [*overrides, "debug=smoke", f"hydra.searchpath=[file://{tmp_path / 'conf'}]"]
    if " ".join(overrides) in FRESH_INTERPRETER:
        proc, left = exited(*args, cwd=tmp_path, timeout=30, pythonpath=TESTS, fresh=True)  # the test environments
    else:
        proc, left = exited(*args, cwd=tmp_path, timeout=30, pythonpath=TESTS)
    elapsed = time.monotonic() - start
    out, err = proc.stdout, proc.stderr
    message = out + err
    assert proc.returncode == 2, message[-2000:]
    for word in words:
        assert word in message, message[-2000:]
    assert "Traceback" not in message
    assert err.strip().startswith("trajrl: configuration error:"), err
    assert elapsed < 10
    assert not (tmp_path / "outputs").exists(), sorted(str(p) for p in (tmp_path / "outputs").rglob("*"))
    assert left == []  # no process of its group, not even a zombie, as it exited
