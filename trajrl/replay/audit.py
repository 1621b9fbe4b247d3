"""Checks of the trajectory invariants on a stored buffer or a sampled batch.

Each check returns violation counts by name; every count is 0 when the data is right.
"""

from __future__ import annotations

import torch
from tensordict import TensorDictBase

from trajrl.base.keys import CLOSING_KEY, MASK_KEY, TRAJ_KEY
from trajrl.replay.episodes import as_sequences, buffer_locked, find_runs, run_steps
from trajrl.replay.lanes import LaneWriter, in_time_order


def audit_storage(stored: TensorDictBase, full: bool) -> dict[str, int]:
    """Invariants of a flat storage of episodes (``stored = buffer[:]``).

    Every episode is complete (first step ``step_count == 0``, last step done, no
    done before), its steps are consecutive, each observes what the one before
    led to, and its id is used by no other run.
    When the storage is full, one episode whose head was overwritten is expected.
    """
    traj_ids = stored.get(TRAJ_KEY).reshape(-1)
    counts = {
        "episode_without_start": 0,
        "episode_without_end": 0,
        "done_inside_episode": 0,
        "steps_not_consecutive": 0,
        "observation_not_chained": 0,
        "id_in_two_places": 0,
    }
    size = traj_ids.numel()
    if size == 0:
        return counts
    step = stored.get("step_count").reshape(-1)
    done = stored.get(("next", "done")).reshape(-1)
    starts, lengths = find_runs(traj_ids)
    last = (starts + lengths - 1) % size
    headless = int((step[starts] != 0).sum())
    counts["episode_without_start"] = max(0, headless - (1 if full else 0))
    counts["episode_without_end"] = int((~done[last]).sum())
    counts["done_inside_episode"] = int(done.sum()) - int(done[last].sum())
    run_of, _, position = run_steps(starts, lengths, size)
    nxt = (position + 1) % size
    same_run = torch.cat([run_of[1:] == run_of[:-1], torch.tensor([False])])
    counts["steps_not_consecutive"] = int(((step[nxt] != step[position] + 1) & same_run).sum())
    counts["observation_not_chained"] = _not_chained(stored, position, nxt, same_run)
    counts["id_in_two_places"] = starts.numel() - int(traj_ids[starts].unique().numel())
    return counts


def audit_lanes(stored: TensorDictBase, lanes: torch.Tensor) -> dict[str, int]:
    """Invariants of fixed-frame lanes (``trajrl.replay.lanes``): ``stored`` holds every
    stored step lane after lane, each lane oldest first (``LaneWriter.cells()``), and
    ``lanes`` the lane of each.

    Within a lane, a run of one id is one episode: its steps are consecutive, each
    observes what the one before led to, no done before its last step, and its id is
    used in no other run. Every run begins its episode except a lane's oldest (its
    start overwritten) and ends done except a lane's newest (still under way).
    """
    counts = {
        "episode_without_start": 0,
        "episode_without_end": 0,
        "done_inside_episode": 0,
        "steps_not_consecutive": 0,
        "observation_not_chained": 0,
        "id_in_two_places": 0,
    }
    size = lanes.numel()
    if size == 0:
        return counts
    ids = stored.get(TRAJ_KEY).reshape(-1)
    step = stored.get("step_count").reshape(-1)
    done = stored.get(("next", "done")).reshape(-1)
    new_lane = torch.ones(size, dtype=torch.bool)
    new_lane[1:] = lanes[1:] != lanes[:-1]
    begins = new_lane.clone()
    begins[1:] |= ids[1:] != ids[:-1]
    starts = begins.nonzero().squeeze(-1)
    last = torch.cat([starts[1:], torch.tensor([size])]) - 1
    lane_ends = torch.cat([new_lane[1:], torch.tensor([True])])
    counts["episode_without_start"] = int(((step[starts] != 0) & ~new_lane[starts]).sum())
    counts["episode_without_end"] = int((~done[last] & ~lane_ends[last]).sum())
    counts["done_inside_episode"] = int(done.sum()) - int(done[last].sum())
    same_run = ~begins[1:]
    position = torch.arange(size - 1)
    counts["steps_not_consecutive"] = int(((step[1:] != step[:-1] + 1) & same_run).sum())
    counts["observation_not_chained"] = _not_chained(stored, position, position + 1, same_run)
    counts["id_in_two_places"] = starts.numel() - int(ids[starts].unique().numel())
    return counts


def _not_chained(data: TensorDictBase, step: torch.Tensor, following: torch.Tensor, pairs: torch.Tensor) -> int:
    """Pairs of steps of one episode where the second does not observe what the
    first led to (``observation[following] != ("next", "observation")[step]``):
    steps of two environments mixed into one episode. 0 when the observations are
    not stored."""
    keys = data.keys(include_nested=True)
    if "observation" not in keys or ("next", "observation") not in keys:
        return 0
    now = data.get("observation").reshape(data.numel(), -1)
    led_to = data.get(("next", "observation")).reshape(data.numel(), -1)
    return int(((now[following] != led_to[step]).any(-1) & pairs).sum())


def audit_batch(batch: TensorDictBase) -> dict[str, int]:
    """Invariants of a ``[N, T]`` batch: masks are non-empty prefixes, and the valid
    steps of each row are consecutive, chained steps of one episode."""
    mask = batch.get(MASK_KEY)
    ids = batch.get(TRAJ_KEY).reshape(mask.shape)
    step = batch.get("step_count").reshape(mask.shape)
    both_valid = mask[:, 1:] & mask[:, :-1]
    cells = torch.arange(mask.numel()).reshape(mask.shape)
    return {
        "mask_not_prefix": int((mask[:, 1:] & ~mask[:, :-1]).any(-1).sum()),
        "empty_sequence": int((mask.sum(-1) == 0).sum()),
        "slice_across_episodes": int(((ids[:, 1:] != ids[:, :-1]) & both_valid).any(-1).sum()),
        "steps_not_consecutive": int(((step[:, 1:] != step[:, :-1] + 1) & both_valid).any(-1).sum()),
        "observation_not_chained": _not_chained(
            batch, cells[:, :-1].reshape(-1), cells[:, 1:].reshape(-1), both_valid.reshape(-1)
        ),
    }


def audit_episodes(batch: TensorDictBase) -> dict[str, int]:
    """``audit_batch``, plus: every row is one complete episode (starts at ``is_init``,
    ends done at its last valid step and not before)."""
    mask = batch.get(MASK_KEY)
    done = batch.get(("next", "done")).reshape(mask.shape) & mask
    last = (mask.sum(-1) - 1).clamp_min(0).unsqueeze(-1)
    return {
        **audit_batch(batch),
        "episode_without_start": int((~batch.get("is_init").reshape(mask.shape)[:, 0]).sum()),
        "episode_without_end": int((~done.gather(1, last).squeeze(-1)).sum()),
        "done_inside_episode": int(done.sum() - done.gather(1, last).sum()),
    }


def audit_tape(tape: TensorDictBase) -> dict[str, int]:
    """Invariants of a tape (``trajrl.replay.tapes``): ``audit_batch``'s on each of its episodes laid
    out as a row, plus: every episode from its first step, every one but the last (which the
    tape's end may cut) ending done, each closing cell holding the observation after the step
    before it, and no stored step twice."""
    flat = tape.reshape(-1)
    valid = flat.get(MASK_KEY).reshape(-1)
    steps = flat[valid]
    rows = as_sequences(steps, steps.get("is_init").reshape(-1))
    mask = rows.get(MASK_KEY)
    done = rows.get(("next", "done")).reshape(mask.shape).gather(1, (mask.sum(-1) - 1).unsqueeze(-1)).squeeze(-1)
    closing = (~valid).nonzero().squeeze(-1)
    before = flat[(closing - 1).clamp_min(0)]
    index = steps.get("index", None)
    return {
        **audit_batch(rows),
        "episode_without_start": int((rows.get("step_count").reshape(mask.shape)[:, 0] != 0).sum()),
        "episode_cut_inside_tape": int((~done[:-1]).sum()),
        "closing_not_next_observation": int(
            (flat[closing].get("observation") != before.get(("next", "observation"))).flatten(1).any(-1).sum()
            + int((closing == 0).sum())
        ),
        "step_twice": 0 if index is None else int(index.numel() - index.unique().numel()),
    }


class LiveAudit:
    """Audits every ``every``-th sampled batch and, at the end, the whole buffer;
    keeps running violation counts (reported as ``audit/...`` metrics)."""

    def __init__(self, every: int = 100):
        self.every = every
        self.samples_seen = 0
        self.batches_checked = 0
        self.counts: dict[str, int] = {}

    def _add(self, prefix: str, counts: dict[str, int]) -> None:
        for name, count in counts.items():
            key = f"{prefix}/{name}"
            self.counts[key] = self.counts.get(key, 0) + count

    def check_batch(self, batch: TensorDictBase, whole_episodes: bool = False) -> None:
        """Audit every ``every``-th batch (``whole_episodes``: each row must be a complete episode; a
        tape's, by its closing cells: ``audit_tape``)."""
        self.samples_seen += 1
        if (self.samples_seen - 1) % self.every == 0:
            if CLOSING_KEY in batch.keys(include_nested=True):
                self._add("batch", audit_tape(batch))
            else:
                self._add("batch", audit_episodes(batch) if whole_episodes else audit_batch(batch))
            self.batches_checked += 1

    def check_buffer(self, buffer) -> None:
        if isinstance(buffer.writer, LaneWriter):  # fixed-frame lanes
            with buffer_locked(buffer):
                stored, lanes = in_time_order(buffer)
            self._add("buffer", audit_lanes(stored, lanes))
        else:
            self._add("buffer", audit_storage(buffer[:], full=len(buffer) == buffer.storage.max_size))

    @property
    def violations(self) -> int:
        return sum(self.counts.values())

    def metrics(self) -> dict[str, float]:
        return {
            "audit/violations": float(self.violations),
            "audit/batches_checked": float(self.batches_checked),
            **{f"audit/{k}": float(v) for k, v in self.counts.items()},
        }
