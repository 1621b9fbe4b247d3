"""One test per private internal of a dependency that trajrl relies on (``trajrl/base/internals.py``):
each fails, naming the internal and the installed versions, where it is gone or has changed
shape (an attribute missing, a signature changed, a hook no longer called). Fast: no process
started, no training; the objects are the smallest that hold the internal."""

from __future__ import annotations

import contextlib
import inspect
import multiprocessing
import platform
from collections.abc import Iterator
from multiprocessing import forkserver, resource_tracker
from multiprocessing.sharedctypes import SynchronizedBase

import gymnasium as gym
import pytest
import tensordict
import torch
import torchrl
from omegaconf import OmegaConf
from tensordict import TensorDict
from tensordict.nn import TensorDictModule
from torch import nn
from torchrl.collectors import Collector
from torchrl.data import LazyTensorStorage, RoundRobinWriter, TensorDictReplayBuffer
from torchrl.data.replay_buffers.samplers import Sampler
from torchrl.data.replay_buffers.writers import Writer
from torchrl.envs import EnvBase, GymWrapper, Transform

from trajrl.base import internals

VERSIONS = (
    f"torchrl {torchrl.__version__}, tensordict {tensordict.__version__}, torch {torch.__version__}, "
    f"Python {platform.python_version()}"
)


@contextlib.contextmanager
def internal(name: str) -> Iterator[None]:
    """Fail with one clear line where the block finds the internal ``name`` gone or changed."""
    try:
        yield
    except Exception as err:  # an assertion, a missing attribute, a changed signature: all mean the same
        message = (
            f"private internal {name} is gone or has changed shape under {VERSIONS}: "
            f"{type(err).__name__}: {err}. trajrl relies on it (trajrl/base/internals.py says why): "
            "adapt trajrl/base/internals.py to the new version"
        )
        raise pytest.fail.Exception(message, pytrace=False) from None


def parameters(function) -> list[str]:
    return list(inspect.signature(function).parameters)


def steps(n: int, start: int = 0) -> TensorDict:
    return TensorDict({"obs": torch.arange(start, start + n, dtype=torch.float32).unsqueeze(-1)}, [n])


def buffer(capacity: int = 10, shared: bool = False, **kwargs) -> TensorDictReplayBuffer:
    return TensorDictReplayBuffer(storage=LazyTensorStorage(capacity), shared=shared, **kwargs)


# ---------------------------------------------------------------- TorchRL: replay buffers
def test_writer_storage():
    with internal("Writer._storage (writer_storage)"):
        rb = buffer()
        assert internals.writer_storage(rb.writer) is rb.storage, "not the buffer's storage"


def test_writer_counts():
    with internal("RoundRobinWriter._cursor and ._write_count (writer_cursor, writer_write_count, set_writer_counts)"):
        rb = buffer(capacity=4)
        rb.extend(steps(3))
        rb.extend(steps(3))
        assert internals.writer_cursor(rb.writer) == 2, "the cursor is not where the next write begins"
        assert internals.writer_write_count(rb.writer) == 6 == rb.write_count, "the count is not the steps written"
        internals.set_writer_counts(rb.writer, 1, 9)
        assert (internals.writer_cursor(rb.writer), rb.write_count) == (1, 9), "setting the counts did not hold"
        index = rb.extend(steps(1))
        assert int(index.reshape(-1)[0]) == 1, "a write does not begin at the cursor set"


def test_add_to_write_count():
    with internal("RoundRobinWriter._write_count += (add_to_write_count)"):
        rb = buffer()
        rb.extend(steps(2))
        internals.add_to_write_count(rb.writer, 5)
        assert rb.write_count == 7, "the buffer's write_count does not read the count added to"


def test_storage_length():
    with internal("TensorStorage._len (storage_length, set_storage_length)"):
        rb = buffer()
        rb.extend(steps(4))
        assert internals.storage_length(rb.storage) == 4 == len(rb.storage)
        internals.set_storage_length(rb.storage, 2)
        assert len(rb.storage) == 2 and len(rb) == 2, "len() does not read the length set"


def test_storage_contents():
    with internal("TensorStorage._storage (storage_contents)"):
        rb = buffer(capacity=6)
        rb.extend(steps(3))
        stored = internals.storage_contents(rb.storage)
        assert isinstance(stored, tensordict.TensorDictBase), f"a {type(stored).__name__}, not a tensordict"
        assert stored.shape == (6,), f"shape {tuple(stored.shape)}, not the capacity (6,)"
        stored.get("obs")[1] = 42.0
        assert float(rb.storage[1].get("obs")) == 42.0, "not the storage's own tensors (a copy)"


def test_init_storage():
    with internal("TensorStorage._init (init_storage)"):
        assert parameters(LazyTensorStorage._init)[:2] == ["self", "data"], parameters(LazyTensorStorage._init)
        storage = LazyTensorStorage(8, ndim=2)
        internals.init_storage(storage, TensorDict({"obs": torch.zeros(2, 3)}, [2]))
        assert storage.initialized, "the storage is not initialized"
        assert internals.storage_contents(storage).shape == (4, 2), "not laid out as [capacity / lanes, lanes]"


def test_saved_storage_contents():
    with internal('ReplayBuffer.state_dict()["_storage"]["_storage"] (saved_storage_contents)'):
        rb = buffer(capacity=5)
        rb.extend(steps(2))
        saved = internals.saved_storage_contents(rb.state_dict())
        assert saved["obs"].shape == (5, 1), f"the saved tensors' shape: {saved['obs'].shape}"


def test_with_written_rows_only():
    with internal('ReplayBuffer.state_dict()["_storage"]["_len"] (with_written_rows_only)'):
        rb = buffer(capacity=5)
        rb.extend(steps(2))
        saved = internals.saved_storage_contents(internals.with_written_rows_only(rb.state_dict()))
        assert saved["obs"].shape == (2, 1), f"the written rows' shape: {saved['obs'].shape}"


def test_buffer_locks():
    with internal("ReplayBuffer._write_lock and ._replay_lock (write_lock, replay_lock)"):
        shared, local = buffer(shared=True), buffer()
        assert hasattr(internals.write_lock(shared), "acquire"), "a shared buffer's write lock is no lock"
        assert not hasattr(internals.write_lock(local), "acquire"), "an unshared buffer's lock is a real lock"
        for rb in (shared, local):
            with internals.replay_lock(rb), internals.write_lock(rb):
                pass


def test_write_locked_counters():
    with internal("RoundRobinWriter._cursor_value, ._write_count_value, TensorStorage._len_value"):
        rb = buffer(shared=True)
        for owner, name in internals.write_locked_counters(rb):
            value = getattr(owner, name)  # there from the buffer's construction on
            assert isinstance(value, SynchronizedBase), f"{type(owner).__name__}.{name} is a {type(value).__name__}"
        writer = rb.writer
        writer._cursor_value = multiprocessing.Value("i", 3, lock=False)  # as counters_without_locks does
        assert internals.writer_cursor(writer) == 3, "the cursor is not read from _cursor_value"


def test_sampler_rng():
    with internal("Sampler._rng (sampler_rng)"):
        rb = buffer()
        assert internals.sampler_rng(rb.sampler) is None
        generator = torch.Generator()
        rb.set_rng(generator)
        assert internals.sampler_rng(rb.sampler) is generator, "set_rng does not reach the sampler's generator"


# ---------------------------------------------------------------- TorchRL: collectors
class Spy(internals.EpisodeAssemblyOverride, Collector):
    """The override of ``EpisodeCollector``, recording what the collector calls."""

    def new_episode_assembly(self):
        return Recorder()


class Recorder:
    def __init__(self) -> None:
        self.calls: list[str] = []

    def add(self, steps: TensorDict) -> TensorDict:
        self.calls.append("add")
        return steps[:0]

    def drop(self, traj_ids) -> None:
        self.calls.append("drop")

    def clear(self) -> None:
        self.calls.append("clear")


def cartpole():
    return GymWrapper(gym.make("CartPole-v1"))


def test_episode_assembly_override():
    name = (
        "Collector._iter_by_trajectories, ._drop_partial_trajectories, ._flush_trajectory_assembly, "
        "._ignore_rb, ._discards_in_flight_trajectories (EpisodeAssemblyOverride)"
    )
    with internal(name):
        for method, expected in [
            ("_iter_by_trajectories", ["self"]),
            ("_drop_partial_trajectories", ["self", "traj_ids"]),
            ("_flush_trajectory_assembly", ["self"]),
            ("_discards_in_flight_trajectories", ["self"]),
        ]:
            found = parameters(getattr(Collector, method))
            assert found == expected, f"{method}{found}"
        rb = buffer(capacity=100)
        collector = Spy(cartpole, None, frames_per_batch=8, total_frames=16, trajs_per_batch=2, replay_buffer=rb)
        try:
            assert collector._ignore_rb is False, f"_ignore_rb is {collector._ignore_rb!r} with trajs_per_batch"
            assert isinstance(collector._discards_in_flight_trajectories(), bool)
            next(iter(collector))
            assembly = collector._under_way
            assert assembly is not None and "add" in assembly.calls, "_iter_by_trajectories was not called"
            collector.reset()
            assert "clear" in assembly.calls, "reset() did not call _flush_trajectory_assembly"
        finally:
            collector.shutdown()


def test_collector_thread_and_stop():
    with internal("Collector._thread, ._stop (collector_thread, collector_stopping)"):
        source = inspect.getsource(Collector.start)
        assert "self._thread =" in source and "self._stop = False" in source, "start() sets neither"
        assert "self._stop = True" in inspect.getsource(Collector.async_shutdown), "async_shutdown() does not set it"
        collector = Collector(cartpole, None, frames_per_batch=4, total_frames=8)
        try:
            assert internals.collector_thread(collector) is None and not internals.collector_stopping(collector)
        finally:
            collector.shutdown()


def test_collector_replay_error():
    with internal("AsyncBatchedCollector._replay_error (collector_replay_error)"):
        from torchrl.collectors import AsyncBatchedCollector

        assert "self._replay_error = exc" in inspect.getsource(AsyncBatchedCollector), "no longer kept there"


def test_weight_sync_schemes():
    with internal("Collector._weight_sync_schemes (weight_sync_schemes)"):
        from torchrl.collectors import MultiCollector

        for cls in (Collector, MultiCollector):
            assert "self._weight_sync_schemes =" in inspect.getsource(cls), f"{cls.__name__} keeps none there"
        collector = Collector(cartpole, None, frames_per_batch=4, total_frames=8)
        try:
            schemes = internals.weight_sync_schemes(collector)
            assert isinstance(schemes, dict), f"a {type(schemes).__name__}"
            assert all(hasattr(scheme, "shutdown") for scheme in schemes.values()), "a scheme has no shutdown()"
        finally:
            collector.shutdown()


# ---------------------------------------------------------------- TorchRL: environments
def test_gym_env_and_step_output():
    with internal("GymWrapper._env, ._output_transform (gym_env, gym_step_output)"):
        env = cartpole()
        inner = internals.gym_env(env)
        assert isinstance(inner, gym.Env), f"a {type(inner).__name__}, not the gymnasium environment"
        inner.reset(seed=0)
        out = internals.gym_step_output(env, inner.step(0))
        assert len(out) == 6, f"{len(out)} values, not (obs, reward, terminated, truncated, done, info)"
        obs, reward, terminated, truncated, done, info = out
        assert obs.shape == (4,) and isinstance(info, dict)
        env.close()


# ---------------------------------------------------------------- tensordict
def test_write_outputs_with_set():
    with internal("TensorDictModule._write_to_tensordict (WriteOutputsWithSet)"):
        expected = ["self", "tensordict", "tensors", "tensordict_out", "out_keys"]
        assert parameters(TensorDictModule._write_to_tensordict) == expected, parameters(
            TensorDictModule._write_to_tensordict
        )

        class Module(internals.WriteOutputsWithSet, TensorDictModule):
            calls = 0

            def _write_to_tensordict(self, *args, **kwargs):
                Module.calls += 1
                return super()._write_to_tensordict(*args, **kwargs)

        module = Module(nn.Linear(2, 3), ["x"], ["y"])
        out = module(TensorDict({"x": torch.ones(4, 2)}, [4]))
        assert Module.calls == 1, "the module's forward does not write through _write_to_tensordict"
        assert out.get("y").shape == (4, 3)


# ---------------------------------------------------------------- torch
def test_state_dict_defaults():
    with internal("torch.nn.Module._load_from_state_dict (StateDictDefaults)"):
        expected = ["self", "state_dict", "prefix", "local_metadata", "strict", "missing_keys", "unexpected_keys"]
        assert parameters(nn.Module._load_from_state_dict)[:7] == expected, parameters(nn.Module._load_from_state_dict)

        class Counted(internals.StateDictDefaults, nn.Module):
            def __init__(self):
                super().__init__()
                self.register_buffer("count", torch.tensor(5))

            def state_dict_defaults(self) -> dict:
                return {"count": torch.tensor(0)}

        outer = nn.Sequential(Counted())
        outer.load_state_dict({})  # an older checkpoint without the count: strict, yet no key missing
        assert int(outer[0].count) == 0, "the default was not loaded"


def test_foreach_copy_and_lerp():
    with internal("torch._foreach_copy_, torch._foreach_lerp_ (foreach_copy_, foreach_lerp_)"):
        targets, sources = [torch.zeros(3), torch.zeros(2)], [torch.ones(3), torch.full((2,), 4.0)]
        internals.foreach_lerp_(targets, sources, 0.25)
        assert torch.equal(targets[1], torch.full((2,), 1.0)), targets
        internals.foreach_copy_(targets, sources)
        assert all(torch.equal(t, s) for t, s in zip(targets, sources)), targets


# ---------------------------------------------------------------- OmegaConf
def test_config_flag():
    with internal("omegaconf Node._get_flag, ._set_flag (config_flag, set_config_flag)"):
        cfg = OmegaConf.create({"a": {"b": 1}})
        assert internals.config_flag(cfg, "trajrl_test") is None, "an unset flag does not read None"
        internals.set_config_flag(cfg, "trajrl_test", True)
        OmegaConf.set_readonly(cfg, True)
        assert internals.config_flag(cfg, "trajrl_test") is True, "the flag set does not read back"


# ---------------------------------------------------------------- multiprocessing, atexit
def test_run_multiprocessing_finalizers():
    with internal("multiprocessing.util._run_finalizers (run_multiprocessing_finalizers)"):
        # not called: it would run this process's finalizers
        assert parameters(multiprocessing.util._run_finalizers) == ["minpriority"]


def test_use_fork_server(monkeypatch):
    """With no server running, what ``start()`` returns (under the lock) is what multiprocessing sends requests to."""
    with internal("multiprocessing.forkserver._forkserver: _lock, _forkserver_pid, _forkserver_address, ..."):
        server = forkserver.ForkServer()  # not started: this process's own is left as it is
        for name in ("_lock", "_forkserver_pid", "_forkserver_address", "_forkserver_alive_fd"):
            assert hasattr(server, name), f"ForkServer has no {name}"
        assert parameters(forkserver.main)[:3] == ["listener_fd", "alive_r", "preload"], "forkserver.main changed"
        monkeypatch.setattr(forkserver, "_forkserver", server)
        started = (12345, "/an/address", 67)
        internals.use_fork_server(lambda: started if server._lock.locked() else pytest.fail("started unlocked"))
        assert (server._forkserver_pid, server._forkserver_address, server._forkserver_alive_fd) == (
            12345,
            "/an/address",
            67,
        ), "multiprocessing would not use the server started"


def test_end_fork_server(monkeypatch):
    with internal("multiprocessing.forkserver._forkserver: _lock, _forkserver_pid, _forkserver_alive_fd"):
        server = forkserver.ForkServer()  # not started: this process's own is left as it is
        for name in ("_lock", "_forkserver_pid", "_forkserver_alive_fd"):
            assert hasattr(server, name), f"ForkServer has no {name}"
        assert hasattr(forkserver, "_forkserver"), "no forkserver._forkserver"
        server._forkserver_pid, server._forkserver_alive_fd = 12345, 67
        monkeypatch.setattr(forkserver, "_forkserver", server)
        seen = []
        internals.end_fork_server(lambda pid, fd: seen.append((pid, fd, server._lock.locked())))
        assert seen == [(12345, 67, True)], f"end() saw {seen}"
        assert (server._forkserver_pid, server._forkserver_alive_fd) == (None, None), "the server is not forgotten"


def test_end_resource_tracker(monkeypatch):
    with internal("multiprocessing.resource_tracker._resource_tracker: _lock, _pid, _fd"):
        tracker = resource_tracker.ResourceTracker()  # not started
        for name in ("_lock", "_pid", "_fd"):
            assert hasattr(tracker, name), f"ResourceTracker has no {name}"
        assert hasattr(resource_tracker, "_resource_tracker"), "no resource_tracker._resource_tracker"
        tracker._pid, tracker._fd = 12345, 67
        monkeypatch.setattr(resource_tracker, "_resource_tracker", tracker)
        seen = []
        internals.end_resource_tracker(lambda pid, fd: seen.append((pid, fd)))
        assert seen == [(12345, 67)], f"end() saw {seen}"
        assert (tracker._pid, tracker._fd) == (None, None), "the tracker is not forgotten"


def test_run_exit_handlers():
    import atexit

    with internal("atexit._run_exitfuncs (run_exit_handlers)"):
        assert callable(atexit._run_exitfuncs)  # not called: it would run this process's exit handlers


# ---------------------------------------------------------------- documented extension hooks
@pytest.mark.parametrize(
    "cls, hook",
    [
        (EnvBase, "_step"),
        (EnvBase, "_reset"),
        (EnvBase, "_set_seed"),
        (Transform, "_step"),
        (Transform, "_reset"),
        (Transform, "_inv_call"),
        (Writer, "_empty"),
        (Sampler, "_empty"),
    ],
)
def test_extension_hooks(cls, hook):
    """The hooks TorchRL's base classes document for subclasses, which trajrl's override."""
    with internal(f"{cls.__name__}.{hook} (a hook trajrl's subclasses override)"):
        assert callable(getattr(cls, hook)), f"{cls.__name__} has no {hook}"
        if cls in (Writer, Sampler):
            assert hook in cls.__abstractmethods__, f"{hook} is no longer one of {cls.__name__}'s abstract methods"


def test_round_robin_writer_empty():
    with internal("RoundRobinWriter._empty(empty_write_count) (LaneWriter's _empty calls it)"):
        assert parameters(RoundRobinWriter._empty) == ["self", "empty_write_count"], parameters(RoundRobinWriter._empty)
