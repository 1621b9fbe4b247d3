"""Every private internal of a dependency that trajrl relies on, and why: the one place
an upgrade of TorchRL, tensordict, torch, OmegaConf or Python's multiprocessing can break
by renaming or reshaping something it never promised to keep.

Each internal is a small function (or a mixin whose methods override a private method)
named for what trajrl does with it; nothing else in ``trajrl/`` reads a dependency's
private name (``scripts/check_private.py``, run by ``make lint``, fails on a new one).
``tests/unit/test_internals.py`` checks each internal's shape against the installed
versions, one test per internal, and names the internal and the version when it fails.

Not listed: the hooks a dependency documents for its subclasses to override, though their
names begin with ``_`` (TorchRL's ``EnvBase._step/_reset/_set_seed``, ``Transform._step/
_reset/_inv_call``, ``Writer._empty`` and ``Sampler._empty``, abstract in their base class;
the internals test checks that they are still there), and ``os._exit``, documented.

This module imports nothing from trajrl (it is the lowest layer: pyproject.toml's
``[tool.importlinter]``), and neither torch nor TorchRL when it is imported: checking a
configuration (``trajrl.configuration.compose``) and ending processes (``trajrl.base.processes``) use it
without loading them.
"""

from __future__ import annotations

import atexit
import multiprocessing.util
import os
from collections.abc import Callable, Iterator
from multiprocessing import forkserver, resource_tracker
from typing import Any

# ---------------------------------------------------------------- TorchRL: replay buffers
# A writer that journals its writes, keeps fresh episode ids and lanes needs the counts
# TorchRL's RoundRobinWriter and TensorStorage keep privately. TorchRL could own the
# writer's recovery (a write a killed process left half done, redone from a journal, and
# its locks freed: trajrl.replay.writer), and then none of these would be needed.


def writer_storage(writer: Any) -> Any:
    """The storage a writer writes into (``Writer._storage``, set by ``register_storage``):
    trajrl's writers place steps, read the storage's layout and count what it holds."""
    return writer._storage


def writer_cursor(writer: Any) -> int:
    """Where a ``RoundRobinWriter`` writes next (``_cursor``): the journal saves it before each
    write, and the step slice sampler finds the newest steps from it."""
    return writer._cursor


def writer_write_count(writer: Any) -> int:
    """Steps a ``RoundRobinWriter`` has written (``_write_count``), in whichever process: the
    samplers learn of new steps from it, the journal saves it before each write."""
    return writer._write_count


def set_writer_counts(writer: Any, cursor: int, write_count: int) -> None:
    """Put a ``RoundRobinWriter``'s cursor and write count back as they were before a write
    (a write undone, or redone from its journal)."""
    writer._cursor, writer._write_count = cursor, write_count


def add_to_write_count(writer: Any, steps: int) -> None:
    """Count ``steps`` more written (``_write_count``): the lane writer writes through
    ``storage.set`` at its own positions, not through ``RoundRobinWriter.extend``, which counts."""
    writer._write_count += steps


def storage_length(storage: Any) -> int:
    """The length a ``TensorStorage`` counts (``_len``), which its ``extend`` moves before it
    copies the steps in: the journal saves it, as a write redone must not count twice."""
    return storage._len


def set_storage_length(storage: Any, length: int) -> None:
    """Set a ``TensorStorage``'s counted length (``_len``): a write undone or redone puts it
    back; the lane writer sets it to the rows any lane has written (TorchRL reads that many)."""
    storage._len = length


def storage_contents(storage: Any) -> Any:
    """The tensordict a ``TensorStorage`` keeps every slot in (``_storage``), read in place:
    its keys and shapes (what every write must bring), and single entries of chosen slots
    (the samplers read ids and flags without gathering whole steps)."""
    return storage._storage


def init_storage(storage: Any, example: Any) -> None:
    """Lay out a lazy storage from one example step (``_init``): the lane writer writes a
    ``[B, T]`` batch at its own positions, so TorchRL's first ``set`` cannot infer the layout."""
    storage._init(example)


def saved_storage_contents(buffer_state: dict) -> dict:
    """The stored tensors in a replay buffer's ``state_dict()`` (its ``"_storage"`` entry's
    ``"_storage"``): a resumed run compares their shape with its own storage's before loading."""
    return buffer_state["_storage"]["_storage"]


def with_written_rows_only(buffer_state: dict) -> dict:
    """A replay buffer's ``state_dict()`` with its stored tensors cut to the rows written (a flat
    storage's first ``"_len"``; the rest is memory never written): two runs' buffers compare by it."""
    storage = buffer_state["_storage"]
    rows = storage.get("_len")
    if rows is not None and isinstance(storage.get("_storage"), dict):
        storage["_storage"] = {key: _cut(value, rows) for key, value in storage["_storage"].items()}
    return buffer_state


def _cut(tree: Any, rows: int) -> Any:
    if isinstance(tree, dict):
        return {key: _cut(value, rows) for key, value in tree.items()}
    return tree[:rows] if hasattr(tree, "shape") else tree


def write_lock(buffer: Any) -> Any:
    """A replay buffer's write lock (``_write_lock``; None if it has none): a multiprocessing
    lock where the buffer is shared. TorchRL could own freeing it: a writer killed while
    holding it leaves it held, and the recovery releases it."""
    return getattr(buffer, "_write_lock", None)


def replay_lock(buffer: Any) -> Any:
    """A replay buffer's lock of this process's reads and writes (``_replay_lock``; None if it
    has none): taken with the write lock, a read sees no write under way."""
    return getattr(buffer, "_replay_lock", None)


#: The shared counters TorchRL moves only under the buffer's write lock and never locks by
#: themselves, by owner: the writer's cursor and write count, the storage's length (each an
#: ``mp.Value`` with a lock of its own, which a killed worker can leave held).
WRITE_LOCKED_COUNTERS = (("writer", "_cursor_value"), ("writer", "_write_count_value"), ("storage", "_len_value"))


def write_locked_counters(buffer: Any) -> Iterator[tuple[Any, str]]:
    """``(owner, attribute)`` of each of ``WRITE_LOCKED_COUNTERS`` of ``buffer``: trajrl gives
    them no lock of their own, so that a killed worker cannot block the learner's reads."""
    for part, name in WRITE_LOCKED_COUNTERS:
        yield getattr(buffer, part), name


def sampler_rng(sampler: Any) -> Any:
    """The generator a sampler draws with (``Sampler._rng``, set by ``buffer.set_rng``; None:
    torch's default one): trajrl's samplers draw with it as TorchRL's do."""
    return sampler._rng


# ---------------------------------------------------------------- TorchRL: collectors
class EpisodeAssemblyOverride:
    """Mixin for TorchRL's single-process ``Collector``: with ``trajs_per_batch`` and a replay
    buffer, its complete-episode writes are assembled by ``self.new_episode_assembly()`` (an
    object with ``add(steps) -> episodes``, ``drop(traj_ids)`` and ``clear()``) instead of
    TorchRL's one trajectory at a time. It overrides the collector's private
    ``_iter_by_trajectories``, ``_drop_partial_trajectories`` and ``_flush_trajectory_assembly``
    and reads its ``_ignore_rb`` and ``_discards_in_flight_trajectories()``. TorchRL could own
    this: a trajectory assembler given to the collector, or its own assembly done in bulk."""

    _under_way: Any = None

    def new_episode_assembly(self) -> Any:
        """The object that assembles episodes for one iteration (see the class)."""
        raise NotImplementedError

    def _iter_by_trajectories(self) -> Iterator[Any]:
        rb = getattr(self, "replay_buffer", None)
        if rb is None or getattr(self, "_ignore_rb", True):
            yield from super()._iter_by_trajectories()
            return
        self._ignore_rb = True  # iterator() must not write the raw rollouts
        self._under_way = self.new_episode_assembly()
        try:
            for batch in self.iterator():
                if batch is None:
                    continue
                episodes = self._under_way.add(batch.reshape(-1))
                if self._discards_in_flight_trajectories():
                    self._under_way.clear()
                if episodes.shape[0]:
                    rb.extend(episodes)
                yield
        finally:
            self._ignore_rb = False

    def _drop_partial_trajectories(self, traj_ids: list[int]) -> None:
        """A partial reset abandons these episodes under way."""
        if self._under_way is not None:
            self._under_way.drop(traj_ids)
        super()._drop_partial_trajectories(traj_ids)

    def _flush_trajectory_assembly(self) -> None:
        """A reset abandons the episodes under way (TorchRL's contract)."""
        if self._under_way is not None:
            self._under_way.clear()
        super()._flush_trajectory_assembly()


def collector_thread(collector: Any) -> Any:
    """The thread a single-process collector runs in when started (``_thread``; None: not
    started so): its exception is only printed, so trajrl watches for it."""
    return getattr(collector, "_thread", None)


def collector_stopping(collector: Any) -> bool:
    """Whether a single-process collector was asked to stop (``_stop``): its thread ending then
    is no failure."""
    return getattr(collector, "_stop", False)


def collector_replay_error(collector: Any) -> BaseException | None:
    """The error ``AsyncBatchedCollector``'s writer thread kept (``_replay_error``; None: none),
    which it does not raise."""
    return getattr(collector, "_replay_error", None)


def weight_sync_schemes(collector: Any) -> dict:
    """A collector's weight-sync schemes (``_weight_sync_schemes``; empty: none): TorchRL leaves
    shutting them down to ``__del__``, which can hang at interpreter exit."""
    return getattr(collector, "_weight_sync_schemes", None) or {}


# ---------------------------------------------------------------- TorchRL: environments
def gym_env(wrapper: Any) -> Any:
    """The gymnasium environment inside TorchRL's ``GymWrapper`` (``_env``): the lean stepping
    path steps it directly."""
    return wrapper._env


def gym_step_output(wrapper: Any, output: tuple) -> tuple:
    """A gymnasium ``step`` result as TorchRL's ``GymWrapper`` reads it (``_output_transform``):
    ``(obs, reward, terminated, truncated, done, info)``, whichever gym API the env speaks."""
    return wrapper._output_transform(output)


# ---------------------------------------------------------------- tensordict
class WriteOutputsWithSet:
    """Mixin for tensordict's ``TensorDictModule`` (``KeyedModule``): its private
    ``_write_to_tensordict`` overridden to write each output tensor with ``set``, where
    tensordict 0.14 passes every output through ``TensorDict.from_any`` (a pandas lookup each
    call: on a policy's per-step path, as costly as the network)."""

    def _write_to_tensordict(self, tensordict, tensors, tensordict_out=None, out_keys=None):
        out_keys = self.out_keys_source if out_keys is None else out_keys
        if tensordict_out is None:
            if self.inplace is True:
                tensordict_out = tensordict
            elif self.inplace == "empty":
                tensordict_out = tensordict.empty()
            else:
                from tensordict import TensorDict  # here: importing this module loads no torch

                tensordict_out = TensorDict()
        if len(tensors) != len(out_keys):
            raise RuntimeError(f"{len(tensors)} outputs for out_keys {out_keys}")
        for key, tensor in zip(out_keys, tensors):
            if key != "_":
                tensordict_out.set(key, tensor)
        return tensordict_out


# ---------------------------------------------------------------- torch
class StateDictDefaults:
    """Mixin for ``torch.nn.Module``: entries an older checkpoint lacks are given
    ``self.state_dict_defaults()`` before it loads, and those it holds that the module no longer has
    (``self.state_dict_retired()``) are dropped, through torch's private ``_load_from_state_dict``
    (the one place a module sees the prefix of its own entries)."""

    def state_dict_defaults(self) -> dict:
        """Each entry (its name in this module) a checkpoint may lack, and its value then."""
        return {}

    def state_dict_retired(self) -> tuple[str, ...]:
        """Each entry (its name in this module) an older checkpoint may hold that nothing reads now."""
        return ()

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs):
        for name, value in self.state_dict_defaults().items():
            state_dict.setdefault(prefix + name, value)
        for name in self.state_dict_retired():
            state_dict.pop(prefix + name, None)
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)


def foreach_copy_(targets: list, sources: list) -> None:
    """Copy each tensor of ``sources`` into ``targets`` in one call (``torch._foreach_copy_``):
    a target network's every parameter at once."""
    import torch

    torch._foreach_copy_(targets, sources)


def foreach_lerp_(targets: list, sources: list, weight: float) -> None:
    """``target += weight * (source - target)`` for each pair in one call
    (``torch._foreach_lerp_``): Polyak averaging of a target network."""
    import torch

    torch._foreach_lerp_(targets, sources, weight)


# ---------------------------------------------------------------- OmegaConf
def config_flag(cfg: Any, name: str) -> bool | None:
    """A flag of trajrl's own set on a config node (``_get_flag``; None: not set): marks a
    config as checked, and travels with it (OmegaConf has no public custom flags)."""
    return cfg._get_flag(name)


def set_config_flag(cfg: Any, name: str, value: bool) -> None:
    """Set a flag of trajrl's own on a config node (``_set_flag``)."""
    cfg._set_flag(name, value)


# ---------------------------------------------------------------- multiprocessing, atexit
def in_a_collector_worker() -> bool:
    """Whether this process is a worker of TorchRL's multi-process collectors (the process whose
    target, ``Process._target``, is ``torchrl.collectors._runner._main_async_collector``)."""
    target = getattr(multiprocessing.current_process(), "_target", None)
    return getattr(target, "__name__", None) == "_main_async_collector"


def run_multiprocessing_finalizers() -> None:
    """What multiprocessing does at exit, done now (``util._run_finalizers(0)``): semaphores
    still open are unlinked and struck off the resource tracker's list before it stops."""
    multiprocessing.util._run_finalizers(0)


def use_fork_server(start: Callable[[], tuple[int, str, int]]) -> None:
    """Unless a fork server of this process is running: ``start()`` starts one and returns its pid,
    its socket's address and the write end of its "alive" pipe, which multiprocessing then sends
    requests to (``forkserver._forkserver``: ``_lock``, ``_forkserver_pid``, ``_forkserver_address``,
    ``_forkserver_alive_fd``, set as ``ForkServer.ensure_running`` sets them after its own start, a
    new interpreter, which has no public alternative)."""
    server = forkserver._forkserver
    with server._lock:
        if server._forkserver_pid is not None:
            if os.waitpid(server._forkserver_pid, os.WNOHANG)[0] == 0:
                return  # running
            os.close(server._forkserver_alive_fd)
            server._forkserver_pid = server._forkserver_address = server._forkserver_alive_fd = None
        server._forkserver_pid, server._forkserver_address, server._forkserver_alive_fd = start()


def end_fork_server(end: Callable[[int | None, int | None], None]) -> None:
    """Under the fork server's lock, ``end(pid, alive_fd)`` (``forkserver._forkserver``: its
    ``_lock``, ``_forkserver_pid``, ``_forkserver_alive_fd``), then forget both so that a later
    ``ensure_running()`` starts a new one: multiprocessing's own ``_stop()`` waits without a limit."""
    server = forkserver._forkserver
    with server._lock:
        end(server._forkserver_pid, server._forkserver_alive_fd)
        server._forkserver_pid = server._forkserver_alive_fd = None


def end_resource_tracker(end: Callable[[int | None, int | None], None]) -> None:
    """Under the resource tracker's lock, ``end(pid, fd)`` (``resource_tracker._resource_tracker``:
    its ``_lock``, ``_pid``, ``_fd``), then forget both: it stops once no process holds its pipe."""
    tracker = resource_tracker._resource_tracker
    with tracker._lock:
        end(tracker._pid, tracker._fd)
        tracker._pid = tracker._fd = None


def run_exit_handlers() -> None:
    """Run the ``atexit`` handlers now (``atexit._run_exitfuncs``; the one public way is the
    interpreter's exit itself): the CLI ends with ``os._exit`` right after."""
    atexit._run_exitfuncs()
