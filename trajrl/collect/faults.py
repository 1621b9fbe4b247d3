"""Environments that raise: rebuilt and reset where they run, their unfinished episode
ended, marked and never stored.

``RestartOnError`` wraps one gymnasium environment of a collector. When its ``step``
raises, it builds the environment again, resets it, and hands back a step that
truncates the episode under way, with ``info["env_fault"] = True``. The episode ends
where the collector expects episodes to end (recurrent state, ``is_init`` and step
counts reset as for any episode), and the mark travels with it (TorchRL reads the info
key into ``("next", "env_fault")``): ``CountSteps`` counts the restart and the
episode's frames as lost, and the episode is dropped before it is stored
(``DropFaultedEpisodes`` on the buffer's writes; ``without_faulted`` for batches that
go straight to the learner). More than ``max_restarts`` restarts of one environment
within ``window_s`` seconds: the error is raised, and the run ends as it would have
without restarts. An environment whose ``reset`` raises is not restarted.

A step that returns what trajrl cannot store (``BadStep``, from ``trajrl.envs.env_check.CheckedSteps``
inside) is no fault to rebuild for: it ends the run, reported as the cause
(``collector.bad_steps=stop``), or its episode ends there and is dropped and counted as above,
without a rebuild (``drop``).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import time
from collections.abc import Callable
from pathlib import Path

import gymnasium as gym
import numpy as np
import torch
from tensordict import TensorDictBase
from torchrl.data import Categorical, Composite
from torchrl.envs.libs.gym import default_info_dict_reader
from torchrl.envs.transforms import Transform

from trajrl.base import internals
from trajrl.base.errors import BadStep, CollectorFailed, log_fault
from trajrl.base.keys import FAULT_KEY, TRAJ_KEY

#: Where a step says that its environment raised and was rebuilt (the episode it ends is dropped).
NEXT_FAULT = ("next", FAULT_KEY)


class RestartLimit:
    """At most ``most`` restarts of one thing (an environment, a worker: ``key``) within
    any ``window_s`` seconds."""

    def __init__(self, most: int, window_s: float):
        self.most, self.window_s = most, window_s
        self.times: dict[object, list[float]] = {}

    def record(self, key: object = 0) -> int:
        """Count a restart of ``key`` now; the restarts within the window, this one included."""
        now = time.monotonic()
        times = [t for t in self.times.get(key, []) if now - t < self.window_s] + [now]
        self.times[key] = times
        return len(times)

    def allows(self, count: int) -> bool:
        return count <= self.most


class RestartOnError(gym.Wrapper):
    """A gymnasium environment rebuilt by ``make`` when its step raises (see the module)."""

    def __init__(
        self,
        make: Callable[[], gym.Env],
        max_restarts: int,
        window_s: float,
        report: Callable[..., None] | None = None,
        drop_bad_steps: bool = False,
    ):
        super().__init__(make())
        self.make, self.report, self.drop_bad_steps = make, report, drop_bad_steps
        self.limit = RestartLimit(max_restarts, window_s)
        self.seed: int | None = None

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        if seed is not None:
            self.seed = seed
        try:
            observation, info = self.env.reset(seed=seed, options=options)
        except BadStep as bad:  # a reset's observation: no episode to drop
            self.stop(bad)
        return observation, {**info, FAULT_KEY: np.array(False)}

    def step(self, action):
        try:
            observation, reward, terminated, truncated, info = self.env.step(action)
        except CollectorFailed:  # the learner's own stall limit, raised while this step waited
            raise
        except BadStep as bad:
            return self.drop(bad)
        except Exception as error:
            return self.restart(error)
        return observation, reward, terminated, truncated, {**info, FAULT_KEY: np.array(False)}

    def stop(self, bad: BadStep):
        """Report ``bad`` as what ends the run, and raise it. A collector's worker process reports it
        and exits: the learner ends the run with the fault log's line (the worker's own traceback
        would say the same above it, pointing into trajrl)."""
        if self.report is not None:
            self.report(bad, 0, self.limit.window_s, gave_up=True, what="bad_step")
            if internals.in_a_collector_worker():
                raise SystemExit(1)
        raise bad

    def drop(self, bad: BadStep):
        """A step that returned what trajrl cannot store: with ``drop_bad_steps`` it becomes one
        that truncates the episode, marked as a fault (dropped and counted), and the environment is
        reset; otherwise the run ends with it."""
        if not self.drop_bad_steps:
            self.stop(bad)
        if self.report is not None:
            self.report(bad, 0, self.limit.window_s, what="bad_step")
        try:
            observation, info = self.env.reset()
        except BadStep as at_reset:
            self.stop(at_reset)
        return observation, 0.0, False, True, {**info, FAULT_KEY: np.array(True)}

    def restart(self, error: Exception):
        """Build the environment again and reset it; the step that raised becomes one
        that truncates the episode, marked as a fault. Past the limit, ``error`` is raised."""
        restarts = self.limit.record()
        if self.report is not None:
            self.report(error, restarts, self.limit.window_s, gave_up=not self.limit.allows(restarts))
        if not self.limit.allows(restarts):
            raise error
        with contextlib.suppress(Exception):
            self.env.close()
        self.env = self.make()
        seed = None if self.seed is None else self.seed + 7919 * restarts
        observation, info = self.env.reset(seed=seed)
        return observation, 0.0, False, True, {**info, FAULT_KEY: np.array(True)}


def read_faults(env, batch_size: torch.Size) -> None:
    """Make a TorchRL ``GymWrapper`` read the fault mark into ``env_fault``."""
    spec = Composite({FAULT_KEY: Categorical(2, shape=batch_size, dtype=torch.bool)}, shape=batch_size)
    env.set_info_dict_reader(default_info_dict_reader([FAULT_KEY], spec=spec))


class FaultLog:
    """One JSON line per restart, appended by whichever process restarted (lines
    this short are written whole), read by the learner for its summary."""

    def __init__(self, path: str | Path):
        self.path = str(path)
        self.entries: list[dict] = []  # read so far
        self.offset = 0  # of the first byte not read yet

    def reporter(self, slot: int) -> Callable[..., None]:
        return _Report(self.path, slot)

    def read(self) -> list[dict]:
        """Every entry so far (the lines added since the last call are the only ones read)."""
        if not os.path.exists(self.path):
            return []
        with open(self.path, "rb") as f:
            f.seek(self.offset)
            added = f.read()
        whole = added.rfind(b"\n") + 1  # a line still being written is read next time
        self.entries += [json.loads(line) for line in added[:whole].splitlines() if line.strip()]
        self.offset += whole
        return list(self.entries)

    def dropped_bad_steps(self) -> list[dict]:
        """The episodes dropped for a bad step (``collector.bad_steps=drop``), oldest first."""
        return [entry for entry in self.read() if entry["what"] == "bad_step" and not entry.get("gave_up")]

    def add(self, **entry) -> None:
        log_fault(self.path, **entry)


class _Report:
    """Picklable: crosses into worker processes with the environment factory."""

    def __init__(self, path: str, slot: int):
        self.path, self.slot, self.drops = path, slot, 0

    def __call__(
        self, error: BaseException, restarts: int, window_s: float, gave_up: bool = False, what: str = "env"
    ) -> None:
        cause = f"{type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}"
        if what == "bad_step" and not gave_up:  # what it returned (the episode is dropped: no advice)
            cause = str(getattr(error, "what", cause))
        log_fault(
            self.path,
            what=what,
            slot=self.slot,
            pid=os.getpid(),
            time=time.time(),
            cause=cause,
            restarts=restarts,
            window_s=window_s,
            gave_up=gave_up,
        )
        if what == "bad_step":
            self.drops += 1
            if self.drops == 1 and not gave_up:
                logging.getLogger("trajrl").warning(
                    "collector environment %d: %s; its episode dropped (collector.bad_steps=drop: this and every "
                    "other such episode counted in collect/episodes_dropped_bad_steps)",
                    self.slot,
                    cause,
                )
        elif not gave_up:
            logging.getLogger("trajrl").warning(
                "collector environment %d raised %s; rebuilt it (restart %d within %g s), its episode dropped",
                self.slot,
                cause,
                restarts,
                window_s,
            )


def without_faulted(episodes: TensorDictBase) -> TensorDictBase | None:
    """Complete episodes less those a fault ended, without the fault mark (None: nothing
    left). Flat steps (``[T]``, episodes told apart by trajectory id) or ``[N, T]`` rows."""
    fault = episodes.get(NEXT_FAULT, None)
    if fault is None:
        return episodes
    fault = fault.reshape(*episodes.shape, -1).any(-1)
    if fault.any():
        if episodes.batch_dims == 1:
            ids = episodes.get(TRAJ_KEY).reshape(-1)
            episodes = episodes[~torch.isin(ids, ids[fault])]
        else:
            episodes = episodes[~fault.reshape(episodes.shape[0], -1).any(-1)]
    if episodes.shape[0] == 0:
        return None
    return episodes.exclude(FAULT_KEY, NEXT_FAULT)


class DropFaultedEpisodes(Transform):
    """On a replay buffer's writes (run in whichever process writes): ``without_faulted``."""

    def _inv_call(self, tensordict: TensorDictBase) -> TensorDictBase | None:
        return without_faulted(tensordict)
