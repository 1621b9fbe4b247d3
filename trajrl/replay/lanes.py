"""Fixed-frame batches (``trajs_per_batch=null``) in a multi-dimensional storage: one lane per environment.

Without ``trajs_per_batch`` a collector's worker hands over every ``frames_per_batch``
steps of its environments as they are, episodes cut wherever the batch ends: ``[T]``
for one environment, ``[B, T]`` for a vector of ``B``. The storage keeps each
environment's steps in its own lane, in the order they happened, so an episode cut
between two writes is contiguous again in its lane: TorchRL's layout, time first,
``[L, B]`` for a vector environment, ``[L, W]`` for ``W`` workers of one environment,
``[L, W, B]`` for workers over vectors (``storage.ndim`` 2 or 3; 1 for one
environment). ``L = capacity // lanes`` steps per lane.

Each worker writes its lanes at its own pace, at its own write head, wrapping around
on its own (``LaneWriter``); which worker wrote a batch, the environment says
(``WORKER_KEY``, its collector slot, stamped on every step). ``async_batched`` hands
over the steps of its single environments interleaved as they came: each environment
is a worker of its own, its steps sorted out by that stamp. Slices are drawn inside
one lane, inside one episode (``LaneSliceSampler``; by priority,
``PrioritizedLaneSliceSampler``): they never run past a lane's newest step (an
episode still under way: the slice ends there, marked truncated), nor into steps
older than its oldest (wrap-around overwrote an episode's start: a slice may begin
mid-episode, from the recurrent state stored with its first step).
"""

from __future__ import annotations

import multiprocessing as mp
from multiprocessing.context import get_spawning_popen

import torch
from tensordict import TensorDictBase
from torchrl.data.replay_buffers.storages import Storage

from trajrl.base import internals
from trajrl.base.keys import TRAJ_KEY, WORKER_KEY
from trajrl.replay.episodes import StatelessSampler, run_steps
from trajrl.replay.writer import EpisodeWriter

WORKER_KEYS = (WORKER_KEY, ("next", WORKER_KEY))


class LaneWriter(EpisodeWriter):
    """Writes each ``[B, T]`` (or ``[T]``) batch of worker ``w`` into its ``B`` lanes at
    that worker's write head, ``T`` steps on in time (modulo the lane's length).

    Episode ids: a batch's first run of steps continues its lane's last episode when
    it carries the same id and is not an episode's first step; every other run gets a
    fresh id from the counter all writers share. Ids are thus unique in the storage
    and the same across the writes of one episode. Counts (write heads, steps written
    per worker, each lane's last ids) live in shared memory and move only under the
    buffer's write lock, in whichever process writes; the journal of
    ``trajrl.replay.writer`` keeps a write a dead worker left half done.
    """

    def __init__(self, workers: int, envs: int, journal_dir: str | None = None, **kwargs):
        super().__init__(journal_dir, **kwargs)
        self.workers, self.envs = workers, envs
        self.lane_shape = tuple(n for n in (workers, envs) if n > 1)
        self._shared = self._new_shared()

    def _new_shared(self, values: dict | None = None) -> dict:
        lanes = self.workers * self.envs
        sizes = {"head": self.workers, "written": self.workers, "last_raw": lanes, "last_id": lanes}
        return {
            name: mp.Array("q", list(values[name]) if values else [0] * size, lock=False)
            for name, size in sizes.items()
        }

    def __getstate__(self) -> dict:
        state = super().__getstate__()
        if get_spawning_popen() is None:  # not into a new process: the values, not the shared ones
            state["_shared"] = {name: list(array) for name, array in state["_shared"].items()}
        return state

    def __setstate__(self, state: dict) -> None:
        super().__setstate__(state)
        if isinstance(next(iter(self._shared.values())), list):
            self._shared = self._new_shared(self._shared)

    # ------------------------------------------------------------ the lanes
    @property
    def lane_len(self) -> int:
        """Steps each lane holds."""
        return self.storage.max_size // (self.workers * self.envs)

    def counts(self) -> dict[str, torch.Tensor]:
        """Each worker's write head and steps written (per lane), and each lane's last ids."""
        return {name: torch.tensor(list(array)) for name, array in self._shared.items()}

    def cells(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Every stored step, lane after lane, each lane oldest first: ``(coords [n, ndim],
        lane [n])`` (the storage index of each step, and its lane's number)."""
        return self._latest([min(written, self.lane_len) for written in self._shared["written"]])

    def _latest(self, steps: list[int]) -> tuple[torch.Tensor, torch.Tensor]:
        """The latest ``steps[w]`` steps of each lane of worker ``w``, lane after lane,
        oldest first: ``(coords [n, ndim], lane [n])``."""
        coords, lanes = [], []
        for worker, n in enumerate(steps):
            times = (self._shared["head"][worker] - n + torch.arange(n)) % self.lane_len
            envs = torch.arange(self.envs).repeat_interleave(n)
            coords.append(self._coords(times.repeat(self.envs), worker, envs))
            lanes.append(worker * self.envs + envs)
        return torch.cat(coords), torch.cat(lanes)

    def _coords(self, times: torch.Tensor, worker: int | torch.Tensor, env: int | torch.Tensor) -> torch.Tensor:
        parts = [times]
        if self.workers > 1:
            parts.append(torch.as_tensor(worker).expand(times.shape))
        if self.envs > 1:
            parts.append(torch.as_tensor(env).expand(times.shape))
        return torch.stack(parts, -1)

    @property
    def stored(self) -> int:
        """Steps the lanes hold."""
        return sum(min(written, self.lane_len) for written in self._shared["written"]) * self.envs

    def behind(self, seen: torch.Tensor) -> int:
        return int((self.counts()["written"] - seen).max())

    def written_since(self, seen: torch.Tensor | None) -> tuple[tuple[torch.Tensor, ...], torch.Tensor]:
        """``(index, written)``: the storage index of the steps written since the counts
        ``seen`` (each worker's steps written, as returned before; None: since the
        start), a lane's length at most per lane, and the counts now. Call it under the
        buffer's locks."""
        written = self.counts()["written"]
        seen = torch.zeros_like(written) if seen is None else seen
        new = [max(0, min(int(n), self.lane_len)) for n in written - seen]
        return tuple(self._latest(new)[0].unbind(-1)), written

    # ------------------------------------------------------------ writing
    def _prepare(self, data):
        return data  # ids are given as the batch is written (they continue the lanes' episodes)

    def _journal_counts(self) -> dict:
        return {**super()._journal_counts(), "lanes": {k: list(v) for k, v in self._shared.items()}}

    def _restore_counts(self, entry: dict) -> None:
        super()._restore_counts(entry)
        for name, values in entry["lanes"].items():
            self._shared[name][:] = values

    def _write(self, data) -> torch.Tensor:
        if not isinstance(data, TensorDictBase):
            raise TypeError(f"LaneWriter writes tensordicts of steps, got {type(data).__name__}")
        if WORKER_KEY not in data.keys():
            return self._write_worker(data, 0)
        stamps = data.get(WORKER_KEY)
        first = int(stamps.reshape(-1)[0])
        if bool((stamps == first).all()):  # one worker's batch (every collector but async_batched)
            return self._write_worker(data, first)
        # steps of several workers as they came (async_batched): each worker's, in order, in its lanes
        data, stamps = data.reshape(-1), stamps.reshape(-1)
        index = torch.empty(stamps.shape, dtype=torch.long)
        for worker in stamps.unique().tolist():
            mine = stamps == worker
            index[mine] = self._write_worker(data[mine.nonzero().squeeze(-1)], worker)
        return index

    def _write_worker(self, data: TensorDictBase, worker: int) -> torch.Tensor:
        """Worker ``worker``'s steps, ``[B, T]`` (``[T]`` for one environment), at its write head."""
        if not 0 <= worker < self.workers:
            raise ValueError(f"a batch from worker {worker}: this storage has lanes for {self.workers} workers")
        shape = data.shape
        data = data.exclude(*WORKER_KEYS).reshape(self.envs, -1)  # [B, T]: each row one lane, in time order
        data = self._continued_ids(data, worker)
        if not self.storage.initialized:
            internals.init_storage(self.storage, data[:, 0].reshape(-1)[0].expand(self.lane_shape).clone())
        steps, length = data.shape[-1], self.lane_len
        head = self._shared["head"][worker]
        kept = min(steps, length)  # more steps than a lane holds: the older ones would be overwritten at once
        times = ((head + steps - kept + torch.arange(kept)) % length).expand(self.envs, kept)
        envs = torch.arange(self.envs).unsqueeze(-1).expand(self.envs, kept)
        index = self._coords(times, worker, envs)  # [B, kept, ndim]
        self.storage.set(tuple(index.unbind(-1)), data[:, steps - kept :], set_cursor=False)
        self._shared["head"][worker] = (head + steps) % length
        self._shared["written"][worker] += steps
        internals.add_to_write_count(self, data.numel())
        # TorchRL reads rows [0, len / lanes) of the time dimension: every row any lane has written
        filled = min(max(self._shared["written"]), length)
        internals.set_storage_length(self.storage, filled * self.workers * self.envs)
        # each step's position in the storage, flattened, shaped as the batch came (-1: overwritten at once)
        flat = torch.full((self.envs, steps), -1, dtype=torch.long)
        flat[:, steps - kept :] = self.flat(index)
        return flat.reshape(shape)

    def flat(self, coords: torch.Tensor) -> torch.Tensor:
        """Storage coordinates ``[..., ndim]`` as positions in the flattened storage."""
        shape = torch.tensor((self.lane_len, *self.lane_shape))
        strides = torch.cat([shape.flip(0).cumprod(0).flip(0)[1:], torch.ones(1, dtype=shape.dtype)])
        return (coords * strides).sum(-1)

    def _continued_ids(self, data: TensorDictBase, worker: int) -> TensorDictBase:
        """Fresh ids per run of one id in each row, the first run continuing its lane's last episode.
        Without the collector's ids (``async_batched``), episodes begin where ``is_init`` marks them."""
        is_init = data.get("is_init", torch.zeros(data.shape, dtype=torch.bool)).reshape(data.shape)
        raw = data.get(TRAJ_KEY, None)
        raw = torch.zeros(data.shape, dtype=torch.int64) if raw is None else raw.reshape(data.shape)
        lanes = worker * self.envs + torch.arange(self.envs)
        last_raw = torch.tensor([self._shared["last_raw"][i] for i in lanes])
        last_id = torch.tensor([self._shared["last_id"][i] for i in lanes])
        begins = torch.ones_like(raw, dtype=torch.bool)
        begins[:, 1:] = (raw[:, 1:] != raw[:, :-1]) | is_init[:, 1:]
        written = int(self._shared["written"][worker]) > 0
        continues = (raw[:, 0] == last_raw) & ~is_init[:, 0] & written
        begins[:, 0] = ~continues
        if written and not bool(continues.all()):
            self._end_cut_episodes(worker, ~continues)
        first = self.next_id
        fresh = first + torch.cumsum(begins.reshape(-1), 0).reshape(raw.shape) - 1
        fresh = torch.where(torch.cumsum(begins, -1) == 0, last_id.unsqueeze(-1), fresh)  # the continued run
        self.next_id = first + int(begins.sum())
        for i, lane in enumerate(lanes.tolist()):
            self._shared["last_raw"][lane] = int(raw[i, -1])
            self._shared["last_id"][lane] = int(fresh[i, -1])
        data = data.clone(False)
        data.set(TRAJ_KEY, fresh.to(raw.dtype).reshape(data.shape))
        return data

    def _end_cut_episodes(self, worker: int, lanes: torch.Tensor) -> None:
        """The newest steps of these lanes of ``worker``, where a new episode follows: an
        episode that did not end there was cut (its collector stopped: a resumed run, a
        worker replaced) and is marked truncated, as TorchRL marks the end of a rollout."""
        time = (self._shared["head"][worker] - 1) % self.lane_len
        envs = lanes.nonzero().squeeze(-1)
        index = tuple(self._coords(torch.full(envs.shape, time), worker, envs).unbind(-1))
        storage = internals.storage_contents(self.storage)
        cut = ~storage.get(("next", "done"))[index].reshape(-1)  # an episode that ended there was not cut
        index = tuple(part[cut] for part in index)
        for key in (("next", "truncated"), ("next", "done")):
            storage.get(key)[index] = True

    def _empty(self, empty_write_count: bool = True) -> None:
        super()._empty(empty_write_count)
        for array in self._shared.values():
            array[:] = [0] * len(array)

    def state_dict(self) -> dict:
        return {**super().state_dict(), "_lanes": {k: list(v) for k, v in self._shared.items()}}

    def load_state_dict(self, state_dict: dict) -> None:
        super().load_state_dict(state_dict)
        for name, values in state_dict.get("_lanes", {}).items():
            self._shared[name][:] = values


def in_time_order(buffer) -> tuple[TensorDictBase, torch.Tensor]:
    """Every step a buffer of lanes holds, lane after lane, each lane oldest first, and
    the lane of each (``LaneWriter.cells()``). Call it under ``buffer_locked(buffer)``."""
    coords, lanes = buffer.writer.cells()
    return internals.storage_contents(buffer.storage)[tuple(coords.unbind(-1))], lanes


class LaneSliceSampler(StatelessSampler):
    """Slices of up to ``slice_len`` steps inside one lane and one episode, started at a
    stored step drawn uniformly (moved back if its episode's stored steps end sooner);
    shorter only where the whole stored run of the episode is. ``slice_len=1``: single
    transitions. ``is_init`` marks each slice's first step; a slice that ends at its
    lane's newest step, in an episode still under way, has that step marked truncated
    (and done), as TorchRL marks slices it cuts. ``follow`` gives it the buffer's writer."""

    def __init__(self, slice_len: int):
        self.slice_len = slice_len
        self.writer: LaneWriter | None = None

    def follow(self, writer: LaneWriter) -> None:
        self.writer = writer

    def sample(self, storage: Storage, batch_size: int) -> tuple[tuple[torch.Tensor, ...], dict]:
        coords, lanes = self.writer.cells()
        size = lanes.numel()
        if size == 0:
            raise RuntimeError("LaneSliceSampler: the buffer holds no step yet")
        index = tuple(coords.unbind(-1))
        ids = internals.storage_contents(storage).get(TRAJ_KEY)[index].reshape(-1)
        begins = torch.ones(size, dtype=torch.bool)
        begins[1:] = (ids[1:] != ids[:-1]) | (lanes[1:] != lanes[:-1])
        starts = begins.nonzero().squeeze(-1)
        lengths = torch.diff(starts, append=torch.tensor([size]))
        newest = torch.ones(size, dtype=torch.bool)  # each lane's newest step
        newest[:-1] = lanes[1:] != lanes[:-1]

        num_slices = max(1, batch_size // self.slice_len)
        picked, importance = self._pick(coords, num_slices)
        run = torch.searchsorted(starts, picked, right=True) - 1
        run_len = lengths[run]
        slice_len = run_len.clamp_max(self.slice_len)
        first = starts[run] + torch.minimum(picked - starts[run], run_len - slice_len)
        _, offset, cell = run_steps(first, slice_len, size)
        is_init = offset == 0
        last = torch.zeros_like(is_init)
        last[:-1] = is_init[1:]
        last[-1] = True
        chosen = tuple(part[cell] for part in index)
        info = {"is_init": is_init.unsqueeze(-1)}
        if self.slice_len > 1:  # the two flags of the chosen steps, not the steps (TorchRL reads those)
            stored = internals.storage_contents(storage)
            done, truncated = (stored.get(("next", key))[chosen].reshape(-1) for key in ("done", "truncated"))
            cut = last & newest[cell] & ~done
            info[("next", "truncated")] = (truncated | cut).unsqueeze(-1)
            info[("next", "done")] = (done | cut).unsqueeze(-1)
        if importance is not None:
            info["priority_weight"] = torch.repeat_interleave(importance, slice_len)
        return chosen, info

    def _pick(self, coords: torch.Tensor, num_slices: int) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Which of the stored steps (``coords``, lane after lane) begin slices: uniformly;
        no importance weights."""
        return torch.randint(len(coords), (num_slices,), generator=internals.sampler_rng(self)), None


class PrioritizedLaneSliceSampler(LaneSliceSampler):
    """``LaneSliceSampler`` with R2D2's prioritised replay: a slice begins at stored step
    ``i`` with probability ``p_i^alpha / sum_j p_j^alpha``, importance weights
    ``(N P(i))^-beta`` (normalised by their max) in ``priority_weight``; steps written
    since the last sample get the largest priority seen so far. Priorities are kept per
    storage position and saved with the buffer."""

    def __init__(self, slice_len: int, alpha: float, beta: float, eps: float = 1e-6):
        super().__init__(slice_len)
        self.alpha, self.beta, self.eps = alpha, beta, eps
        self.priority = torch.zeros(0)  # per storage position, flattened (sized at the first sample)
        self.max_priority = 1.0
        self._seen: torch.Tensor | None = None  # the writer's counts when new steps last got max_priority

    def _pick(self, coords: torch.Tensor, num_slices: int) -> tuple[torch.Tensor, torch.Tensor]:
        writer = self.writer
        capacity = writer.lane_len * writer.workers * writer.envs
        if self.priority.numel() != capacity:
            self.priority = torch.zeros(capacity)
        new, self._seen = writer.written_since(self._seen)
        self.priority[writer.flat(torch.stack(new, -1))] = self.max_priority
        weights = (self.priority[writer.flat(coords)] + self.eps) ** self.alpha
        probability = weights / weights.sum()
        picked = torch.multinomial(probability, num_slices, replacement=True, generator=internals.sampler_rng(self))
        importance = (len(coords) * probability[picked]) ** (-self.beta)
        return picked, importance / importance.max()

    def update_priority(self, index, priority, *, storage=None) -> None:
        if isinstance(index, tuple):
            index = torch.stack(index, -1)
        index = torch.as_tensor(index)
        flat = index if index.ndim == 1 else self.writer.flat(index)  # positions, or coordinates [n, ndim]
        priority = torch.as_tensor(priority, dtype=torch.float).reshape(-1)
        self.priority[flat] = priority
        self.max_priority = max(self.max_priority, float(priority.max()))

    def _empty(self) -> None:
        self.priority.zero_()
        self.max_priority, self._seen = 1.0, None

    def state_dict(self) -> dict:
        return {"priority": self.priority, "max_priority": self.max_priority, "seen": self._seen}

    def load_state_dict(self, state_dict: dict) -> None:
        self.priority = state_dict["priority"].clone()
        self.max_priority, self._seen = float(state_dict["max_priority"]), state_dict["seen"]

    def dumps(self, path) -> None:
        torch.save(self.state_dict(), f"{path}/prioritized_lane_sampler.pt")

    def loads(self, path) -> None:
        self.load_state_dict(torch.load(f"{path}/prioritized_lane_sampler.pt", weights_only=True))
