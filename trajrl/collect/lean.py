"""The lean stepping path (``env.stepping=lean``): a collector's gymnasium environment
stepped by trajrl, with the episode bookkeeping of TorchRL's transforms done in bulk.

TorchRL's path (``make_env``: ``GymWrapper``, its autoreset transform for a vector,
``InitTracker``, ``StepCounter``, ``RewardSum``, the recurrent-state primer, and
trajrl's info readers and counters) copies each step's tensordict once per transform
and reads the info dicts one environment at a time; over a vector of 256 environments
that costs more than stepping them (``scripts/bench_pipeline.py`` measures both paths
there; docs/performance.md quotes its figures). ``LeanEnv`` keeps that stack, built as
usual, for its specs, seeding and (rare) full resets, and steps the gymnasium
environment under it directly: one ``step`` of the vector, its arrays converted once,
the counters, flags, returns, recurrent states, fault marks and resets written for
all environments at once. It writes what TorchRL's path writes: the same keys and
values, step for step (tests/integration/test_lean.py compares the buffers both fill, byte for byte).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from tensordict import TensorDict, TensorDictBase
from torchrl.envs import EnvBase, TransformedEnv

from trajrl.base import internals
from trajrl.base.keys import FAULT_KEY, WORKER_KEY
from trajrl.collect.counters import CountSteps

#: What TorchRL's path names each step's bookkeeping.
COUNT, RETURN, INIT, SUCCESS = "step_count", "episode_reward", "is_init", "is_success"
DONE_KEYS = ("done", "terminated", "truncated")


def _with_rows(batch: Any, rows: np.ndarray, items: list) -> Any:
    """``batch`` (an array, or a dict or tuple of them, one row per environment) with
    ``rows`` replaced by ``items`` (one observation each, of the same structure)."""
    if isinstance(batch, dict):
        return {key: _with_rows(value, rows, [item[key] for item in items]) for key, value in batch.items()}
    if isinstance(batch, tuple):
        return tuple(_with_rows(value, rows, [item[j] for item in items]) for j, value in enumerate(batch))
    out = np.array(batch, copy=True)
    out[rows] = np.stack([np.asarray(item) for item in items])
    return out


class LeanEnv(EnvBase):
    """``reference`` (TorchRL's environment stack over one gymnasium environment or a
    same-step-autoreset vector of them, see ``make_env``), stepped in bulk by
    ``step_and_maybe_reset``, the one call a collector makes each step.

    ``count``: the reference's ``CountSteps`` (the worker's running totals and the gate),
    called with each step as the reference calls it; ``slot``: stamped on every step
    (``WORKER_KEY``) when the reference stamps it; ``primer_keys``: the recurrent-state
    entries, zero at each episode's first step. Where the reference reads ``env_fault`` or
    ``is_success`` from the environment's info, so does this."""

    def __init__(
        self, reference: TransformedEnv, *, count: CountSteps | None, slot: int | None, primer_keys: list[str]
    ):
        super().__init__(batch_size=reference.batch_size, device=reference.device)
        self.reference, self.base = reference, reference.base_env
        self.gym = internals.gym_env(self.base)
        self.vector = len(self.batch_size) > 0
        self.count, self.slot, self.primer_keys = count, slot, list(primer_keys)
        observed = reference.observation_spec.keys()
        self.faults, self.success = FAULT_KEY in observed, SUCCESS in observed
        self.full_observation_spec = reference.full_observation_spec.clone()
        self.full_reward_spec = reference.full_reward_spec.clone()
        self.full_done_spec = reference.full_done_spec.clone()
        self.full_action_spec = reference.full_action_spec.clone()
        self.full_state_spec = reference.full_state_spec.clone()
        self._flag_shape = (*self.batch_size, 1)  # done, terminated, truncated, is_init

    # ------------------------------------------------------------ the reference's own calls
    def _reset(self, tensordict: TensorDictBase | None = None, **kwargs) -> TensorDictBase:
        # on a copy: the reference writes into what it is given, and EnvBase wants a new tensordict back
        return self.reference.reset(None if tensordict is None else tensordict.copy(), **kwargs)

    def set_seed(self, seed: int | None = None, static_seed: bool = False) -> int | None:
        return self.reference.set_seed(seed, static_seed)

    def _set_seed(self, seed: int | None) -> None:  # EnvBase requires it; set_seed goes to the reference
        self.reference.set_seed(seed)

    def close(self, *, raise_if_closed: bool = True) -> None:
        self.reference.close(raise_if_closed=raise_if_closed)

    def _step(self, tensordict: TensorDictBase) -> TensorDictBase:
        """One step of one environment, without its reset (``step``; collectors call
        ``step_and_maybe_reset``): the episode that ends is reset by the next ``reset``."""
        if self.vector:  # gymnasium resets them within the step: only step_and_maybe_reset keeps that
            raise NotImplementedError(
                "a vector of environments stepped by env.stepping=lean steps with "
                "step_and_maybe_reset only; use env.stepping=torchrl to call step()"
            )
        next_td, _ = self._transition(tensordict, reset=False)
        return next_td

    # ------------------------------------------------------------ the lean step
    def step_and_maybe_reset(self, tensordict: TensorDictBase) -> tuple[TensorDictBase, TensorDictBase]:
        """Step every environment once: ``tensordict`` with its ``"next"`` entry set, and
        the root of the next step (an environment that ended starts its next episode)."""
        next_td, reset = self._transition(tensordict)
        tensordict.set("next", next_td)
        root = next_td.exclude("reward", *DONE_KEYS)
        for key in DONE_KEYS:
            root.set(key, torch.zeros_like(next_td.get(key)))
        root.update(tensordict.exclude("next", *root.keys(), *DONE_KEYS, "reward", INIT).copy())
        if reset is not None:  # as TorchRL's reset: a whole one updates the root, a partial one
            rows, values = reset  # writes the reset rows and zeroes what the reset does not give
            if rows is None:
                root.update(values)
            else:
                for key in list(root.keys(True, True)):
                    column = root.get(key).clone()
                    column[rows] = values[key] if key in values else 0
                    root.set(key, column)
        return tensordict, root

    def _transition(self, tensordict: TensorDictBase, reset: bool = True) -> tuple[TensorDictBase, tuple | None]:
        base = self.base
        action = base.read_action(tensordict.get(base.action_key))
        obs, reward, terminated, truncated, done, info = internals.gym_step_output(base, self.gym.step(action))
        terminated, truncated, done, _ = base.read_done(terminated=terminated, truncated=truncated, done=done)
        ended = np.asarray(done, dtype=bool).reshape(-1)
        final_obs, final_info = obs, info
        reset_obs, reset_info = None, None
        if ended.any():
            if self.vector:  # the vector reset them in this step: their last observations are in the info
                rows = np.flatnonzero(ended)
                final_obs = _with_rows(obs, rows, [info["final_obs"][i] for i in rows])
                final_info = self._final_info(info, rows)
                reset_obs, reset_info = obs, info
                if ended.all():  # TorchRL resets the whole vector again
                    reset_obs, reset_info = self.gym.reset()
            elif reset:
                reset_obs, reset_info = self.gym.reset()
        next_td = TensorDict(base.read_obs(final_obs), batch_size=self.batch_size)
        next_td.set("reward", base.read_reward(reward))
        next_td.set("done", torch.as_tensor(done).reshape(self._flag_shape))
        next_td.set("terminated", torch.as_tensor(terminated).reshape(self._flag_shape))
        next_td.set("truncated", torch.as_tensor(truncated).reshape(self._flag_shape))
        self._read_info(next_td, final_info)
        next_td.set(INIT, torch.zeros(self._flag_shape, dtype=torch.bool))
        next_td.set(COUNT, tensordict.get(COUNT) + 1)
        next_td.set(RETURN, tensordict.get(RETURN) + next_td.get("reward"))
        for key in self.primer_keys:  # the policy's next state, as the primer carries it
            state = tensordict.get(("next", key), None)
            next_td.set(key, state if state is not None else tensordict.get(key))
        if self.slot is not None:
            next_td.set(WORKER_KEY, torch.full(self.batch_size, self.slot, dtype=torch.int64))
        if self.count is not None:
            self.count.count_step(tensordict, next_td)
        if reset_obs is None:
            return next_td, None
        whole = not self.vector or ended.all()
        return next_td, (None if whole else torch.as_tensor(ended), self._reset_values(reset_obs, reset_info, ended))

    def _reset_values(self, obs: Any, info: dict, ended: np.ndarray) -> dict[str, torch.Tensor]:
        """What an episode's first step holds, for the environments that ``ended``."""
        first = TensorDict(self.base.read_obs(obs), batch_size=self.batch_size)
        self._read_info(first, info)
        if self.vector and not ended.all():
            first = first[torch.as_tensor(ended)]
        values = dict(first.items(True, True))
        shape = (*first.batch_size, 1)
        values[INIT] = torch.ones(shape, dtype=torch.bool)
        values[COUNT] = torch.zeros(shape, dtype=torch.int64)
        values[RETURN] = torch.zeros(shape, dtype=torch.float32)
        if self.slot is not None:
            values[WORKER_KEY] = torch.full(first.batch_size, self.slot, dtype=torch.int64)
        for key in self.primer_keys:
            spec = self.full_observation_spec[key]
            values[key] = torch.zeros((*first.batch_size, *spec.shape[len(self.batch_size) :]), dtype=spec.dtype)
        return values

    def _final_info(self, info: dict, rows: np.ndarray) -> dict:
        """The vector's info with the ``rows`` (environments that ended and were reset in
        the step) given their last step's entries, which gymnasium keeps in ``final_info``."""
        last, final = info.get("final_info", {}), dict(info)
        for key in (FAULT_KEY, SUCCESS):
            if key not in last:
                continue
            value = np.array(info[key] if key in info else np.zeros_like(last[key]), copy=True)
            ended = np.zeros(len(value), dtype=bool)
            ended[rows] = True
            ended &= last.get(f"_{key}", np.ones(len(value), dtype=bool))
            value[ended] = last[key][ended]
            final[key] = value
        return final

    def _read_info(self, td: TensorDictBase, info: dict) -> None:
        """The fault mark and success flag, as TorchRL's info readers give them (0 where absent)."""
        for key, dtype, read in ((FAULT_KEY, np.bool_, self.faults), (SUCCESS, np.float32, self.success)):
            if read:
                value = torch.as_tensor(np.asarray(info.get(key, 0), dtype=dtype))
                td.set(
                    key, value.expand(self.batch_size).clone() if value.ndim == 0 else value.reshape(self.batch_size)
                )
