"""Environment factory: a picklable function that makes one TorchRL environment."""
from __future__ import annotations

import functools
import multiprocessing
import os
import tempfile
import threading
import time
from typing import Any, Callable

import gymnasium as gym
import numpy as np
import torch
from tensordict import MemoryMappedTensor, TensorDictBase
from torchrl.envs import Compose, EnvBase, GymEnv, GymWrapper, InitTracker, RewardSum, StepCounter, TransformedEnv
from torchrl.envs.transforms import Transform

from trajrl.envs import import_env_module, make_vector, stepping


class WorkerCounters:
    """What the collector's environments did, wherever they run: per slot (one
    collector environment, or a vector of them summed), frames stepped, episodes
    ended, the summed return of the ended ones, the episodes under way
    (begun = ended + under way), and the actions that were not the greedy one
    (a Q-learning policy's exploration, where it writes ``action_value``).

    Each environment writes its own running totals into its row of one
    memory-mapped tensor (writes, not increments, so processes never race).
    Memory-mapped because it must stay shared however the collector ships the
    environment factory to its workers (a ``share_memory_()`` tensor arrived in
    them as a copy). Against what was stored it closes the accounting: at the end
    the difference is what was still in flight.
    """

    FRAMES, ENDED, RETURN_SUM, UNDER_WAY, NOT_GREEDY = range(5)

    def __init__(self, slots: int):
        self._dir = tempfile.TemporaryDirectory(prefix="trajrl-counters-")
        self.counts = MemoryMappedTensor.from_tensor(
            torch.zeros(slots, 5, dtype=torch.float64), filename=f"{self._dir.name}/counters.memmap"
        )
        # The gate: while it is closed (1), every environment waits before its next step.
        self.gate = MemoryMappedTensor.from_tensor(torch.zeros(1, dtype=torch.int8),
                                                   filename=f"{self._dir.name}/gate.memmap")

    def close_gate(self) -> None:
        """Hold every environment at its next step (takes effect within one step; no
        message to the workers, nothing to wait for)."""
        self.gate[0] = 1

    def open_gate(self) -> None:
        self.gate[0] = 0

    @property
    def frames(self) -> int:
        """Frames stepped by all the environments."""
        return int(self.counts[:, self.FRAMES].sum())

    def snapshot(self) -> torch.Tensor:
        """A copy of the ``[slots, columns]`` totals (the column names above)."""
        return self.counts.clone()


_exit_with_parent_started = False


def exit_with_parent(poll_s: float = 0.5) -> None:
    """In a process that multiprocessing started (a collector's worker): exit once its
    parent is gone. The learner killed while it holds the shared buffer's write lock
    never releases it, and a worker waiting on it would otherwise wait forever.
    Does nothing in a process not started by multiprocessing; starts one thread at most."""
    global _exit_with_parent_started
    if _exit_with_parent_started or multiprocessing.parent_process() is None:
        return
    _exit_with_parent_started = True
    parent = os.getppid()

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(poll_s)
        os._exit(1)

    threading.Thread(target=watch, name="trajrl-exit-with-parent", daemon=True).start()


class CountSteps(Transform):
    """Writes this collector slot's running totals into ``counts[slot]`` (see
    ``WorkerCounters``), summed over the environments of a vector: the frame count
    at every step, the rest only where an episode ends (this runs on every step).
    While the gate is closed it waits before handing the step back, unless the
    process that made the gate has died (then nobody would open it)."""

    def __init__(self, counts: torch.Tensor, slot: int, gate: torch.Tensor | None = None):
        super().__init__()
        self.counts, self.slot, self.gate = counts, slot, gate
        self.frames, self.ended, self.return_sum, self.under_way, self.not_greedy = 0, 0, 0.0, 0, 0
        self._parent: int | None = None
        self._row = self._gate = None

    def __getstate__(self) -> dict:
        """A copy pickled into a worker makes its own views of the shared files."""
        return {**super().__getstate__(), "_row": None, "_gate": None}

    def _wait_at_gate(self) -> None:
        if self._parent is None:
            self._parent = os.getppid()
        while self._gate[0] and os.getppid() == self._parent:
            time.sleep(0.001)

    def _step(self, tensordict: TensorDictBase, next_tensordict: TensorDictBase) -> TensorDictBase:
        if self._row is None:  # numpy views of the shared files, made where the environment runs
            self._row = self.counts.numpy()[self.slot]
            self._gate = self.gate.numpy() if self.gate is not None else np.zeros(1, dtype=np.int8)
        if self._gate[0]:
            self._wait_at_gate()
        row = self._row
        width = max(1, next_tensordict.numel())
        self.frames += width
        row[WorkerCounters.FRAMES] = self.frames
        done = next_tensordict.get("done")
        ended = int(done.sum()) if width > 1 else int(done.item())
        if ended:
            self.ended += ended
            self.return_sum += float(next_tensordict.get("episode_reward")[done].sum())
            row[WorkerCounters.ENDED], row[WorkerCounters.RETURN_SUM] = self.ended, self.return_sum
        if width - ended != self.under_way:  # episodes with at least one step and no end yet
            self.under_way = width - ended
            row[WorkerCounters.UNDER_WAY] = self.under_way
        values = tensordict.get("action_value", None)
        if values is not None:
            not_greedy = values.argmax(-1) != tensordict.get("action").reshape(values.shape[:-1])
            if not_greedy.any():
                self.not_greedy += int(not_greedy.sum())
                row[WorkerCounters.NOT_GREEDY] = self.not_greedy
        return next_tensordict


def make_env(env_id: str, kwargs: dict[str, Any], import_module: str | None = None, primer=None,
             counts: torch.Tensor | None = None, slot: int = 0, num_envs: int = 1,
             vectorization: str = "sync", gate: torch.Tensor | None = None) -> EnvBase:
    """One environment, or a vector of ``num_envs`` (batch size ``[num_envs]``), with
    episode bookkeeping (and the recurrent-state primer, if given).

    ``InitTracker`` marks each episode's first step (``is_init``), which resets
    a recurrent policy's state; ``StepCounter`` and ``RewardSum`` give each step
    its position and the running return, so episode statistics can be read from
    stored steps. All three keep one entry per environment of a vector.
    """
    if num_envs > 1:
        env = GymWrapper(make_vector(env_id, kwargs, import_module, num_envs, vectorization),
                         categorical_action_encoding=True)
    else:
        import_env_module(import_module)
        env = GymEnv(env_id, categorical_action_encoding=True, **dict(kwargs))
    transforms = [InitTracker(), StepCounter(), RewardSum()]
    if primer is not None:
        transforms.append(primer.clone())
    if counts is not None:  # a collector's environment: in a worker process, it ends with the learner
        exit_with_parent()
        transforms.append(CountSteps(counts, slot, gate))
    if isinstance(env, TransformedEnv):  # a vector env comes with TorchRL's autoreset transform
        env.append_transform(Compose(*transforms))
        return env
    return TransformedEnv(env, Compose(*transforms))


def env_factory(env_cfg, primer=None, counters: WorkerCounters | None = None,
                num_envs: int | None = None) -> Callable[..., EnvBase]:
    """A picklable environment factory (it crosses into worker processes), making
    ``env_cfg.num_envs`` environments at once unless ``num_envs`` says otherwise.

    With ``counters``, call it with ``slot=<index of the collector's environment>``.
    """
    return functools.partial(
        make_env, str(env_cfg.id), dict(env_cfg.kwargs or {}), env_cfg.import_module, primer,
        counters.counts if counters is not None else None,
        num_envs=int(num_envs if num_envs is not None else env_cfg.get("num_envs", 1)),
        vectorization=str(env_cfg.get("vectorization", "sync")),
        gate=counters.gate if counters is not None else None,
    )


def observation_stats(env_cfg, steps: int, seed: int,
                      step_timeout_s: float | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Mean and std of observations under a uniformly random policy (fixed for the run);
    an environment call that takes longer than ``step_timeout_s`` fails."""
    env = gym.make(env_cfg.id, **dict(env_cfg.kwargs or {}))
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
