"""What a flat replay buffer of complete episodes takes on write: ``rb.extend(batch)`` stores
complete episodes, whatever wrote the batch, or refuses it whole.

Collectors with ``trajs_per_batch`` write flat complete episodes with their trajectory
ids, step counts and ``is_init``; a user's own data (a padded ``[N, T]`` batch with
``("collector", "mask")`` as ``traj_format="padded"`` gives, episodes read back from a
storage, offline data) may lack any of those. ``WholeEpisodes`` is a replay-buffer
transform whose inverse (run on every write, in whichever process writes):

- keeps exactly the valid steps of a padded batch, row after row, so that each episode is
  stored contiguous (each row is one episode);
- tells the episodes apart where the trajectory id changes, where ``is_init`` is set, after
  a step that is ``("next", "done")`` and where a padded row begins, and numbers them
  afresh (the buffer's ``EpisodeWriter`` then gives them ids no other episode has): a step
  never keeps an id it did not bring, and two episodes under one id are two episodes;
- fills in what the buffer keeps with every step and the batch can do without:
  ``step_count``, ``is_init`` and ``("next", "done")`` (from ``terminated`` and ``truncated``);
- refuses, before anything is written, a batch with an episode that did not end (no
  ``("next", "done")`` at its last step): stored, it would pass for a complete one;
- keeps finite values only: a value that is NaN or infinite, or an action outside the task's
  action space (``ActionRange``), refuses the batch naming the key, the episode and the step;
  float64 values (numpy's default) are cast to float32, what the collectors write.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass

import torch
from tensordict import TensorDictBase
from torchrl.envs.transforms import Transform

from trajrl.base import internals
from trajrl.base.errors import MalformedMask, RefusedBatch, log_fault
from trajrl.base.keys import MASK_KEY, TRAJ_KEY

DONE_KEY = ("next", "done")


def check_mask(batch: TensorDictBase) -> torch.Tensor:
    """The boolean ``[N, T]`` mask of a padded batch, or ``MalformedMask`` saying what is wrong."""
    mask = batch.get(MASK_KEY, None)
    if mask is None:
        raise MalformedMask(
            f"a [N, T] batch of shape {tuple(batch.shape)} without ('collector', 'mask') cannot be told apart "
            "from padding: write flat episodes, add the mask, or use storage.ndim=2 for fixed-frame batches"
        )
    if mask.shape != batch.shape:
        raise MalformedMask(f"('collector', 'mask') has shape {tuple(mask.shape)}, the batch {tuple(batch.shape)}")
    mask = mask.bool()
    empty = (~mask.any(-1)).nonzero().reshape(-1)
    if empty.numel():
        raise MalformedMask(f"rows {empty.tolist()[:10]} of the mask have no valid step (an empty episode)")
    not_prefix = (mask[:, 1:] & ~mask[:, :-1]).any(-1).nonzero().reshape(-1)
    if not_prefix.numel():
        raise MalformedMask(
            f"rows {not_prefix.tolist()[:10]} of the mask are not a prefix of valid steps followed by padding"
        )
    return mask


def flag(data: TensorDictBase, key) -> torch.Tensor | None:
    """``data``'s boolean ``key`` as ``[T]``, or None where the batch has none."""
    value = data.get(key, None)
    return None if value is None else value.reshape(data.shape[0], -1).any(-1)


def done_flags(steps: TensorDictBase) -> torch.Tensor:
    """``("next", "done")`` of flat steps as ``[T]``: as written, else ``terminated | truncated``."""
    done = flag(steps, DONE_KEY)
    if done is not None:
        return done
    ends = [f for f in (flag(steps, ("next", "terminated")), flag(steps, ("next", "truncated"))) if f is not None]
    if not ends:
        raise RefusedBatch(
            "the batch has no ('next', 'done'), ('next', 'terminated') or ('next', 'truncated'): the buffer "
            "cannot tell where its episodes end; write each step's ('next', 'done')"
        )
    return torch.stack(ends).any(0)


def as_complete_episodes(steps: TensorDictBase, row_starts: torch.Tensor | None = None) -> TensorDictBase:
    """Flat steps (``[T]``) as the buffer stores them (see the module): episodes numbered
    0, 1, ... in ``TRAJ_KEY``, ``step_count``, ``is_init`` and ``("next", "done")`` filled in
    where missing; ``RefusedBatch`` for an episode without a done at its end.
    ``row_starts``: ``[T]``, True at the first valid step of each row of a padded batch."""
    size = steps.shape[0]
    done = done_flags(steps)
    begins = torch.zeros(size, dtype=torch.bool)
    begins[0] = True
    begins[1:] |= done[:-1]
    for starts in (flag(steps, "is_init"), row_starts):
        if starts is not None:
            begins |= starts
    ids = steps.get(TRAJ_KEY, None)
    if ids is not None:
        ids = ids.reshape(-1)
        begins[1:] |= ids[1:] != ids[:-1]
    ends = torch.ones(size, dtype=torch.bool)
    ends[:-1] = begins[1:]
    unfinished = (ends & ~done).nonzero().reshape(-1)
    if unfinished.numel():
        last = int(unfinished[0])
        first = int(begins[: last + 1].nonzero()[-1])
        which = "its last episode" if last == size - 1 else "an episode followed by another"
        raise RefusedBatch(
            f"{which} (steps {first} to {last} of the batch's {size} valid steps) has no ('next', 'done') at its "
            "last step: the buffer stores complete episodes only; write an episode once it is done"
        )
    episode = torch.cumsum(begins, 0) - 1
    steps = steps.clone(False)
    steps.set(TRAJ_KEY, episode)
    if "step_count" not in steps.keys():
        first_step = torch.nonzero(begins).reshape(-1)
        steps.set("step_count", (torch.arange(size) - first_step[episode]).unsqueeze(-1))
    if "is_init" not in steps.keys():
        steps.set("is_init", begins.unsqueeze(-1))
    if DONE_KEY not in steps.keys(include_nested=True):
        steps.set(DONE_KEY, done.unsqueeze(-1))
    return steps


@dataclass(frozen=True)
class ActionRange:
    """The actions the task takes: ``low <= action <= high`` for each of their numbers (a
    ``Discrete`` action's index: 0 .. n - 1); ``of(spec)`` reads it from TorchRL's action spec."""

    low: tuple[float, ...]
    high: tuple[float, ...]
    discrete: bool

    @classmethod
    def of(cls, spec) -> ActionRange | None:
        """From a ``Categorical`` or a ``Bounded`` spec (None for any other: nothing checked)."""
        space = spec.space
        if hasattr(space, "n"):
            return cls((0.0,), (float(space.n - 1),), True)
        if hasattr(space, "low"):
            return cls(tuple(space.low.reshape(-1).tolist()), tuple(space.high.reshape(-1).tolist()), False)
        return None

    def outside(self, action: torch.Tensor) -> torch.Tensor:
        """``[T]``: True at each step whose action is outside (continuous: by more than a
        millionth of the range, the rounding of a policy scaled to its bounds)."""
        low, high = torch.tensor(self.low), torch.tensor(self.high)
        slack = 0.0 if self.discrete else 1e-6 * (high - low).nan_to_num(posinf=0.0)
        values = action.reshape(action.shape[0], -1).to(torch.float64)
        return ((values < low - slack) | (values > high + slack)).any(-1)


def check_values(steps: TensorDictBase, actions: ActionRange | None) -> TensorDictBase:
    """``steps`` (flat, numbered by ``as_complete_episodes``) with float64 values cast to float32;
    ``RefusedBatch`` naming the first value that is NaN or infinite, or the first action outside
    ``actions``, by its key, episode of the batch and step."""
    steps = steps.apply(lambda value: value.float() if value.dtype == torch.float64 else value)
    found = []  # each key's earliest step that is not finite: the earliest first, the episode's sum after its cause
    for key, value in steps.items(include_nested=True, leaves_only=True):
        if value.is_floating_point():
            bad = ~torch.isfinite(value.reshape(value.shape[0], -1)).all(-1)
            if bad.any():
                found.append((int(bad.nonzero()[0]), key == "episode_reward", str(key), key))
    if found:
        at, *_, key = min(found)
        shown = steps.get(key).reshape(steps.shape[0], -1)[at]
        raise RefusedBatch(
            f"{key!r} holds {shown[~torch.isfinite(shown)][0].item()} at {where(steps, at)}: the buffer keeps "
            "finite values only; nothing was written"
        )
    action = steps.get("action", None)
    if actions is not None and action is not None:
        bad = actions.outside(action)
        if bad.any():
            at = int(bad.nonzero()[0])
            allowed = (
                f"0 .. {int(actions.high[0])}" if actions.discrete else f"{list(actions.low)} .. {list(actions.high)}"
            )
            raise RefusedBatch(
                f"'action' is {action[at].tolist()} at {where(steps, at)}, outside the task's actions ({allowed}); "
                "nothing was written"
            )
    return steps


def where(steps: TensorDictBase, at: int) -> str:
    """Step ``at`` of numbered flat ``steps`` in words: its episode of the batch and its step there."""
    episode = int(steps.get(TRAJ_KEY)[at])
    return f"step {int(steps.get('step_count').reshape(-1)[at])} of the batch's episode {episode}"


class WholeEpisodes(Transform):
    """On write: a flat ``[T]`` or padded ``[N, T]`` (+ mask) batch as complete episodes,
    flat, each contiguous (``as_complete_episodes``), with finite values and actions within
    ``actions`` (``check_values``); refused whole otherwise. A refusal of a collector worker's write
    is also added to the fault log ``refusals_to``: the learner ends the run with it as the cause
    (a worker's death says nothing of why), without restarting the worker for nothing."""

    laying_out_in: int | None = None  # ``storage_layout_write``: the process whose writes pass as they are

    def __init__(self, actions: ActionRange | None = None, refusals_to: str | None = None):
        super().__init__()
        self.actions = actions
        self.refusals_to, self.made_in = refusals_to, os.getpid()  # a fault log (``FaultLog``), for workers' writes

    def _inv_call(self, tensordict: TensorDictBase | None) -> TensorDictBase | None:
        if tensordict is None or self.laying_out_in == os.getpid():  # None: every episode was dropped
            return tensordict
        try:
            return self.checked(tensordict)
        except RefusedBatch as refused:
            if self.refusals_to is not None and os.getpid() != self.made_in:  # a worker's: the learner says why
                log_fault(
                    self.refusals_to,
                    what="refused",
                    slot=None,
                    pid=os.getpid(),
                    time=time.time(),
                    cause=str(refused),
                    gave_up=True,
                )
                if internals.in_a_collector_worker():  # the learner's line says it; no traceback of its own
                    raise SystemExit(1) from None
            raise

    def checked(self, tensordict: TensorDictBase) -> TensorDictBase:
        """``tensordict`` as the buffer stores it, or ``RefusedBatch`` (see the class)."""
        if tensordict.batch_dims > 2 or tensordict.batch_dims == 0:
            raise MalformedMask(f"expected flat [T] or padded [N, T] episodes, got shape {tuple(tensordict.shape)}")
        if tensordict.numel() == 0:
            return tensordict
        row_starts = None
        if tensordict.batch_dims == 2:
            mask = check_mask(tensordict)
            first = torch.zeros(mask.shape, dtype=torch.bool)
            first[:, 0] = True
            row_starts = first[mask]
            tensordict = tensordict[mask]
        return check_values(as_complete_episodes(tensordict.exclude(MASK_KEY), row_starts), self.actions)


@contextlib.contextmanager
def storage_layout_write(buffer) -> Iterator[None]:
    """While it lasts, ``buffer``'s ``WholeEpisodes`` lets this process's writes through as they are.
    TorchRL's multi-process collectors lay a shared storage out, as they are built, by
    writing one made-up step into it (not an episode) and emptying it again
    (``_check_replay_buffer_init``); the workers they start meanwhile take a copy of the buffer,
    whose writes are checked (the process is named, not a flag that would travel with the copy)."""
    transforms = [t for t in (buffer.transform if buffer is not None else []) if isinstance(t, WholeEpisodes)]
    for t in transforms:
        t.laying_out_in = os.getpid()
    try:
        yield
    finally:
        for t in transforms:
            t.laying_out_in = None
