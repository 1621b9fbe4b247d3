"""The recurrent state stored with the steps of an episode, kept at every ``every``-th step only
(``SparseStates``): where slices start."""

from __future__ import annotations

import torch

from trajrl.base.errors import RefusedBatch


class SparseStates:
    """The recurrent state kept only at every ``every``-th step of an episode (steps
    ``every``, ``2 every``, ...; at step 0 it is zero by construction, so it is not
    kept): the only steps where slices start (``StepSliceSampler(state_every=...)``).

    Kept apart from the storage, in slot ``position // every`` of a table of
    ``capacity // every + 1`` slots, with the position it belongs to (``owner``). Two
    such steps are at least ``every`` positions apart in the storage (each is at least
    ``every`` steps into its episode, written after the one before it), so the slots of
    the steps stored never collide, except near the writer's cursor after a wrap-around,
    where a new step can take the slot of one about to be overwritten: the owner then
    says that step has no state, and no slice starts there.

    Its tensors are in shared memory when ``shared``, so that worker processes writing
    into the buffer fill the same table; the buffer's writer fills it under the write lock.
    """

    def __init__(self, shapes: dict[str, tuple[int, ...]], capacity: int, every: int, shared: bool = False):
        self.every = every
        slots = capacity // every + 1
        self.states = {key: torch.zeros(slots, *shape) for key, shape in shapes.items()}
        self.owner = torch.full((slots,), -1, dtype=torch.long)
        if shared:
            for tensor in (*self.states.values(), self.owner):
                tensor.share_memory_()

    @property
    def keys(self) -> list[str]:
        return list(self.states)

    def nbytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in (*self.states.values(), self.owner))

    def check(self, data) -> None:
        """``RefusedBatch`` for a batch that brings some of the state's keys and not the
        others, or a state of another shape than the table's (a batch with none is stored:
        its steps have no kept state)."""
        present = [key for key in self.keys if data.get(key, None) is not None]
        if present and len(present) < len(self.keys):
            missing = [key for key in self.keys if key not in present]
            raise RefusedBatch(
                f"the batch has the recurrent state's {', '.join(map(repr, present))} and not "
                f"{', '.join(map(repr, missing))}: write every key of the state ({', '.join(map(repr, self.keys))}, "
                "each step's state before it), or none"
            )
        for key in present:
            shape = tuple(data.get(key).shape[data.batch_dims :])
            expected = tuple(self.states[key].shape[1:])
            if shape != expected:
                raise RefusedBatch(f"the recurrent state {key!r} has shape {shape} a step, the policy's is {expected}")

    def write(self, position: torch.Tensor, step_count: torch.Tensor, states: dict[str, torch.Tensor | None]) -> None:
        """The steps just written at ``position`` (``[N]``, with their ``step_count``): the
        states of those at a multiple of ``every`` past their episode's first step. Steps
        written without a state (``states``' values None) have none kept: slices start
        there only at their episode's first step."""
        step_count = step_count.reshape(-1)
        slots = position // self.every
        self.owner[slots[self.owner[slots] == position]] = -1  # whatever the overwritten steps had is gone
        if any(value is None for value in states.values()):
            return
        kept = (step_count % self.every == 0) & (step_count > 0)
        slot = position[kept] // self.every
        for key, table in self.states.items():
            table[slot] = states[key].reshape(-1, *table.shape[1:])[kept].to(table.dtype)
        self.owner[slot] = position[kept]

    def saved(self, position: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """What ``write`` at ``position`` may change, to ``restore`` if the write fails."""
        slot = (position // self.every).unique()
        return (slot, self.owner[slot].clone(), *(table[slot].clone() for table in self.states.values()))

    def restore(self, saved: tuple[torch.Tensor, ...]) -> None:
        slot, owner, *tables = saved
        self.owner[slot] = owner
        for table, values in zip(self.states.values(), tables):
            table[slot] = values

    def has_state(self, position: torch.Tensor, step_count: torch.Tensor) -> torch.Tensor:
        """Whether a slice may start at each of these stored steps: an episode's first
        step, or a later multiple of ``every`` whose state is still kept."""
        step_count = step_count.reshape(-1)
        at_multiple = step_count % self.every == 0
        kept = self.owner[position // self.every] == position
        return at_multiple & ((step_count == 0) | kept)

    def read(self, position: torch.Tensor, step_count: torch.Tensor) -> dict[str, torch.Tensor]:
        """The state before each of these steps (``[N, *shape]``: zero at an episode's first step)."""
        start = (step_count.reshape(-1) == 0).view(-1, *([1] * (next(iter(self.states.values())).dim() - 1)))
        slot = position // self.every
        return {key: torch.where(start, 0.0, table[slot]) for key, table in self.states.items()}

    def state_dict(self) -> dict:
        return {
            "every": self.every,
            "owner": self.owner.clone(),
            **{f"state/{key}": table.clone() for key, table in self.states.items()},
        }

    def load_state_dict(self, state: dict) -> None:
        self.owner.copy_(state["owner"])
        for key, table in self.states.items():
            table.copy_(state[f"state/{key}"])
