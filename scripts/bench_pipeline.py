"""Pipeline benchmark: collection speed against the environment's own limit and against
hand-wired TorchRL, slice sampling against TorchRL's SliceSampler, and stored bytes
per frame, all measured in one run on this machine.

    python scripts/bench_pipeline.py                  # every measurement, 10 s each
    python scripts/bench_pipeline.py --seconds 5 --skip loops sampling

Collection (CartPole-v1, the recurrent DQN's behaviour policy, complete episodes),
for one env, vector widths 16, 64 and 256, and 2 workers:

- limit: raw gymnasium stepping with a random policy at the same vector width
  (``SyncVectorEnv``), per worker process;
- hand-wired TorchRL: the code a user writes today, a collector over the same
  environments and the same policy, iterated, each batch ``rb.extend``-ed into a
  ``LazyTensorStorage`` buffer;
- trajrl: the pipeline ``trajrl.build`` makes from the config, started into its
  buffer, its environments stepped by TorchRL (``env.stepping=torchrl``) and by the
  lean path (``env.stepping=lean``, the default); the trajectory audit then checks
  the whole storage. One environment: the median of 5 alternated runs of each way.

Then what checking every step costs (``checks``: ``collector.bad_steps=stop``, the default,
against ``unchecked``, for one environment, 256 of them and 2 workers x 128, and the replay
buffer's door on one write); where one vector step of 256 environments goes in trajrl's sync collector
(``breakdown``: gymnasium alone, under trajrl's restart wrapper, the policy, the lean
step, the collector's rollout and its iteration); complete-episode assembly against
TorchRL's as episodes lengthen (``assembly``); complete episodes against
fixed-frame batches (``trajs_per_batch=null``, kept in lanes of a
multi-dimensional storage) for five layouts: frames/s, the delay
from a step happening to it being sampleable, bytes per frame and sampling time;
the asynchronous training loop against a synchronous one (same frames and
updates), a run's start-up with its workers spawned or forked from a fork server
(``startup``), the stored bytes per frame against the payload (the recurrent state kept
at every step, or every k steps with ``sampler.state_every``), slice-sampling
latency against TorchRL's ``SliceSampler``, and each learner's gradient steps per
second at its preset's batch shape (with torch's plain Adam step against the fused
one, and the recurrent DQN's networks under ``torch.compile``).

    python scripts/bench_pipeline.py --skip collection fixed_frames loops sampling   # memory and learners only

Last (``in_run``), each off-policy algorithm's default run as a user starts it, with its
collector's workers at the learner's priority and below it (``collector.worker_niceness``):
the machine's busy fraction over the run, and its learner's gradient steps a second inside
the run against the same learner alone.

    python scripts/bench_pipeline.py --only in_run
"""

from __future__ import annotations

import argparse
import io
import logging
import os
import subprocess
import sys
import tempfile
import threading
import time
import warnings
from dataclasses import dataclass

import gymnasium as gym
import numpy as np
import torch

import trajrl
from trajrl.base.keys import TRAJ_KEY
from trajrl.replay.audit import audit_storage
from trajrl.replay.episodes import buffer_locked
from trajrl.training.progress import Progress

ENV = "CartPole-v1"
COMMON = ["algo=r2d2", "env=cartpole", "storage.capacity=200000", "loop.warmup_frames=0"]


@dataclass(frozen=True)
class Setting:
    """One collection configuration, measured three ways."""

    label: str
    collector: str  # trajrl's collector kind (the hand-wired code uses TorchRL's class of the same name)
    workers: int
    width: int  # environments per worker (a gymnasium vector env when > 1)
    runs: int = 1  # alternated runs of each way; the median is reported

    @property
    def frames_per_batch(self) -> int:  # rollouts of 200 steps of one env; 8 steps of a wide vector
        return max(200, 8 * self.width)

    @property
    def trajs_per_batch(self) -> int:  # write 4 episodes at a time, or a quarter of the vector's
        return max(4, self.width // 4)

    def overrides(self, stepping: str = "lean", bad_steps: str = "stop") -> list[str]:
        return [
            *COMMON,
            f"collector.bad_steps={bad_steps}",
            f"collector={self.collector}",
            f"collector.num_workers={self.workers}",
            f"env.num_envs={self.width}",
            f"collector.frames_per_batch={self.frames_per_batch}",
            f"trajs_per_batch={self.trajs_per_batch}",
            f"env.stepping={stepping}",
        ]


SETTINGS = [
    Setting("1 env, collector=sync", "sync", 1, 1, runs=5),
    Setting("16 envs, collector=sync", "sync", 1, 16),
    Setting("64 envs, collector=sync", "sync", 1, 64),
    Setting("256 envs, collector=sync", "sync", 1, 256),
    Setting("2 workers x 1 env, multi_async", "multi_async", 2, 1),
    Setting("2 workers x 128 envs, multi_async", "multi_async", 2, 128),
]


def raw_limit(width: int, seconds: float) -> float:
    """Frames/s of gymnasium alone in one process, random actions, ``width`` environments
    side by side (``SyncVectorEnv`` with same-step autoreset, as trajrl steps them)."""
    if width == 1:
        env = gym.make(ENV)
        env.reset(seed=0)
        frames, start = 0, time.perf_counter()
        while time.perf_counter() - start < seconds:
            for _ in range(1000):
                _, _, terminated, truncated, _ = env.step(env.action_space.sample())
                if terminated or truncated:
                    env.reset()
            frames += 1000
        return frames / (time.perf_counter() - start)
    envs = gym.vector.SyncVectorEnv([lambda: gym.make(ENV)] * width, autoreset_mode=gym.vector.AutoresetMode.SAME_STEP)
    envs.reset(seed=0)
    frames, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        for _ in range(100):
            envs.step(envs.action_space.sample())
        frames += 100 * width
    envs.close()
    return frames / (time.perf_counter() - start)


def stored_per_second(buffer, seconds: float, warmup_s: float = 3.0) -> float:
    """Frames written into ``buffer`` per second, over ``seconds`` after a warm-up."""
    time.sleep(warmup_s)
    first, start = buffer.write_count, time.perf_counter()
    time.sleep(seconds)
    return (buffer.write_count - first) / (time.perf_counter() - start)


def hand_wired(setting: Setting, seconds: float) -> float:
    """The code a user writes today: a TorchRL collector over the same environments
    (``GymEnv``, or ``GymWrapper`` over the same gymnasium vector env, with
    ``InitTracker``, ``StepCounter``, ``RewardSum`` and the recurrent-state primer)
    and the same policy, iterated, each batch ``rb.extend``-ed into a plain buffer."""
    from torchrl.collectors import Collector, MultiAsyncCollector
    from torchrl.data import LazyTensorStorage, TensorDictReplayBuffer
    from torchrl.envs import Compose, GymEnv, GymWrapper, InitTracker, RewardSum, StepCounter, TransformedEnv

    with trajrl.build(trajrl.compose(setting.overrides())) as pipe:  # only for the same policy and primer
        policy, primer = pipe.policy, pipe.env_fn.args[3]
    width = setting.width

    def make_env():
        if width == 1:
            env = GymEnv(ENV, categorical_action_encoding=True)
        else:
            vector = gym.vector.SyncVectorEnv(
                [lambda: gym.make(ENV)] * width, autoreset_mode=gym.vector.AutoresetMode.SAME_STEP
            )
            env = GymWrapper(vector, categorical_action_encoding=True)
        return TransformedEnv(env, Compose(InitTracker(), StepCounter(), RewardSum(), primer.clone()))

    buffer = TensorDictReplayBuffer(storage=LazyTensorStorage(200_000))
    common = dict(
        frames_per_batch=setting.frames_per_batch,
        total_frames=-1,
        trajs_per_batch=setting.trajs_per_batch,
        traj_format="cat",
    )
    if setting.collector == "sync":
        collector = Collector(make_env, policy, **common)
    else:
        collector = MultiAsyncCollector([make_env] * setting.workers, policy, num_threads=1, **common)
    stop = threading.Event()

    def run():
        for batch in collector:
            buffer.extend(batch)
            if stop.is_set():
                break

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    try:
        return stored_per_second(buffer, seconds)
    finally:
        stop.set()
        thread.join(timeout=30)
        collector.shutdown()


def trajrl_pipeline(
    setting: Setting, seconds: float, stepping: str = "lean", bad_steps: str = "stop"
) -> tuple[float, int, dict]:
    """trajrl's pipeline from the config (its environments stepped as ``stepping`` says, their
    steps checked as ``collector.bad_steps`` says), started into its buffer: frames/s, the audit's
    violations over the whole storage afterwards, and the bytes per frame."""
    with trajrl.build(trajrl.compose(setting.overrides(stepping, bad_steps))) as pipe:
        pipe.collector.start()
        try:
            fps = stored_per_second(pipe.buffer, seconds)
        finally:
            pipe.collector.async_shutdown()
        full = len(pipe.buffer) == pipe.buffer.storage.max_size
        violations = sum(audit_storage(pipe.buffer[:], full=full).values())
        return fps, violations, bytes_per_frame(pipe.buffer)


LAYOUTS = [  # (label, collector, workers, environments per worker) of the fixed-frame rows
    ("1 env, collector=sync", "sync", 1, 1),
    ("16 envs, collector=sync", "sync", 1, 16),
    ("2 workers x 1 env, multi_async", "multi_async", 2, 1),
    ("2 workers x 16 envs, multi_async", "multi_async", 2, 16),
    ("8 single envs, async_batched", "async_batched", 1, 8),
]


def delays_and_rates(collector: str, workers: int, width: int, fixed: bool, seconds: float) -> dict:
    """One layout with complete episodes (``trajs_per_batch`` 4; 1 for async_batched) or fixed frames
    (``trajs_per_batch=null``, lanes): frames stored per second; the delay from a step
    happening to it being sampleable (each stored step carries the clock of its step,
    ``scripts/clock_env.py``; the buffer is read every 5 ms); stored bytes per frame;
    and milliseconds per sample of 32 slices of 32 steps once collection has stopped."""
    import clock_env  # noqa: F401  (registers ClockCartPole-v0 in this process; workers import it by name)

    episodes = 1 if collector == "async_batched" else 4  # async_batched writes each episode as it ends
    overrides = [
        "algo=r2d2",  # its observation as the environment gives it (algo=rsac adds the previous action after the clock)
        "env=gym",
        "env.id=ClockCartPole-v0",
        "env.import_module=clock_env",
        "storage.capacity=200000",
        "loop.warmup_frames=0",
        f"collector={collector}",
        f"collector.num_workers={workers}",
        f"env.num_envs={width}",
        f"collector.frames_per_batch={max(200, 8 * width)}",
        f"trajs_per_batch={'null' if fixed else episodes}",
        "sampler=slice",
        "sampler.slice_len=32",
        "sampler.slices_per_batch=32",
        "algo.normalize_observations=false",
    ]
    delays: list[torch.Tensor] = []
    with trajrl.build(trajrl.compose(overrides)) as pipe:
        buffer, writer = pipe.buffer, pipe.buffer._writer
        with buffer_locked(buffer):
            seen = writer.written_since(None)[1]
        pipe.collector.start()
        try:
            time.sleep(2.0)  # workers started, first rollouts done
            first, start = buffer.write_count, time.perf_counter()
            with buffer_locked(buffer):
                seen = writer.written_since(seen)[1]
            while time.perf_counter() - start < seconds:
                time.sleep(0.005)
                with buffer_locked(buffer):
                    index, seen = writer.written_since(seen)
                    now = time.monotonic() % clock_env.PERIOD_S
                    stamps = buffer.storage.get(index).get("observation")[..., -1].reshape(-1)
                delays.append((now - stamps.double()) % clock_env.PERIOD_S)
            fps = (buffer.write_count - first) / (time.perf_counter() - start)
        finally:
            pipe.collector.async_shutdown()
        delay = torch.cat(delays) * 1000
        pipe.sequences.sample()
        t0 = time.perf_counter()
        for _ in range(20):
            pipe.sequences.sample()
        sample_ms = 1000 * (time.perf_counter() - t0) / 20
        return {
            "fps": fps,
            "p50": float(delay.median()),
            "p99": float(torch.quantile(delay, 0.99)),
            "bytes": bytes_per_frame(buffer)["stored"],
            "sample_ms": sample_ms,
            "stored": writer.stored,
            "ndim": buffer.storage.ndim,
        }


def step_breakdown(width: int, steps: int) -> dict[str, float]:
    """Where a vector step of ``width`` environments goes in trajrl's sync collector, in ms
    (the median of 5 alternated timings of ``steps`` steps each): gymnasium alone with
    random actions (the limit's step), the same vector as trajrl builds it (the restart
    wrapper around each environment), the behaviour policy, the policy plus the lean
    step, the collector's rollout, and its iteration (rollout, episode assembly, buffer write)."""
    setting = Setting("", "sync", 1, width)
    overrides = setting.overrides()
    with trajrl.build(trajrl.compose(overrides)) as pipe:
        env, policy, collector = pipe.env_fn(slot=0), pipe.policy, pipe.collector
        vector = env.base._env  # the gymnasium vector under trajrl's lean env
        limit = gym.vector.SyncVectorEnv(
            [lambda: gym.make(ENV)] * width, autoreset_mode=gym.vector.AutoresetMode.SAME_STEP
        )
        limit.reset(seed=0)
        root = policy(env.reset())
        rollout_steps = setting.frames_per_batch // width
        iterator = iter(collector)

        def lean_step():
            nonlocal root
            _, root = env.step_and_maybe_reset(policy(root))

        parts = {
            "gymnasium step, random actions (the limit)": (lambda: limit.step(limit.action_space.sample()), 1),
            "the same under trajrl's restart wrapper": (lambda: vector.step(vector.action_space.sample()), 1),
            "policy": (lambda: policy(root.clone()), 1),
            "policy + lean step": (lean_step, 1),
            "collector rollout": (collector.rollout, rollout_steps),
            "collector iteration (+ assembly, write)": (lambda: next(iterator), rollout_steps),
        }
        times: dict[str, list[float]] = {name: [] for name in parts}
        with torch.no_grad():
            for _ in range(5):
                for name, (call, per_call) in parts.items():
                    calls = max(1, steps // per_call)
                    call()
                    start = time.perf_counter()
                    for _ in range(calls):
                        call()
                    times[name].append((time.perf_counter() - start) * 1e3 / (calls * per_call))
        limit.close()
        env.close()
    return {name: float(np.median(t)) for name, t in times.items()}


def assembly_cost(lengths: tuple[int, ...], width: int = 256, steps: int = 8) -> list[dict]:
    """Complete-episode assembly of rollouts of ``width`` environments x ``steps`` steps
    whose episodes last ``length`` steps each (staggered), ms per rollout (the median over
    the rollouts after the first ``length`` steps): TorchRL's (``_traj_ingest``, then a
    ``cat`` per episode written: the hand-wired collector's) against trajrl's
    ``EpisodesUnderWay``. The rollouts are copies of one real rollout of trajrl's sync
    collector (every field the default recurrent DQN's rollout has), their ids and ends rewritten."""
    from torchrl.collectors.utils import _traj_ingest

    from trajrl.collect.assembly import EpisodesUnderWay

    with trajrl.build(
        trajrl.compose(
            [*COMMON, "collector=sync", f"env.num_envs={width}", f"collector.frames_per_batch={width * steps}"]
        )
    ) as pipe:
        pipe.collector._ignore_rb = True  # the rollout as EpisodeCollector gets it, not written
        template = next(pipe.collector.iterator()).clone()
    rows = []
    for length in lengths:
        rollouts, age, ids, next_id = [], torch.arange(width) * length // width, torch.arange(width), width
        for _ in range(max(40, 3 * length // steps)):
            traj_ids, done = (
                torch.empty(width, steps, dtype=torch.int64),
                torch.zeros(width, steps, 1, dtype=torch.bool),
            )
            for k in range(steps):
                traj_ids[:, k], age = ids, age + 1
                ended = age >= length
                done[:, k, 0], age[ended] = ended, 0
                ids[ended] = torch.arange(next_id, next_id + int(ended.sum()))
                next_id += int(ended.sum())
            rollout = template.clone()
            rollout.set(TRAJ_KEY, traj_ids)
            rollout.set(("next", "done"), done)
            rollout.set(("next", "terminated"), done.clone())
            rollout.set(("next", "truncated"), torch.zeros_like(done))
            rollouts.append(rollout)
        theirs, ours = [], []
        partial, complete, under_way = {}, [], EpisodesUnderWay()
        for rollout in rollouts:
            start = time.perf_counter()
            _traj_ingest(rollout, partial, complete)
            written = [torch.cat(complete)] if complete else []
            complete.clear()
            middle = time.perf_counter()
            episodes = under_way.add(rollout.reshape(-1))
            theirs.append(middle - start)
            ours.append(time.perf_counter() - middle)
            assert sum(w.shape[0] for w in written) == episodes.shape[0]
        settled = min(length // steps, len(rollouts) - 20)  # once every environment has ended an episode
        rows.append(
            {
                "length": length,
                "under way": len(under_way),
                "torchrl": float(np.median(theirs[settled:])) * 1e3,
                "trajrl": float(np.median(ours[settled:])) * 1e3,
            }
        )
    return rows


def loops(collector: str, workers: int, frames: int) -> tuple[float, float, int, int]:
    """Wall-clock of trajrl's asynchronous loop (collector running beside the learner)
    and of a synchronous loop (collect a batch, then the updates it is owed, as
    hand-wired TorchRL and most libraries do) over the same frames and updates:
    (async s, sync s, frames, updates)."""
    overrides = [
        "algo=r2d2",
        "loop.updates_per_frame=0.25",
        f"total_frames={frames}",
        "loop.eval_every_frames=0",
        "loop.eval_episodes=0",
        "loop.checkpoint_every_frames=0",
        "logger=none",
        "loop.warmup_frames=2000",
    ]
    with tempfile.TemporaryDirectory() as run_dir:
        final = trajrl.train(
            trajrl.compose([f"collector={collector}", f"collector.num_workers={workers}", *overrides]),
            run_dir=run_dir,
            progress=Progress(frames, stream=io.StringIO(), live=False),
        )
    async_s, updates = float(final["time/elapsed_s"]), int(final["train/updates"])
    stored = int(final["frames"])

    # The same environments in the learner's process, stepped in turns with the updates.
    cfg = trajrl.compose(["collector=sync", f"env.num_envs={workers}", *overrides])
    with trajrl.build(cfg) as pipe:
        settings = cfg.loop
        done_updates, start = 0, time.monotonic()
        for _ in pipe.collector:  # each iteration writes one batch of episodes into the buffer
            written = pipe.buffer.write_count
            owed = min(updates, int((min(written, stored) - settings.warmup_frames) * settings.updates_per_frame))
            while done_updates < owed:
                batch = pipe.sequences.sample()
                pipe.algo.update(batch)
                done_updates += 1
                if done_updates % settings.weight_sync_every == 0:
                    pipe.version.bump()
                    pipe.collector.update_policy_weights_()
            if written >= stored and done_updates >= updates:
                break
        sync_s = time.monotonic() - start
    return async_s, sync_s, stored, updates


def bytes_per_frame(buffer) -> dict:
    """Bytes the storage holds per frame, against the payload of one frame: what the
    environment gives (observation, action, reward, done flags, next observation),
    and that plus the recurrent state a slice starts from (``algo.initial_state=stored``)."""
    storage = buffer.storage
    stored = storage._storage.reshape(-1) if storage.ndim > 1 else storage[: len(buffer)]  # lanes: every cell
    frames = stored.numel()

    def size(keys) -> float:
        return sum(stored.get(k).element_size() * stored.get(k).numel() for k in keys) / frames

    keys = list(stored.keys(include_nested=True, leaves_only=True))
    env = [
        "observation",
        "action",
        ("next", "reward"),
        ("next", "done"),
        ("next", "terminated"),
        ("next", "truncated"),
        ("next", "observation"),
    ]
    state = [k for k in keys if isinstance(k, str) and k.startswith("recurrent_state")]
    extra = [k for k in keys if k not in env and k not in state]
    kept = getattr(buffer._writer, "states", None)  # sampler.state_every: kept apart, a slot per k positions
    kept_bytes = kept.nbytes() / storage.max_size if kept is not None else 0.0
    return {
        "stored": size(keys) + kept_bytes,
        "env": size(env),
        "learner": size(env + state),
        "fields": len(keys),
        "state": size(state) + kept_bytes,
        "extra": ", ".join(f"{k if isinstance(k, str) else '.'.join(k)} {size([k]):.0f}" for k in extra),
    }


def stored_bytes(state_every: int | str | None) -> dict:
    """Bytes per frame of the default recurrent DQN's buffer (20,000 frames written), with
    the recurrent state kept at every step or every ``state_every`` steps only ("auto": the default)."""
    every = "null" if state_every is None else state_every
    with trajrl.build(
        trajrl.compose(
            [
                *COMMON,
                "collector=sync",
                "env.num_envs=8",
                "collector.frames_per_batch=400",
                "storage.capacity=20000",
                f"sampler.state_every={every}",
            ]
        )
    ) as pipe:
        for _ in pipe.collector:
            if pipe.buffer.write_count >= 20_000:
                break
        full = len(pipe.buffer) == pipe.buffer.storage.max_size
        return {**bytes_per_frame(pipe.buffer), "violations": sum(audit_storage(pipe.buffer[:], full=full).values())}


def synthetic_episodes(frames: int, first_id: int, rng: np.random.Generator):
    """Flat complete episodes of 10 to 500 steps (CartPole-sized observations)."""
    from tensordict import TensorDict

    lengths = []
    while sum(lengths) < frames:
        lengths.append(int(rng.integers(10, 501)))
    lengths[-1] -= sum(lengths) - frames
    ids = torch.repeat_interleave(torch.arange(first_id, first_id + len(lengths)), torch.tensor(lengths))
    done = torch.zeros(frames, 1, dtype=torch.bool)
    done[torch.tensor(lengths).cumsum(0) - 1] = True
    is_init = torch.zeros(frames, 1, dtype=torch.bool)
    is_init[torch.cat([torch.zeros(1, dtype=torch.long), torch.tensor(lengths).cumsum(0)[:-1]])] = True
    return TensorDict(
        {"observation": torch.randn(frames, 4), "is_init": is_init, TRAJ_KEY: ids, ("next", "done"): done},
        batch_size=[frames],
    ), first_id + len(lengths)


def sampling_latency(kind: str, writes: bool, repeats: int) -> float:
    """Milliseconds per sample of 256 slices of 32 steps from a 1,000,000-frame buffer."""
    from torchrl.data import LazyTensorStorage, TensorDictReplayBuffer
    from torchrl.data.replay_buffers.samplers import SliceSampler

    from trajrl.replay.slices import StepSliceSampler

    capacity, rng = 1_000_000, np.random.default_rng(0)
    sampler = (
        SliceSampler(slice_len=32, traj_key=TRAJ_KEY, strict_length=False)
        if kind == "torchrl"
        else StepSliceSampler(capacity, 32)
    )
    buffer = TensorDictReplayBuffer(storage=LazyTensorStorage(capacity), sampler=sampler, batch_size=256 * 32)
    if kind == "trajrl":
        sampler.follow(buffer._writer)  # as trajrl's buffer factory does
    data, next_id = synthetic_episodes(capacity, 0, rng)
    buffer.extend(data)
    stop = threading.Event()

    def writer():  # a collector's worth of new episodes: storage wraps, boundaries move
        nonlocal next_id
        while not stop.is_set():
            episodes, next_id = synthetic_episodes(2_000, next_id, rng)
            buffer.extend(episodes)
            time.sleep(0.01)

    thread = threading.Thread(target=writer, daemon=True) if writes else None
    if thread:
        thread.start()
    try:
        buffer.sample()  # first sample: caches warmed
        start = time.perf_counter()
        for _ in range(repeats):
            buffer.sample()
        return 1000 * (time.perf_counter() - start) / repeats
    finally:
        stop.set()
        if thread:
            thread.join()


#: ``r2d2_cartpole_novel``'s settings but its sampler's (a preset's sampler settings fit its sampler only).
R2D2_PRESET = ["algo=r2d2", "env=cartpole_novel", "algo.target_tau=0.005", "loop.updates_per_frame=0.5"]
#: (label, preset or None for the default run, overrides): the learners timed alone.
LEARNERS = [
    ("recurrent SAC-discrete, the default run", None, []),
    ("the default run's learner as at c19e015 (16 slices a batch)", None, ["sampler.slices_per_batch=16"]),
    ("recurrent DQN", "r2d2_cartpole_novel", []),
    ("recurrent SAC", "rsac_pendulum_novel", []),
    ("recurrent PPO", "rppo_cartpole_novel", []),
    # memory cores and batching at the same transitions a batch (640: 16 slices of 40 steps)
    ("recurrent SAC-discrete, LRU core, 16 slices", None, ["sampler.slices_per_batch=16", "algo.rnn=lru"]),
    (
        "recurrent SAC-discrete, LRU core, tape of 640",
        None,
        ["sampler=tape", "sampler.tape_frames=640", "algo.rnn=lru"],
    ),
    (
        "recurrent SAC-discrete, FFM core, tape of 640",
        None,
        ["sampler=tape", "sampler.tape_frames=640", "algo.rnn=ffm"],
    ),
    (
        "recurrent DQN, LRU core, tape of 1,280 (the preset's 32 slices of 40 steps)",
        None,
        [*R2D2_PRESET, "sampler=tape", "sampler.tape_frames=1280", "algo.rnn=lru"],
    ),
    (
        "recurrent DQN, FFM core, tape of 1,280 (the preset's 32 slices of 40 steps)",
        None,
        [*R2D2_PRESET, "sampler=tape", "sampler.tape_frames=1280", "algo.rnn=ffm"],
    ),
    ("recurrent PPO, LRU core", "rppo_cartpole_novel", ["algo.rnn=lru"]),
    ("recurrent PPO, FFM core", "rppo_cartpole_novel", ["algo.rnn=ffm"]),
]


def plain_optimizers(algo) -> dict:
    """torch's default Adam step on a CPU (a loop over the parameters) for each of
    ``algo``'s fused optimisers, over the same parameters: the learner without the speed-up."""
    plain = {}
    for name, value in vars(algo).items():
        if isinstance(value, torch.optim.Optimizer):
            params = [p for group in value.param_groups for p in group["params"]]
            kwargs = {k: v for k, v in value.param_groups[0].items() if k in ("lr", "eps", "betas")}
            plain[name] = torch.optim.Adam(params, foreach=False, **kwargs)
    return plain


def frames_learnt(batch, burn_in: int) -> int:
    """The steps of a batch a loss learns from: valid, past the burn-in unless the row starts its episode."""
    from trajrl.algos.sequences import learned_steps

    return int(learned_steps(batch, min(burn_in, batch.shape[-1] - 1))[0].sum())


def learner_speed(preset: str | None, updates: int, repeats: int, device: str = "cpu", overrides=()) -> dict:
    """Gradient steps per second of ``preset``'s learner at its batch shape, alone on one
    thread, with torch's plain Adam step and with the fused one, alternated ``repeats`` times (medians):
    batches sampled from 20,000 stored frames (PPO: its collected episodes, ``epochs`` x minibatches a batch); and the
    share of the time in the recurrent kernels, from a profile of a quarter as many steps. ``device``: where the
    learner trains (the run's ``device`` setting; on cuda each step is timed to its end).
    ``preset=None``: the learner of the run ``overrides`` make (the default run's: none)."""
    from torch.profiler import ProfilerActivity, profile

    cfg = trajrl.compose(
        [
            *([f"experiment={preset}"] if preset else []),
            *overrides,
            "collector=sync",
            "env.num_envs=8",
            "collector.frames_per_batch=800",
            "logger=none",
            f"device={device}",
        ]
    )
    synchronize = torch.cuda.synchronize if torch.cuda.is_available() and device != "cpu" else (lambda: None)
    with trajrl.build(cfg) as pipe:
        algo = pipe.algo
        fused = {name: v for name, v in vars(algo).items() if isinstance(v, torch.optim.Optimizer)}
        plain = plain_optimizers(algo)
        batches = []
        for batch in pipe.collector:
            if pipe.on_policy:
                batches.append(batch)
                if len(batches) == 4:
                    break
            elif pipe.buffer.write_count >= 20_000:
                break

        def step():
            if pipe.on_policy:
                return batches[algo.updates % len(batches)], 0.0
            t0 = time.perf_counter()
            batch = pipe.sequences.sample()
            return batch, time.perf_counter() - t0

        def run(count: int, optimizers: dict) -> dict:
            vars(algo).update(optimizers)
            sample_s = update_s = 0.0
            learnt = 0
            start_updates = algo.updates
            while algo.updates - start_updates < count:
                batch, took = step()
                learnt += frames_learnt(batch, getattr(algo, "burn_in", 0))
                t0 = time.perf_counter()
                algo.update(batch)
                if pipe.sequences is not None:
                    pipe.sequences.update_priority(batch)
                synchronize()
                update_s += time.perf_counter() - t0
                sample_s += took
            steps = algo.updates - start_updates
            return {
                "per_s": steps / (sample_s + update_s),
                "frames_per_s": learnt / (sample_s + update_s),
                "sample_ms": 1000 * sample_s / steps,
                "update_ms": 1000 * update_s / steps,
            }

        run(5, fused)  # warm-up
        runs = {"plain": [], "fused": []}
        for _ in range(repeats):
            runs["plain"].append(run(updates, plain))
            runs["fused"].append(run(updates, fused))
        with profile(activities=[ProfilerActivity.CPU]) as prof:  # apart: the profiler slows every call
            run(max(1, updates // 4), fused)
        events = prof.key_averages()
        total = sum(e.self_cpu_time_total for e in events)
        recurrent = sum(e.self_cpu_time_total for e in events if any(k in e.key for k in ("rnn", "lstm", "gru")))
        counted = [step()[0] for _ in range(4)]  # the update's own operators, sampling apart
        with profile(activities=[ProfilerActivity.CPU]) as counting:
            for batch in counted:
                algo.update(batch)
        ops = sum(e.count for e in counting.key_averages() if e.key.startswith("aten::")) / len(counted)
        compile_s = None
        if hasattr(algo, "qnet") and isinstance(algo.qnet.rnn, torch.nn.LSTM):
            # torch.compile of the recurrent DQN's networks (the LSTM stays ATen's kernel); a linear core's
            # complex scan took 313 s to compile and ran 100x slower (2026-11-27)
            t0 = time.perf_counter()
            for net in (algo.qnet, algo.target):
                net.sequence_q, net.run = torch.compile(net.sequence_q), torch.compile(net.run)
            run(2, fused)
            compile_s = time.perf_counter() - t0
            runs["compiled"] = [run(updates, fused) for _ in range(repeats)]
        median = {kind: {k: float(np.median([r[k] for r in rs])) for k in rs[0]} for kind, rs in runs.items()}
        return {
            **median,
            "recurrent": recurrent / max(total, 1),
            "ops": ops,
            "shape": tuple(step()[0].shape),
            "compile_s": compile_s,
        }


#: The off-policy algorithms' default runs, as a user starts them (``in_run``).
IN_RUN = [
    ("recurrent SAC-discrete, the default run", []),
    ("the default run as at c19e015 (16 slices a batch)", ["sampler.slices_per_batch=16"]),
    ("recurrent DQN, algo=r2d2", ["algo=r2d2"]),
    ("recurrent SAC, algo=rsac env=pendulum_novel", ["algo=rsac", "env=pendulum_novel"]),
]


def in_run(overrides: list[str], frames: int) -> dict:
    """``python -m trajrl *overrides total_frames=frames`` as a user runs it, alone on the
    machine: its wall-clock, the machine's busy fraction and the learner's gradient steps
    a second (evaluation time left out) between its second metrics row and its last
    before the closing one, and the learner's time a step (sampling and updating) there; the
    trajectory audit's violations (``audit=true``: every 100th batch, the whole buffer at the end).
    Busy: the whole machine's CPU (/proc/stat) over that window, of all its cores."""
    from trajrl.report import runs

    with tempfile.TemporaryDirectory() as where:
        metrics = os.path.join(where, "run", "metrics.csv")
        command = [
            sys.executable,
            "-m",
            "trajrl",
            *overrides,
            f"total_frames={frames}",
            "logger.plots=false",
            "audit=true",
        ]
        t0 = time.monotonic()
        proc = subprocess.Popen(
            [*command, f"hydra.run.dir={where}/run"],
            cwd=where,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        marks: dict[int, tuple[float, float]] = {}  # metrics rows written -> (when, machine CPU s) they were seen
        while proc.poll() is None:
            try:
                with open(metrics) as f:
                    written = max(sum(1 for _ in f) - 1, 0)
            except OSError:
                written = 0
            marks.setdefault(written, (time.monotonic(), machine_cpu_s()))
            time.sleep(0.1)
        wall = time.monotonic() - t0
        if proc.returncode != 0:
            raise RuntimeError(proc.stderr.read()[-2000:])
        rows = runs.read_metrics(metrics)
    if len(rows) < 4:
        raise ValueError(f"total_frames={frames} writes {len(rows)} metrics rows: in_run needs 4 or more")
    first, last = rows[1], rows[-2]  # past the warm-up; before the closing evaluation
    (t_first, cpu_first), (t_last, cpu_last) = marks[2], marks[len(rows) - 1]
    steps = last["train/updates"] - first["train/updates"]
    learner_s = (last["time/sample_s"] + last["time/update_s"]) - (first["time/sample_s"] + first["time/update_s"])
    outside_eval = (last["time/elapsed_s"] - first["time/elapsed_s"]) - (last["time/eval_s"] - first["time/eval_s"])
    return {
        "wall": wall,
        "busy": (cpu_last - cpu_first) / ((t_last - t_first) * os.cpu_count()),
        "per_s": steps / outside_eval,
        "step_ms": 1000 * learner_s / steps,
        "paused": (last["time/paused_s"] - first["time/paused_s"]) / outside_eval,
        "frames": int(rows[-1]["frames"]),
        "window": (int(first["frames"]), int(last["frames"])),
        "return": rows[-1].get("eval/return", float("nan")),
        "violations": int(rows[-1]["audit/violations"]),  # every 100th batch and the whole buffer at the end
    }


def run_once(overrides: list[str], frames: int) -> dict[str, float]:
    """``python -m trajrl *overrides total_frames=frames`` alone on the machine: its closing metrics row,
    with the process's wall-clock as ``wall``."""
    from trajrl.report import runs

    with tempfile.TemporaryDirectory() as where:
        t0 = time.monotonic()
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "trajrl",
                *overrides,
                f"total_frames={frames}",
                "logger.plots=false",
                f"hydra.run.dir={where}/run",
            ],
            cwd=where,
            capture_output=True,
            text=True,
        )
        wall = time.monotonic() - t0
        if proc.returncode != 0:
            raise RuntimeError(proc.stderr[-2000:])
        return {**runs.read_metrics(os.path.join(where, "run", "metrics.csv"))[-1], "wall": wall}


def machine_cpu_s() -> float:
    """CPU seconds the whole machine has spent (user + system), from /proc/stat."""
    with open("/proc/stat") as f:
        user, nice, system = (int(x) for x in f.readline().split()[1:4])
    return (user + nice + system) / os.sysconf("SC_CLK_TCK")


#: How a run's collector workers start, each as a script run with ``python -c`` (``None``: ``python -m trajrl``).
START_METHODS = {
    # TorchRL's default: each worker a new interpreter that imports torch, TorchRL and trajrl
    "spawn": "import multiprocessing\n"
    "if __name__ == '__main__':\n"
    "    multiprocessing.set_start_method('spawn')\n"
    "    from trajrl.__main__ import main\n"
    "    main()\n",
    # forked from a fork server that is itself a new interpreter (importing them once more)
    "fork server, new interpreter": "from multiprocessing import forkserver\n"
    "import trajrl.__main__ as cli\n"
    "cli.start_fork_server = forkserver.ensure_running\n"
    "cli.main()\n",
    # the CLI as it is: forked from a fork server forked from the learner, which has imported them
    "fork server, forked from the learner": None,
}


def startup_cost(start_method: str, overrides: list[str]) -> tuple[float, float]:
    """``python -m trajrl`` with ``overrides``, its workers started as ``START_METHODS[start_method]``
    starts them: (wall s, CPU s of the whole machine meanwhile: the fork server and its workers are
    not the run's children in ``getrusage``)."""
    script = START_METHODS[start_method]
    command = [sys.executable, "-m", "trajrl"] if script is None else [sys.executable, "-c", script]
    with tempfile.TemporaryDirectory() as where:
        cpu, t0 = machine_cpu_s(), time.monotonic()
        proc = subprocess.run(
            [*command, *overrides, f"hydra.run.dir={where}/run"], cwd=where, capture_output=True, text=True
        )
        wall, cpu = time.monotonic() - t0, machine_cpu_s() - cpu
    if proc.returncode != 0:
        raise RuntimeError(proc.stderr[-2000:])
    return wall, cpu


def door_cost(width: int = 256, steps: int = 8, repeats: int = 50) -> tuple[float, float]:
    """Milliseconds the replay buffer's door (``WholeEpisodes``: episodes numbered, values checked
    finite, actions in range) takes on one write of ``width`` CartPole episodes of ``steps`` steps
    each, against ``rb.extend`` of the same batch into a buffer without it (median of ``repeats``)."""
    from tensordict import TensorDict
    from torchrl.data import LazyTensorStorage, TensorDictReplayBuffer

    from trajrl.replay.incoming import ActionRange, WholeEpisodes

    n = width * steps
    done = torch.zeros(n, 1, dtype=torch.bool)
    done[steps - 1 :: steps] = True
    batch = TensorDict(
        {
            "observation": torch.randn(n, 4),
            "action": torch.randint(0, 2, (n,)),
            "is_init": (torch.arange(n) % steps == 0).unsqueeze(-1),
            "step_count": (torch.arange(n) % steps).unsqueeze(-1),
            "episode_reward": torch.ones(n, 1),
            TRAJ_KEY: torch.arange(n) // steps,
            "next": {"observation": torch.randn(n, 4), "reward": torch.ones(n, 1), "done": done, "terminated": done},
        },
        [n],
    )
    door = WholeEpisodes(ActionRange((0.0,), (1.0,), True))
    plain = TensorDictReplayBuffer(storage=LazyTensorStorage(1_000_000))
    door_ms, write_ms = [], []
    for _ in range(repeats):
        t0 = time.perf_counter()
        door.inv(batch)
        t1 = time.perf_counter()
        plain.extend(batch)
        t2 = time.perf_counter()
        door_ms.append(1000 * (t1 - t0))
        write_ms.append(1000 * (t2 - t1))
    return float(np.median(door_ms)), float(np.median(write_ms))


def checks_cost(seconds: float, runs: int) -> None:
    """What checking every step costs collection: frames stored per second with
    ``collector.bad_steps=stop`` (the default: ``CheckedSteps`` on each environment) against
    ``unchecked``, alternated runs in this one process; and the buffer's door on one write."""
    print(
        f"# checked steps (collector.bad_steps=stop, the default) against unchecked, {ENV}, frames stored per second "
        f"({seconds:.0f} s each, median of {runs} alternated runs)"
    )
    print()
    print("| setting | unchecked | checked | checked / unchecked |")
    print("|---|---|---|---|")
    for setting in (SETTINGS[0], SETTINGS[3], SETTINGS[5]):
        rates: dict[str, list[float]] = {"unchecked": [], "stop": []}
        for _ in range(runs):
            for bad_steps in rates:
                rates[bad_steps].append(trajrl_pipeline(setting, seconds, bad_steps=bad_steps)[0])
        unchecked, checked = (float(np.median(rates[k])) for k in ("unchecked", "stop"))
        print(f"| {setting.label} | {unchecked:,.0f} | {checked:,.0f} | {checked / unchecked:.3f} |", flush=True)
    door, write = door_cost()
    print()
    print(
        f"the replay buffer's door on one write of 256 episodes x 8 steps: {door:.2f} ms, against "
        f"{write:.2f} ms for rb.extend of the same batch without it ({door / write:.2f}x)"
    )
    print()


#: The parts (--skip, --only).
PARTS = [
    "collection",
    "checks",
    "breakdown",
    "assembly",
    "memory",
    "fixed_frames",
    "loops",
    "startup",
    "sampling",
    "learners",
    "in_run",
    "deterministic",
]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=10.0, help="per collection measurement")
    parser.add_argument("--loop-frames", type=int, default=20_000, help="frames of each loop measurement")
    parser.add_argument(
        "--deterministic-frames", type=int, default=4_000, help="total_frames of the deterministic part's two runs"
    )
    parser.add_argument("--skip", nargs="*", default=[], choices=PARTS, help="parts left out")
    parser.add_argument("--only", nargs="*", choices=PARTS, help="the parts measured (the others left out)")
    parser.add_argument(
        "--in-run-frames",
        type=int,
        nargs=len(IN_RUN),
        default=[8_000, 8_000, 30_000, 10_000],
        help="total_frames of each in_run row, in order: the default run (recurrent SAC-discrete), the same with 16 "
        "slices a batch (as at c19e015), the recurrent DQN's, the recurrent SAC's on pendulum_novel",
    )
    parser.add_argument(
        "--rows-like",
        default="",
        help="learners and in_run parts: only the rows whose label holds this text (e.g. 'default run')",
    )
    parser.add_argument("--repeats", type=int, default=30, help="samples timed per sampling measurement")
    parser.add_argument("--updates", type=int, default=200, help="gradient steps timed per learner run")
    parser.add_argument(
        "--device",
        default="cpu",
        choices=["cpu", "cuda", "auto"],
        help="where the learners part trains (the device setting)",
    )
    parser.add_argument("--repeats-learner", type=int, default=5, help="alternated runs per learner measurement")
    args = parser.parse_args(argv)
    if args.only:
        args.skip = [part for part in PARTS if part not in args.only]
    if "in_run" not in args.skip:  # refused before anything is measured, not after the first row's minutes
        for (label, overrides), frames in zip(IN_RUN, args.in_run_frames):
            every = trajrl.compose(overrides).loop.log_every_frames
            if args.rows_like in label and frames < 4 * every:
                parser.error(
                    f"--in-run-frames {frames} for '{label}': in_run needs 4 metrics rows, one every "
                    f"loop.log_every_frames={every} frames; use {4 * every} or more"
                )
    torch.set_num_threads(1)
    logging.getLogger("torchrl").setLevel(logging.WARNING)
    os.environ.setdefault("RL_LOGGING_LEVEL", "WARNING")  # the worker processes' TorchRL too (as the CLI does)
    warnings.filterwarnings("ignore")  # TorchRL's notes on nested transforms and batch rounding

    storage = None
    if "collection" not in args.skip:
        print(
            f"# collection, {ENV}, the recurrent DQN's behaviour policy, frames stored per second "
            f"({args.seconds:.0f} s each); limit: gymnasium alone, random actions, per worker process"
        )
        print()
        print(
            "| setting | limit | hand-wired TorchRL | trajrl, env.stepping=torchrl | trajrl (lean) | lean / limit | "
            "lean / hand-wired | lean / torchrl stepping | runs | audit violations |"
        )
        print("|---|---|---|---|---|---|---|---|---|---|")
        limits: dict[int, float] = {}
        for setting in SETTINGS:
            if setting.width not in limits:
                limits[setting.width] = raw_limit(setting.width, args.seconds)
            limit = limits[setting.width] * setting.workers  # one core per worker
            rates: dict[str, list[float]] = {"hand": [], "torchrl": [], "lean": []}
            violations = 0
            for _ in range(setting.runs):  # alternated: a slow minute of the machine hits each way alike
                rates["hand"].append(hand_wired(setting, args.seconds))
                for stepping in ("torchrl", "lean"):
                    fps, bad, measured = trajrl_pipeline(setting, args.seconds, stepping)
                    rates[stepping].append(fps)
                    violations += bad
                    storage = storage or measured
            hand, torchrl_path, lean = (float(np.median(rates[k])) for k in ("hand", "torchrl", "lean"))
            print(
                f"| {setting.label} | {limit:,.0f} | {hand:,.0f} | {torchrl_path:,.0f} | {lean:,.0f} | "
                f"{lean / limit:.3f} | {lean / hand:.2f} | {lean / torchrl_path:.2f} | {setting.runs} | {violations} |",
                flush=True,
            )
        print()
        print(
            f"# stored bytes per frame (trajrl's buffer, the default recurrent DQN): {storage['stored']:.0f} "
            f"in {storage['fields']} fields"
        )
        print(
            f"against the environment's payload {storage['env']:.0f}: {storage['stored'] / storage['env']:.2f}x; "
            f"against that plus the stored recurrent state {storage['learner']:.0f}: "
            f"{storage['stored'] / storage['learner']:.3f}x"
        )
        print(f"the rest, bytes per frame: {storage['extra']}")
        print()
    if "checks" not in args.skip:
        checks_cost(args.seconds, 3)
    if "breakdown" not in args.skip:
        print("# one vector step of 256 environments in trajrl's sync collector, ms (median of 5 alternated timings)")
        print()
        print("| part | ms per vector step |")
        print("|---|---|")
        for name, ms in step_breakdown(256, 200).items():
            print(f"| {name} | {ms:.2f} |", flush=True)
        print()
    if "assembly" not in args.skip:
        print(
            "# complete-episode assembly, rollouts of 256 environments x 8 steps whose episodes last the given "
            "steps (staggered), ms per rollout (median): TorchRL's, as its collectors assemble them, against trajrl's"
        )
        print()
        print("| episode length | steps under way | TorchRL | trajrl | trajrl / TorchRL |")
        print("|---|---|---|---|---|")
        for row in assembly_cost((16, 64, 256, 512)):
            print(
                f"| {row['length']} | {row['under way']:,} | {row['torchrl']:.2f} | {row['trajrl']:.2f} | "
                f"{row['trajrl'] / row['torchrl']:.2f} |",
                flush=True,
            )
        print()
    if "memory" not in args.skip:
        print(
            "# stored bytes per frame, the default recurrent DQN (CartPole without velocities, LSTM 64), "
            "20,000 frames written; payload: what the environment gives a step"
        )
        print()
        print(
            "| recurrent state kept | bytes/frame | of which the state | payload | stored / payload | "
            "audit violations |"
        )
        print("|---|---|---|---|---|---|")
        for every in (None, 10, "auto"):
            b = stored_bytes(every)
            label = (
                "every step (sampler.state_every=null)"
                if every is None
                else "every 30 steps (sampler.state_every=auto, the default: slice_len - burn_in)"
                if every == "auto"
                else f"every {every} steps (sampler.state_every={every})"
            )
            print(
                f"| {label} | {b['stored']:.0f} | {b['state']:.0f} | {b['env']:.0f} | {b['stored'] / b['env']:.2f}x | "
                f"{b['violations']} |",
                flush=True,
            )
        print()
    if "fixed_frames" not in args.skip:
        print(
            f"# complete episodes (trajs_per_batch=4, async_batched 1; flat storage) against fixed frames "
            f"(trajs_per_batch=null, lanes), {args.seconds:.0f} s each; delay: from a step happening to it being "
            "sampleable, ms; sampling: 32 slices of 32 steps from what was stored, ms"
        )
        print()
        print(
            "| setting | batches | storage.ndim | frames/s stored | delay p50 | delay p99 | bytes/frame | "
            "frames held | ms per sample | fixed / complete frames/s | fixed / complete delay p50 |"
        )
        print("|---|---|---|---|---|---|---|---|---|---|---|")
        for label, collector, workers, width in LAYOUTS:
            rows = {fixed: delays_and_rates(collector, workers, width, fixed, args.seconds) for fixed in (False, True)}
            for fixed, r in rows.items():
                ratios = (
                    f"{r['fps'] / rows[False]['fps']:.2f} | {r['p50'] / rows[False]['p50']:.3f}" if fixed else "1 | 1"
                )
                print(
                    f"| {label} | {'fixed frames' if fixed else 'complete episodes'} | {r['ndim']} | "
                    f"{r['fps']:,.0f} | {r['p50']:,.0f} | {r['p99']:,.0f} | {r['bytes']:.0f} | {r['stored']:,} | "
                    f"{r['sample_ms']:.1f} | {ratios} |",
                    flush=True,
                )
        print()
    if "loops" not in args.skip:
        print(
            f"# the asynchronous loop against a synchronous one, {args.loop_frames:,} frames, the default recurrent "
            f"DQN (updates_per_frame 0.25), wall-clock s"
        )
        print()
        print("| collection | frames | updates | synchronous loop | trajrl async loop | async / sync |")
        print("|---|---|---|---|---|---|")
        for collector, workers, label in (
            ("async", 1, "1 env, collector=async"),
            ("multi_async", 2, "2 workers x 1 env, multi_async"),
        ):
            async_s, sync_s, frames, updates = loops(collector, workers, args.loop_frames)
            print(
                f"| {label} | {frames:,} | {updates:,} | {sync_s:.1f} | {async_s:.1f} | {async_s / sync_s:.2f} |",
                flush=True,
            )
        print()
    if "startup" not in args.skip:
        overrides = ["debug=smoke", "collector=multi_sync"]
        print(
            f"# a run's start-up and end: `python -m trajrl {' '.join(overrides)}` (2 worker processes, "
            f"{trajrl.compose(overrides).total_frames:,} frames), workers spawned (TorchRL's default) or forked from "
            "a fork server started as a new interpreter or forked from the learner (the CLI's), the median of 3 "
            "alternated runs; CPU: the whole machine's meanwhile, alone on it"
        )
        print()
        print("| workers started by | wall s | CPU s | CPU / spawn |")
        print("|---|---|---|---|")
        costs = {method: [] for method in START_METHODS}
        for _ in range(3):
            for method in costs:
                costs[method].append(startup_cost(method, overrides))
        spawn_cpu = float(np.median([cpu for _, cpu in costs["spawn"]]))
        for method, runs in costs.items():
            wall, cpu = float(np.median([w for w, _ in runs])), float(np.median([c for _, c in runs]))
            print(f"| {method} | {wall:.1f} | {cpu:.1f} | {cpu / spawn_cpu:.2f} |", flush=True)
        print()
    if "learners" not in args.skip:
        print(
            f"# learners alone, one thread, at each preset's batch shape: gradient steps per second "
            f"(sampling included; PPO: its collected episodes, no sampling), the median of {args.repeats_learner} "
            f"alternated runs of {args.updates} steps with torch's plain Adam step and with the fused one; "
            f"recurrent kernels: their share of the CPU time in a profile; torch ops: the aten operators an update "
            f"calls (nested calls counted, sampling apart); device={args.device}"
        )
        print()
        print(
            "| algorithm (preset) | batch | plain Adam steps/s | trajrl steps/s | frames learnt/s | ms sampling | "
            "ms updating | LSTM/GRU kernels | torch ops an update | trajrl / plain |"
        )
        print("|---|---|---|---|---|---|---|---|---|---|")
        for label, preset, overrides in (row for row in LEARNERS if args.rows_like in row[0]):
            result = learner_speed(preset, args.updates, args.repeats_learner, args.device, overrides)
            what = preset or " ".join(overrides) or "python -m trajrl"
            slow, fast = result["plain"], result["fused"]
            print(
                f"| {label} ({what}) | {result['shape']} | {slow['per_s']:.0f} | {fast['per_s']:.0f} | "
                f"{fast['frames_per_s']:.0f} | {fast['sample_ms']:.2f} | {fast['update_ms']:.2f} | "
                f"{result['recurrent']:.0%} | {result['ops']:,.0f} | "
                f"{fast['per_s'] / slow['per_s']:.2f} |",
                flush=True,
            )
            if result["compile_s"] is not None:
                compiled = result["compiled"]
                print(
                    f"| {label}, networks under torch.compile ({result['compile_s']:.0f} s to compile) | "
                    f"{result['shape']} | | {compiled['per_s']:.0f} | {compiled['frames_per_s']:.0f} | "
                    f"{compiled['sample_ms']:.2f} | "
                    f"{compiled['update_ms']:.2f} | | | {compiled['per_s'] / slow['per_s']:.2f} |",
                    flush=True,
                )
        print()
    if "in_run" not in args.skip:
        print(
            f"# the learner inside a run against the learner alone: each off-policy algorithm's default run "
            f"(`python -m trajrl <overrides> total_frames=<frames>`), alone on the machine; busy: the machine's CPU "
            f"over all {os.cpu_count()} cores between the run's second metrics row and its last before the closing "
            f"one; steps/s: the learner's gradient steps a second there (evaluations left out); alone: the same "
            f"learner at the same batch shape on one thread, sampling "
            f"included (median of {args.repeats_learner} "
            f"runs of {args.updates} steps, measured before and after the runs: the mean); each run with "
            f"collector.worker_niceness=0 (workers at the learner's priority) and 10 (the default)"
        )
        print()
        print(
            "| run | frames | window (frames) | wall s | wall / niceness 0 | machine busy | paused | "
            "steps/s in the run | steps/s alone | in run / alone | ms a step in the run | ms a step alone | "
            "final eval | audit violations |"
        )
        print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
        for (label, overrides), frames in zip(IN_RUN, args.in_run_frames):
            if args.rows_like not in label:
                continue
            # alone before and after the runs (this machine's speed drifts by a fifth within minutes): the mean
            before = learner_speed(None, args.updates, args.repeats_learner, overrides=overrides)["fused"]
            insides = {
                niceness: in_run([*overrides, f"collector.worker_niceness={niceness}"], frames)
                for niceness in (0, 10)  # the speed-up off, then on (the default)
            }
            after = learner_speed(None, args.updates, args.repeats_learner, overrides=overrides)["fused"]
            alone = {k: (before[k] + after[k]) / 2 for k in ("per_s", "sample_ms", "update_ms")}
            alone_ms = alone["sample_ms"] + alone["update_ms"]
            walls = {niceness: inside["wall"] for niceness, inside in insides.items()}
            for niceness, inside in insides.items():
                print(
                    f"| {label}, collector.worker_niceness={niceness} | {inside['frames']:,} | "
                    f"{inside['window'][0]:,}-{inside['window'][1]:,} | {inside['wall']:.0f} | "
                    f"{walls[niceness] / walls[0]:.2f} | {inside['busy']:.0%} | {inside['paused']:.0%} | "
                    f"{inside['per_s']:.0f} | {alone['per_s']:.0f} | {inside['per_s'] / alone['per_s']:.2f} | "
                    f"{inside['step_ms']:.2f} | {alone_ms:.2f} | {inside['return']:.1f} | {inside['violations']} |",
                    flush=True,
                )
            print(f"<!-- {label}: alone {before['per_s']:.0f} steps/s before the runs, {after['per_s']:.0f} after -->")
        print()
    if "deterministic" not in args.skip:
        frames = args.deterministic_frames
        print(
            f"# what deterministic=true costs: the default run (`python -m trajrl total_frames={frames}`) beside "
            f"the same with deterministic=true (collection and learning in turn, collector=sync over the default's "
            f"environments), alone on the machine, one after the other; frames/s and updates/s over the whole run "
            f"(evaluations included), wall: the process's"
        )
        print()
        print("| run | frames | wall s | frames/s | updates | updates/s | final eval | frames/s / default's |")
        print("|---|---|---|---|---|---|---|---|")
        base = None
        for label, overrides in (
            ("the default run", []),
            ("the default run, deterministic=true", ["deterministic=true"]),
        ):
            row = run_once(overrides, frames)
            base = base or row["time/frames_per_s"]
            print(
                f"| {label} | {int(row['frames']):,} | {row['wall']:.0f} | {row['time/frames_per_s']:.0f} | "
                f"{int(row['train/updates']):,} | {row['train/updates'] / row['time/elapsed_s']:.0f} | "
                f"{row.get('eval/return', float('nan')):.1f} | {row['time/frames_per_s'] / base:.2f} |",
                flush=True,
            )
        print()
    if "sampling" in args.skip:
        return
    print("# sampling 256 slices of 32 from a 1,000,000-frame buffer, ms per sample")
    print()
    print("| sampler | no writes | while writing | vs TorchRL (while writing) |")
    print("|---|---|---|---|")
    results = {
        kind: (sampling_latency(kind, False, args.repeats), sampling_latency(kind, True, args.repeats))
        for kind in ("torchrl", "trajrl")
    }
    for kind, label in (("torchrl", "TorchRL SliceSampler"), ("trajrl", "trajrl StepSliceSampler")):
        quiet, busy = results[kind]
        print(f"| {label} | {quiet:.1f} | {busy:.1f} | {busy / results['torchrl'][1]:.2f} |")


if __name__ == "__main__":
    main()
