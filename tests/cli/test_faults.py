"""Training through faults, with real worker processes: an environment that raises is
rebuilt, its episode dropped and counted, and the run goes on to ``total_frames`` with
every frame accounted for against the environments' own counts (``counted_envs``; runs
trained in the test's process: what they write and print); a killed worker is replaced, and
a write it left half done redone whole; a disk that fills while a checkpoint is written ends
the run and keeps the checkpoint before (``helpers.Trained.failed_with``: the line and exit
code the CLI's own ``one_line`` gives the error). Past ``collector.max_restarts`` the
environment's error ends the run: test_failures.py."""

import os
import signal
import time

import pytest
import torch
from counted_envs import assert_the_frames_add_up, counted, flaky, stepped
from helpers import episodes, rows_of, zero_padded

from trajrl.base.keys import TRAJ_KEY
from trajrl.collect.faults import NEXT_FAULT, without_faulted


def marked(flat, faulted_ids):
    flat.set(NEXT_FAULT, torch.isin(flat[TRAJ_KEY], torch.tensor(faulted_ids)) & flat["next", "done"].squeeze(-1))
    return flat


def test_episodes_a_fault_ended_are_dropped_flat_or_padded():
    flat = marked(episodes([3, 4, 2, 5]), [1, 3])
    kept = without_faulted(flat)
    assert kept[TRAJ_KEY].unique().tolist() == [0, 2] and kept.shape[0] == 5
    assert NEXT_FAULT not in kept.keys(True) and "env_fault" not in kept.keys()
    padded = zero_padded(marked(episodes([3, 4, 2, 5]), [0]))
    assert without_faulted(padded)[TRAJ_KEY][:, 0].tolist() == [1, 2, 3]
    assert without_faulted(marked(episodes([3]), [0])) is None  # nothing left: nothing written


# An environment in a worker process (multi_async; multi_sync and async, -m slow, wrap it
# the same way), in an environment process of its own (async_batched), under PPO's loop,
# and writing fixed frames (its episode is stored up to the fault, not lost).
@pytest.mark.parametrize(
    "algo, collector",
    [
        ("r2d2", "multi_async"),
        pytest.param("r2d2", "multi_sync", marks=pytest.mark.slow),
        pytest.param("r2d2", "async", marks=pytest.mark.slow),
        ("r2d2", "async_batched"),
        ("ppo", "multi_sync"),
        ("r2d2", "multi_async trajs_per_batch=null"),
    ],
)
def test_environments_that_raise_are_rebuilt_and_the_run_reaches_total_frames(algo, collector, train_in, tmp_path):
    """Trained in the test's process (what the run does and writes is the point; the CLI
    around a failing run: test_failures.py's test_an_environment_that_raises_past_max_restarts_ends_the_run).
    Its accounting against the environments' own counts: the frames they stepped, those the
    buffer holds, the frames of the episodes the faults cut (fixed frames: stored, none lost)."""
    counts = tmp_path / "counts"
    run = train_in(
        *flaky(counts, every=150),
        f"algo={algo}",
        f"collector={collector.split()[0]}",
        *collector.split()[1:],
        "collector.max_restarts=50",
        "total_frames=1200",
    )
    fixed_frames = "trajs_per_batch=null" in collector
    run.train()  # returns: the run reached its end
    out = run.out
    faults = sum(len(p.fault_episodes) for p in stepped(counts).values())
    last = rows_of(run.dir)[-1]
    assert faults >= 4 and last["collect/env_restarts"] == faults, (faults, last)
    assert last["frames"] >= 1200
    assert last["audit/violations"] == 0 and last["audit/batches_checked"] >= 2
    if algo != "ppo":
        figures = assert_the_frames_add_up(run.dir, counts, faults_stored=fixed_frames)
        assert (figures["lost"] == 0) if fixed_frames else figures["lost"] > 0, figures
    else:  # its episodes go to the learner, not into a buffer the checkpoint holds
        processes = stepped(counts).values()
        assert last["collect/frames_stepped"] == sum(p.frames for p in processes), last
        assert last["collect/frames_lost_to_faults"] == sum(sum(p.fault_episodes) for p in processes), last
    assert f"restarts        {faults} (collection went on" in out, out[-2000:]
    assert (
        sum(line.startswith("  environment ") and "RuntimeError: flaky" in line for line in out.splitlines()) == faults
    )
    run.assert_nothing_left()
    run.assert_checkpoint_loads()


# multi_async, multi_sync and async run by default in the test below, killed inside a write
# (the same restart, and the write redone); killed anywhere with -m slow.
@pytest.mark.parametrize(
    "collector",
    [pytest.param(c, marks=pytest.mark.slow) for c in ("multi_async", "multi_sync", "async")]
    + ["async_batched collector.env_backend=multiprocessing", "multi_sync algo=ppo"],
)
def test_a_killed_worker_is_replaced_and_the_run_reaches_total_frames(collector, train_in, tmp_path):
    """SIGKILL to a worker process mid-run (for async_batched: one of its environment
    processes): a new collector starts with the current weights, what the old one had
    in flight is counted lost, and the frame accounting closes against the environments'
    own counts: every frame the old collector's processes stepped and did not store is lost.
    (Trained in the test's process; a killed worker that ends a run through the CLI: test_failures.py.)"""
    counts = tmp_path / "counts"
    run = train_in(
        *counted(counts),
        f"collector={collector.split()[0]}",
        *collector.split()[1:],
        "collector.max_restarts=3",
        "audit=true",
        "audit_every=1",
        "loop.eval_episodes=0",
        "storage.capacity=4000",  # never wraps: the checkpoint holds every step stored
        "loop.checkpoint_every_frames=300",  # the worker killed once the first is saved: 900 frames to go
        "total_frames=1200",
    )
    retired = set()

    def kill_a_worker():
        run.wait_for_checkpoint()
        workers = run.workers()
        assert workers, "no worker process to kill"
        retired.update(stepped(counts))  # the processes of the collector the kill ends
        os.kill(workers[0], signal.SIGKILL)

    run.train_while(kill_a_worker)  # returns: the run reached its end
    last = rows_of(run.dir)[-1]
    assert last["collect/worker_restarts"] == 1 and last["collect/env_restarts"] == 0, last
    assert last["frames"] >= 1200
    assert last["audit/violations"] == 0 and last["audit/batches_checked"] >= 2
    processes = stepped(counts)
    assert retired and set(processes) > retired, (retired, processes)  # the new collector's processes stepped too
    if "algo=ppo" in collector:  # its episodes go to the learner, not into a buffer the checkpoint holds
        # a retired process's last step may be counted here and never handed back: a frame the run cannot see
        assert 0 <= sum(p.frames for p in processes.values()) - last["collect/frames_stepped"] <= len(retired), last
        assert 0 <= last["collect/frames_lost_to_faults"] <= sum(processes[k].frames for k in retired), last
    else:
        assert_the_frames_add_up(run.dir, counts, retired=retired)
    assert "restarts        1 (collection went on" in run.out, run.out[-2000:]
    named = "  collector at " if collector.startswith("async_batched") else "(exit code -9)"  # its pool's thread fails
    assert named in run.out, run.out[-2000:]
    run.assert_nothing_left()
    run.assert_checkpoint_loads()


# multi_sync and async: the same writer and redo as multi_async
# (test_a_write_a_killed_worker_left_half_done_is_redone_whole covers the redo itself),
# run with -m slow; fixed frames: the lane writer's
@pytest.mark.parametrize(
    "collector",
    [
        "multi_async",
        pytest.param("multi_sync", marks=pytest.mark.slow),
        pytest.param("async", marks=pytest.mark.slow),
        "multi_async trajs_per_batch=null",
    ],
)
def test_a_worker_killed_inside_its_write_is_replaced_and_its_write_redone_whole(collector, train_in, tmp_path):
    """SIGKILL to a worker while it writes into the shared buffer (its journal in place,
    the write lock held): the lock is freed, its write redone whole (its steps counted
    stored, not lost), and the run goes on with a new collector. (``async_batched`` writes
    from the learner's process, under its thread: its environment processes never hold the
    lock.) Trained in the test's process."""
    counts = tmp_path / "counts"
    run = train_in(
        *counted(counts, "width=5000"),  # writes of a few MB: milliseconds each, caught by kill_a_worker_writing
        "algo.normalize_observations=false",
        f"collector={collector.split()[0]}",
        *collector.split()[1:],
        "collector.max_restarts=3",
        "audit=true",
        "audit_every=1",
        "loop.eval_episodes=0",
        "storage.capacity=2000",  # never wraps: the checkpoint holds every step stored
        "total_frames=900",
        "loop.warmup_frames=200",
        "sampler.slices_per_batch=4",  # 5,004 numbers a step: a small batch is enough to audit and learn from
    )
    retired = set()

    def kill_a_worker_writing():
        run.kill_a_worker_writing()
        retired.update(stepped(counts))  # the killed collector's processes (its successor takes a while to start)

    run.train_while(kill_a_worker_writing)  # in the first write caught: well before the run's end
    last = rows_of(run.dir)[-1]
    assert last["collect/worker_restarts"] == 1 and last["collect/env_restarts"] == 0, last
    # The audit checks every sampled batch and, at the end, the whole buffer (the redone write in it).
    # How many batches the learner samples before the new workers reach 900 frames is up to timing:
    # forked from the fork server, they can get there while the learner makes its first update.
    assert last["frames"] >= 900 and last["audit/violations"] == 0 and last["audit/batches_checked"] >= 1
    assert retired and set(stepped(counts)) > retired, retired  # the new collector's processes stepped too
    assert_the_frames_add_up(run.dir, counts, retired=retired, lanes="trajs_per_batch=null" in collector)
    assert "its unfinished write redone" in run.out, run.out[-2000:]
    run.assert_nothing_left()
    run.assert_checkpoint_loads()


def write_into(buffer, data) -> None:
    """A collector worker's write into the shared buffer."""
    buffer.extend(data)


def big_episodes(count: int, length: int, first_id: int):
    flat = episodes([length] * count, first_id=first_id)
    flat.set("pixels", torch.rand(flat.shape[0], 256))  # large enough that a write takes a while
    return flat


@pytest.mark.parametrize("killed_once", ["its journal is written", "the storage counted its steps"])
def test_a_write_a_killed_worker_left_half_done_is_redone_whole(killed_once, tmp_path):
    """A worker SIGKILLed in the middle of its write (its journal written, the lock
    held; or later, once TorchRL's storage has added the write to its length but before
    the steps are all copied in): once it is gone, the buffer gets the whole write, at
    the same place, with fresh ids, its length counted once, and the lock back; the
    next write goes after it."""
    import multiprocessing
    import os
    import signal
    import time

    from torchrl.data import LazyTensorStorage, TensorDictReplayBuffer

    from trajrl.replay.audit import audit_storage
    from trajrl.replay.writer import EpisodeWriter, journal_path, redo_unfinished_writes

    capacity = 60_000
    buffer = TensorDictReplayBuffer(
        storage=LazyTensorStorage(capacity), writer=EpisodeWriter(tmp_path), batch_size=4, shared=True
    )
    buffer.extend(big_episodes(10, 500, first_id=0))  # 5,000 steps, ids 0-9
    interrupted = big_episodes(80, 500, first_id=0)  # 40,000 steps: ids 10-89 once written
    worker = multiprocessing.get_context("forkserver").Process(target=write_into, args=(buffer, interrupted))
    worker.start()
    os.setpriority(os.PRIO_PROCESS, worker.pid, 19)  # on a busy machine, this process still looks inside the write
    deadline = time.monotonic() + 60
    journal = journal_path(str(tmp_path), worker.pid)
    reached = {
        "its journal is written": lambda: os.path.exists(journal),
        "the storage counted its steps": lambda: len(buffer._storage) > 5_000,
    }[killed_once]
    while not reached():
        assert time.monotonic() < deadline and worker.is_alive()
        time.sleep(0.0002)
    os.kill(worker.pid, signal.SIGKILL)
    worker.join()
    assert os.path.exists(journal)  # killed inside its write

    assert redo_unfinished_writes(buffer) == 1
    assert len(buffer) == buffer.write_count == 45_000 and os.listdir(tmp_path) == []
    stored = buffer[:]
    assert torch.equal(stored["pixels"][5_000:], interrupted["pixels"])
    assert torch.equal(stored[TRAJ_KEY][5_000:], interrupted[TRAJ_KEY] + 10)
    assert audit_storage(stored, full=False) == {k: 0 for k in audit_storage(stored, full=False)}
    buffer.extend(big_episodes(2, 500, first_id=0))  # the lock is free; ids go on from 90
    assert buffer[:][TRAJ_KEY][-1].item() == 91 and len(buffer) == 46_000


def test_a_disk_that_fills_while_a_checkpoint_is_written_ends_the_run_and_keeps_the_one_before(train_in, capfd):
    """RLIMIT_FSIZE lowered under the checkpoint's size once the first one is written: the
    next one cannot be written whole; the run ends with one line, and the checkpoint
    before still loads. Trained in the test's process, its soft limit lowered (then put
    back); the CLI's line for a file it cannot write:
    test_a_run_directory_that_cannot_be_written_ends_the_run_with_one_line."""
    import resource

    run = train_in("total_frames=1000000")
    latest = run.dir / "checkpoints" / "latest.pt"
    limits = resource.getrlimit(resource.RLIMIT_FSIZE)

    def fill_the_disk():
        run.wait_for_checkpoint()
        size = latest.stat().st_size
        resource.setrlimit(resource.RLIMIT_FSIZE, (size // 2, limits[1]))

    try:
        last = run.failed_with(1, f"trajrl: run failed: {latest}: ", beside=fill_the_disk, within=90, capfd=capfd)
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, limits)
    assert "while the checkpoint was written; latest.pt still holds the checkpoint before" in last, last
    assert not latest.with_name("latest.pt.tmp").exists()
    run.assert_nothing_left()
    assert run.assert_checkpoint_loads()["frames"] > 0


def test_a_run_directory_that_cannot_be_written_ends_the_run_with_one_line(tmp_path):
    from helpers import failed_with, trajrl

    (tmp_path / "a_file").write_text("")
    proc = trajrl("debug=smoke", f"hydra.run.dir={tmp_path / 'a_file' / 'run'}", cwd=tmp_path, timeout=60)
    failed_with(
        proc,
        1,
        f"trajrl: run failed: {tmp_path / 'a_file' / 'run'}: Not a directory (the run directory must be writable",
    )


def test_a_learner_killed_with_sigkill_resumes_exactly_from_its_last_periodic_checkpoint(run_in, tmp_path):
    """SIGKILL to the run's learner mid-training (the CLI's main process alone: nothing of it
    runs to clean up): its workers exit by themselves, nothing of the run is left, and
    ``resume=`` rebuilds the learner, its optimiser and the buffer exactly as the last
    periodic checkpoint saved them; the run goes on from there to its new total. (The
    multi_async case of test_failures.py's test_sigkill_to_the_run_leaves_no_worker_behind:
    one CLI run for both.)"""
    import io

    from test_resume import assert_same_steps, stored, tensors

    import trajrl
    from trajrl.checkpoint import load_checkpoint
    from trajrl.replay.audit import audit_storage
    from trajrl.training.progress import Progress

    overrides = ["collector=multi_async", "storage.capacity=20000", "audit=true"]  # the buffer never wraps
    run = run_in(*overrides, "total_frames=1000000")
    run.wait_for_checkpoint()
    assert len(run.workers()) == 2
    time.sleep(1.0)  # past the first checkpoint
    run.proc.kill()  # the main process only
    run.end()
    run.assert_nothing_left(within=30)  # the workers, the fork server and the resource tracker ended
    run.assert_checkpoint_loads()  # the last one saved, whole (written then renamed)
    saved = load_checkpoint(run.dir)
    frames, updates = saved["frames"], saved["algo"]["updates"]
    assert frames > 0
    # the killed run's own overrides, as the CLI's resume= composes them
    resumed_with = ["debug=smoke", "loop.checkpoint_every_frames=500", *overrides, f"resume={run.dir}"]
    with trajrl.build(trajrl.compose(resumed_with)) as pipe:
        assert pipe.resumed.frames == frames == pipe.buffer.write_count
        restored, wanted = tensors(pipe.algo.state_dict()), tensors(saved["algo"])
        assert restored.keys() == wanted.keys() and all(torch.equal(restored[k], wanted[k]) for k in wanted)
        assert pipe.algo.updates == updates
        assert_same_steps(pipe.buffer[:], stored(saved["buffer"]))
    # resumed in this process (the CLI's resume= is test_resume.py's)
    trajrl.train(trajrl.compose([*resumed_with, f"total_frames={frames + 600}"]), progress=Progress(0, io.StringIO()))
    final = load_checkpoint(run.dir)
    assert final["frames"] >= frames + 600 and final["algo"]["updates"] > updates
    assert_same_steps(stored(final["buffer"])[:frames], stored(saved["buffer"]))
    assert not any(audit_storage(stored(final["buffer"]), full=False).values())
    rows = rows_of(run.dir)
    assert all(r["frames"] > frames for r in rows if r["train/updates"] > updates)


def hold_the_locks_and_wait(buffer, held) -> None:
    """A worker stopped in the middle of a write: the buffer's write lock and the locks of
    TorchRL's storage counters taken (as moving them takes them), never released."""
    from multiprocessing.sharedctypes import SynchronizedBase

    buffer._write_lock.acquire()
    for owner in (buffer._writer, buffer._storage):
        for value in vars(owner).values():
            if isinstance(value, SynchronizedBase):
                value.get_lock().acquire()
    held.set()
    time.sleep(3600)


def test_a_worker_killed_holding_the_counters_locks_blocks_neither_the_learner_nor_the_redo(tmp_path):
    """TorchRL's shared counters each have a lock of their own, which a worker SIGKILLed while
    moving one never releases: the cursor, write count and length have none in trajrl's
    buffers (they move under the write lock only), and ``redo_unfinished_writes`` replaces
    the others' (the storage's revision and last cursor) when their lock is held by no one alive."""
    import multiprocessing
    import threading

    from torchrl.data import LazyTensorStorage, TensorDictReplayBuffer

    from trajrl.replay.writer import EpisodeWriter, counters_without_locks, redo_unfinished_writes

    buffer = TensorDictReplayBuffer(
        storage=LazyTensorStorage(10_000), writer=EpisodeWriter(tmp_path), batch_size=4, shared=True
    )
    counters_without_locks(buffer)
    buffer.extend(episodes([50] * 4, first_id=0))
    context = multiprocessing.get_context("forkserver")
    held = context.Event()
    worker = context.Process(target=hold_the_locks_and_wait, args=(buffer, held))
    worker.start()
    assert held.wait(60)
    os.kill(worker.pid, signal.SIGKILL)
    worker.join()

    def redo_then_write_and_sample():
        counted.append((buffer.write_count, len(buffer)))  # what the learner reads each loop turn
        redo_unfinished_writes(buffer)
        buffer.extend(episodes([50] * 2, first_id=0))  # moves the storage's revision and last cursor
        sampled.append(buffer.sample())

    counted, sampled = [], []
    thread = threading.Thread(target=redo_then_write_and_sample, daemon=True)  # a hang fails the test
    thread.start()
    thread.join(30)
    assert counted == [(200, 200)], "a lock the dead worker held blocked reading the counts"
    assert sampled, "a lock the dead worker held blocked the redo, the next write or a sample"
    assert buffer.write_count == len(buffer) == 300 and sampled[0].shape == (4,)
