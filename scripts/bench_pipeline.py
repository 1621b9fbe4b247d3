"""Pipeline benchmark: collection speed against the environment's own limit and against
hand-wired TorchRL, slice sampling against TorchRL's SliceSampler, and stored bytes
per frame, all measured in one run on this machine.

    python scripts/bench_pipeline.py                  # every measurement, 10 s each
    python scripts/bench_pipeline.py --seconds 5 --skip-sampling

Collection (CartPole-v1, the recurrent DQN's behaviour policy, 200-frame rollouts,
complete episodes written 4 at a time):

- limit: raw gymnasium stepping with a random policy, one environment and vector
  environments of 16, 64 and 256 (``SyncVectorEnv``);
- hand-wired TorchRL: the code a user writes today, a collector over the same
  environment (``GymEnv`` with ``InitTracker``, ``StepCounter``, ``RewardSum`` and
  the recurrent-state primer) and the same policy, iterated, each batch
  ``rb.extend``-ed into a ``LazyTensorStorage`` buffer;
- trajrl: the pipeline ``trajrl.build`` makes from the config, started into its buffer.

Prints frames/s and the ratios trajrl / limit and trajrl / hand-wired, then the
sampling latencies and the bytes per frame.
"""
from __future__ import annotations

import argparse
import threading
import time

import gymnasium as gym
import numpy as np
import torch

import trajrl
from trajrl.data.episodes import TRAJ_KEY

ENV = "CartPole-v1"
OVERRIDES = ["env=cartpole", "trajs_per_batch=4", "collector.frames_per_batch=200", "storage.capacity=200000",
             "loop.warmup_frames=0"]


def raw_limit(width: int, seconds: float) -> float:
    """Frames/s of gymnasium alone, random actions, ``width`` environments side by side."""
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
    envs = gym.vector.SyncVectorEnv([lambda: gym.make(ENV)] * width)
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


def hand_wired(collector_kind: str, seconds: float) -> float:
    """A TorchRL collector iterated by hand, each batch extended into a plain buffer."""
    from torchrl.collectors import Collector, MultiAsyncCollector
    from torchrl.data import LazyTensorStorage, TensorDictReplayBuffer
    from torchrl.envs import Compose, GymEnv, InitTracker, RewardSum, StepCounter, TransformedEnv

    cfg = trajrl.compose([f"collector={collector_kind}", *OVERRIDES])
    with trajrl.build(cfg) as pipe:  # only for the same policy (and its recurrent-state primer)
        policy, primer = pipe.policy, pipe.env_fn.args[3]

    def make_env():
        return TransformedEnv(GymEnv(ENV, categorical_action_encoding=True),
                              Compose(InitTracker(), StepCounter(), RewardSum(), primer.clone()))

    buffer = TensorDictReplayBuffer(storage=LazyTensorStorage(200_000))
    common = dict(frames_per_batch=200, total_frames=-1, trajs_per_batch=4, traj_format="cat")
    if collector_kind == "sync":
        collector = Collector(make_env, policy, **common)
    else:
        collector = MultiAsyncCollector([make_env] * 2, policy, num_threads=1, **common)
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


def trajrl_pipeline(collector_kind: str, seconds: float) -> tuple[float, dict]:
    """trajrl's pipeline from the config, started into its buffer; also its bytes per frame."""
    cfg = trajrl.compose([f"collector={collector_kind}", *OVERRIDES])
    with trajrl.build(cfg) as pipe:
        pipe.collector.start()
        try:
            fps = stored_per_second(pipe.buffer, seconds)
        finally:
            pipe.collector.async_shutdown()
        return fps, bytes_per_frame(pipe.buffer)


def bytes_per_frame(buffer) -> dict:
    """Bytes the storage holds per frame, against the payload (observation, action,
    reward, done flags) of one frame."""
    stored = buffer.storage[: len(buffer)]
    frames = stored.numel()
    total = sum(t.element_size() * t.numel() for t in stored.values(include_nested=True, leaves_only=True))
    payload_keys = ["observation", "action", ("next", "reward"), ("next", "done"), ("next", "terminated"),
                    ("next", "truncated"), ("next", "observation")]
    payload = sum(stored.get(k).element_size() * stored.get(k).numel() for k in payload_keys)
    return {"stored_bytes_per_frame": total / frames, "payload_bytes_per_frame": payload / frames,
            "fields": len(list(stored.keys(include_nested=True, leaves_only=True)))}


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
    return TensorDict({"observation": torch.randn(frames, 4), "is_init": is_init, TRAJ_KEY: ids,
                       ("next", "done"): done}, batch_size=[frames]), first_id + len(lengths)


def sampling_latency(kind: str, writes: bool, repeats: int) -> float:
    """Milliseconds per sample of 256 slices of 32 steps from a 1,000,000-frame buffer."""
    from torchrl.data import LazyTensorStorage, TensorDictReplayBuffer
    from torchrl.data.replay_buffers.samplers import SliceSampler

    from trajrl.data.slices import StepSliceSampler

    capacity, rng = 1_000_000, np.random.default_rng(0)
    sampler = (SliceSampler(slice_len=32, traj_key=TRAJ_KEY, strict_length=False) if kind == "torchrl"
               else StepSliceSampler(capacity, 32))
    buffer = TensorDictReplayBuffer(storage=LazyTensorStorage(capacity), sampler=sampler, batch_size=256 * 32)
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


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=10.0, help="per collection measurement")
    parser.add_argument("--skip-sampling", action="store_true")
    parser.add_argument("--repeats", type=int, default=30, help="samples timed per sampling measurement")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)

    print(f"# collection, {ENV}, frames stored per second ({args.seconds:.0f} s each)")
    limits = {w: raw_limit(w, args.seconds) for w in (1, 16, 64, 256)}
    for width, fps in limits.items():
        print(f"limit (raw gymnasium, random actions), {width:>3} env{'s' if width > 1 else ' '}  {fps:>10,.0f}")
    print("vector widths 16/64/256 through trajrl: not measured (env.num_envs is not built yet)")
    print()
    print("| setting | limit | hand-wired TorchRL | trajrl | trajrl / limit | trajrl / hand-wired |")
    print("|---|---|---|---|---|---|")
    storage = None
    for kind, label in (("sync", "1 env, collector=sync"), ("multi_async", "2 workers, collector=multi_async")):
        baseline = hand_wired(kind, args.seconds)
        fps, storage = trajrl_pipeline(kind, args.seconds)
        limit = limits[1] * (2 if kind == "multi_async" else 1)  # two workers: twice one environment
        print(f"| {label} | {limit:,.0f} | {baseline:,.0f} | {fps:,.0f} | {fps / limit:.3f} | {fps / baseline:.2f} |",
              flush=True)
    print()
    print(f"# stored bytes per frame (trajrl's buffer, the default recurrent DQN): {storage['stored_bytes_per_frame']:.0f} "
          f"in {storage['fields']} fields, payload {storage['payload_bytes_per_frame']:.0f} "
          f"(ratio {storage['stored_bytes_per_frame'] / storage['payload_bytes_per_frame']:.2f})")
    if args.skip_sampling:
        return
    print()
    print("# sampling 256 slices of 32 from a 1,000,000-frame buffer, ms per sample")
    print("| sampler | no writes | while writing | vs TorchRL (while writing) |")
    print("|---|---|---|---|")
    results = {kind: (sampling_latency(kind, False, args.repeats), sampling_latency(kind, True, args.repeats))
               for kind in ("torchrl", "trajrl")}
    for kind, label in (("torchrl", "TorchRL SliceSampler"), ("trajrl", "trajrl StepSliceSampler")):
        quiet, busy = results[kind]
        print(f"| {label} | {quiet:.1f} | {busy:.1f} | {busy / results['torchrl'][1]:.2f} |")


if __name__ == "__main__":
    main()
