"""The collector's environments: a picklable factory that makes one TorchRL environment
(or a vector of them) with episode bookkeeping, and what workers need to end with the learner."""

from __future__ import annotations

import functools
import multiprocessing
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from tensordict import TensorDictBase
from torchrl.data import Composite, Unbounded
from torchrl.envs import Compose, EnvBase, GymWrapper, InitTracker, RewardSum, StepCounter, TransformedEnv
from torchrl.envs.libs.gym import default_info_dict_reader
from torchrl.envs.transforms import Transform

from trajrl.base.keys import WORKER_KEY
from trajrl.base.signals import stacks_on_sigusr1
from trajrl.collect.counters import CountSteps, WorkerCounters, parent_alive
from trajrl.collect.faults import FaultLog, RestartOnError, read_faults
from trajrl.collect.lean import LeanEnv
from trajrl.envs.env_check import CheckedSteps
from trajrl.envs.gym_envs import gym_options, make_gym, make_vector, stepping

_became_a_worker = False


def become_a_worker(poll_s: float = 0.5, niceness: int = 0) -> None:
    """What a process that multiprocessing started (a collector's worker) does once: it
    exits once its parent is gone (``trajrl.collect.counters.parent_alive``: the learner
    killed while it holds the shared buffer's write lock never releases it, and a worker
    waiting on it would otherwise wait forever); it adds ``niceness`` to its own
    (``os.nice``, ``collector.worker_niceness``: where workers and the learner want more
    cores than there are, the learner keeps its own); and it prints its stacks on SIGUSR1,
    as the learner does. Does nothing in a process not started by multiprocessing; starts
    one thread at most."""
    global _became_a_worker
    if _became_a_worker or multiprocessing.parent_process() is None:
        return
    _became_a_worker = True
    if niceness:
        os.nice(niceness)
    stacks_on_sigusr1()
    alive = parent_alive()

    def watch() -> None:
        while alive():
            time.sleep(poll_s)
        os._exit(1)

    threading.Thread(target=watch, name="trajrl-exit-with-parent", daemon=True).start()


def make_env(
    env_id: str,
    kwargs: dict[str, Any],
    import_module: str | None = None,
    primer=None,
    counts: torch.Tensor | None = None,
    slot: int = 0,
    num_envs: int = 1,
    vectorization: str = "sync",
    gate: torch.Tensor | None = None,
    wrap: Callable[[gym.Env], gym.Env] | None = None,
    restarts: Restarts | None = None,
    fixed_frames: bool = False,
    stamp_slot: bool = False,
    success: bool = False,
    lean: bool = False,
    previous_action: bool = False,
    previous_reward: bool = False,
    reward_scale: float = 1.0,
    time_scales: tuple[float, ...] = (),
    niceness: int = 0,
) -> EnvBase:
    """One environment, or a vector of ``num_envs`` (batch size ``[num_envs]``), with
    episode bookkeeping (and the recurrent-state primer, if given).

    ``InitTracker`` marks each episode's first step (``is_init``), which resets
    a recurrent policy's state; ``StepCounter`` and ``RewardSum`` give each step
    its position and the running return, so episode statistics can be read from
    stored steps. All three keep one entry per environment of a vector. ``wrap``: a
    gymnasium wrapper around one environment (``trajrl evaluate --video`` records with it).
    ``restarts``: each environment is rebuilt when its step raises (``trajrl.collect.faults``).
    ``fixed_frames``: the collector hands over fixed-frame batches (``trajs_per_batch=null``): every
    step carries ``slot`` (the storage writes it in that worker's lanes), and the steps of an
    episode a fault cut are stored, not lost (``trajrl.replay.lanes``). ``stamp_slot``: every
    step carries ``slot`` (a policy that explores per environment reads it: ``algo.eps_spread``).
    ``success``: each step carries ``is_success`` from the environment's info (goal
    environments say whether the goal is reached; 0 where one does not say).
    ``lean``: the stack is stepped by ``LeanEnv`` (``env.stepping=lean``: the same steps, in bulk).
    ``previous_action``, ``previous_reward``, the episode's time at ``time_scales``: observed as well
    (``env.previous_action``, ``env.observe_time``: ``make_gym``); ``reward_scale``: every reward
    multiplied by it (``env.reward_scale``).
    ``niceness``: a collector's environment in a worker process lowers the worker's priority by it.
    """
    make = functools.partial(
        make_gym, env_id, dict(kwargs), import_module, previous_action, previous_reward, reward_scale, time_scales
    )
    if restarts is not None:  # a collector's: every step checked (CheckedSteps), rebuilt when it raises
        make = functools.partial(restarts.wrap, make, slot, env_id)
    if num_envs > 1:
        env = GymWrapper(make_vector(make, num_envs, vectorization), categorical_action_encoding=True)
    else:
        env = GymWrapper(wrap(make()) if wrap is not None else make(), categorical_action_encoding=True)
        if success:
            env.set_info_dict_reader(ReadSuccess())
    if restarts is not None:
        read_faults(env, env.batch_size)
    transforms = [InitTracker(), StepCounter(), RewardSum()]
    if primer is not None:
        transforms.append(primer.clone())
    if fixed_frames or stamp_slot:
        transforms.append(StampWorker(slot))
    count = None
    if counts is not None:  # a collector's environment: in a worker process, it ends with the learner
        become_a_worker(niceness=niceness)
        count = CountSteps(counts, slot, gate, faulted_stored=fixed_frames)
        transforms.append(count)
    if isinstance(env, TransformedEnv):  # a vector env comes with TorchRL's autoreset transform
        env.append_transform(Compose(*transforms))
    else:
        env = TransformedEnv(env, Compose(*transforms))
    if lean:
        return LeanEnv(
            env,
            count=count,
            slot=slot if fixed_frames or stamp_slot else None,
            primer_keys=list(primer.primers.keys()) if primer is not None else [],
        )
    return env


@dataclass(frozen=True)
class Restarts:
    """How a collector's environments are restarted when they raise (picklable)."""

    max_restarts: int
    window_s: float
    fault_log: str | None = None  # where each restart is reported (``FaultLog``)
    bad_steps: str = "stop"  # ``collector.bad_steps``: what a step that misbehaves does (``CheckedSteps``)

    def wrap(self, make: Callable[[], gym.Env], slot: int, env_id: str) -> gym.Env:
        """``make()``'s environment (``env_id``) in collector ``slot``: its steps checked unless
        ``unchecked``, rebuilt when it raises."""
        report = FaultLog(self.fault_log).reporter(slot) if self.fault_log else None
        if self.bad_steps != "unchecked":
            make = functools.partial(checked, make, env_id)
        return RestartOnError(make, self.max_restarts, self.window_s, report, self.bad_steps == "drop")


def checked(make: Callable[[], gym.Env], env_id: str) -> gym.Env:
    """``make()``'s environment with its every step checked (``CheckedSteps``)."""
    return CheckedSteps(make(), env_id)


class ReadSuccess(default_info_dict_reader):
    """``info["is_success"]`` as ``is_success`` (a float), whatever number type the
    environment gives it as; 0 where it gives none."""

    def __init__(self):
        super().__init__(["is_success"], spec={"is_success": Unbounded(shape=(), dtype=torch.float32)})

    def __call__(self, info_dict, tensordict: TensorDictBase) -> TensorDictBase:
        if isinstance(info_dict, dict):
            info_dict = {"is_success": np.float32(info_dict.get("is_success", 0.0))}
        return super().__call__(info_dict, tensordict)


class StampWorker(Transform):
    """Every step carries the collector slot of the worker that took it (``WORKER_KEY``)."""

    def __init__(self, slot: int):
        super().__init__()
        self.slot = slot

    def _stamp(self, tensordict: TensorDictBase) -> TensorDictBase:
        return tensordict.set(WORKER_KEY, torch.full(tensordict.batch_size, self.slot, dtype=torch.int64))

    def _reset(self, tensordict: TensorDictBase, tensordict_reset: TensorDictBase) -> TensorDictBase:
        return self._stamp(tensordict_reset)

    def _step(self, tensordict: TensorDictBase, next_tensordict: TensorDictBase) -> TensorDictBase:
        return self._stamp(next_tensordict)

    def transform_observation_spec(self, observation_spec: Composite) -> Composite:
        observation_spec[WORKER_KEY] = Unbounded(shape=observation_spec.shape, dtype=torch.int64)
        return observation_spec


def env_factory(
    env_cfg,
    primer=None,
    counters: WorkerCounters | None = None,
    num_envs: int | None = None,
    restarts: Restarts | None = None,
    fixed_frames: bool = False,
    stamp_slot: bool = False,
    success: bool = False,
    stepping: str = "torchrl",
    vectorization: str | None = None,
    niceness: int = 0,
) -> Callable[..., EnvBase]:
    """A picklable environment factory (it crosses into worker processes), making
    ``env_cfg.num_envs`` environments at once unless ``num_envs`` says otherwise.

    With ``counters``, call it with ``slot=<index of the collector's environment>``.
    ``restarts``: how environments that raise are rebuilt (a collector's).
    ``fixed_frames``: for a collector that hands over fixed-frame batches; ``stamp_slot``: each
    step carries its collector slot (``make_env``); ``success``: the
    steps carry ``is_success`` (``make_env``). ``stepping``: ``lean`` (``LeanEnv``) or ``torchrl``,
    as ``env.stepping`` says for a collector's environments (evaluation's are lean, in one
    process: ``vectorization="sync"``); ``vectorization``: ``env_cfg.vectorization`` unless given.
    ``niceness``: what a collector's worker process adds to its niceness (``collector.worker_niceness``).
    """
    return functools.partial(
        make_env,
        str(env_cfg.id),
        dict(env_cfg.kwargs or {}),
        env_cfg.import_module,
        primer,
        counters.counts if counters is not None else None,
        num_envs=int(num_envs if num_envs is not None else env_cfg.get("num_envs", 1)),
        vectorization=vectorization or str(env_cfg.get("vectorization", "sync")),
        gate=counters.gate if counters is not None else None,
        restarts=restarts,
        fixed_frames=fixed_frames,
        stamp_slot=stamp_slot,
        success=success,
        lean=stepping == "lean",
        niceness=niceness,
        **gym_options(env_cfg),
    )


def eval_env_factory(env_cfg, primer=None, success: bool = False) -> Callable[..., EnvBase]:
    """The environment evaluation plays (``Evaluator``): uncounted, stepped by the lean path in
    this process (a ``sync`` vector), ``num_envs=n`` environments side by side (1 unless given)."""
    return env_factory(env_cfg, primer=primer, num_envs=1, success=success, stepping="lean", vectorization="sync")


def observation_stats(
    env_cfg, steps: int, seed: int, step_timeout_s: float | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Mean and std of observations under a uniformly random policy (fixed for the run);
    an environment call that takes longer than ``step_timeout_s`` fails."""
    env = make_gym(env_cfg.id, dict(env_cfg.kwargs or {}), env_cfg.get("import_module"), **gym_options(env_cfg))
    env.action_space.seed(seed)
    doing = f"trajrl measured its observations ({steps:,} random steps for algo.normalize_observations=true)"
    try:
        with stepping(env_cfg.id, doing, step_timeout_s):
            observations = [env.reset(seed=seed)[0]]
        for _ in range(steps):
            with stepping(env_cfg.id, doing, step_timeout_s):
                obs, _, terminated, truncated, _ = env.step(env.action_space.sample())
                observations.append(env.reset()[0] if terminated or truncated else obs)
    finally:
        env.close()
    stacked = torch.as_tensor(np.stack(observations), dtype=torch.float)
    return stacked.mean(0), stacked.std(0).clamp_min(1e-3)
