"""What goes wrong while a run trains: an environment that raises or hangs, a worker killed,
SIGINT/SIGTERM to the run, SIGKILL to the run. Each ends within 30 s (a hang: once
loop.stall_timeout_s has passed) with its cause, leaves no process behind and leaves a
checkpoint that loads.

Each way a run fails goes through the real CLI once (its exit code and one line on its
stderr, its process group empty as it returns); its other cases train in the test's process
(``helpers.Trained.failed_with``: the line and exit code the CLI's own ``one_line`` gives the
error, the processes the run started ended), where what the run does is the point. Signals
to the run, whose handlers the CLI installs, only go through the CLI."""

import multiprocessing
import os
import signal
import threading
import time
from pathlib import Path

import pytest
from counted_envs import flaky
from helpers import loop_of

import trajrl


@pytest.mark.parametrize("collector", ["sync", "multi_async", "async_batched"])
def test_an_environment_that_raises_past_max_restarts_ends_the_run(collector, run_in, train_in, tmp_path):
    """An environment whose every 300th step raises, rebuilt twice (``collector.max_restarts=2``):
    its third error ends the run with it, whether it steps in a worker process, in the
    single-process collector's thread (whose exception TorchRL only prints: the run says it in
    one line, the thread's traceback not printed) or in an environment process of its own. sync
    and multi_async through the CLI (multi_async: the line of a worker's error, after the worker's
    own report); async_batched trained in the test's process."""
    run = (run_in if collector != "async_batched" else train_in)(
        *flaky(tmp_path / "counts", every=300),
        f"collector={collector}",
        "collector.max_restarts=2",
        "total_frames=100000",
    )
    err = run.failed_with(
        1, "trajrl: run failed: collection failed", within=90, traceback=collector != "sync"
    )  # a worker's own report of its error may hold its traceback
    last = err.strip().splitlines()[-1]
    assert "raised RuntimeError: flaky: step " in last, last  # async_batched: one process steps several
    assert "its error 3 within 3600 s, past collector.max_restarts=2" in last, last
    assert collector != "sync" or "Exception in thread" not in err, err[-3000:]
    run.assert_nothing_left()
    run.assert_checkpoint_loads()


def test_an_environment_that_raises_before_collection_ends_the_run_with_one_line(run_in):
    """Standardising observations steps the environment in the learner's process first
    (collector=sync: the run fails before any collector starts; no fork server started for nothing).
    Through the CLI: its line for an environment that fails in the learner's process (the cases
    below train in the test's process)."""
    run = run_in("env=gym", "env.id=Exploding-v0", "env.import_module=bad_envs", "collector=sync")
    run.failed_with(
        1,
        "trajrl: run failed: the environment env.id=Exploding-v0 raised while trajrl measured its observations "
        "(2,000 random steps for algo.normalize_observations=true): RuntimeError: boom: the environment failed "
        "after 1000 steps",
    )
    run.assert_nothing_left()


def learner_steps_from_0() -> None:
    """FailsInTheLearner-v0 counts the steps of every instance in the learner's process: in the test's
    process, start each run's count from 0."""
    import bad_envs

    bad_envs._learner_steps = 0


def test_an_environment_that_raises_during_evaluation_ends_the_run_with_one_line(train_in, capfd):
    """Trained in the test's process (the CLI's line for an environment that fails in the learner's
    process: test_an_environment_that_raises_before_collection_ends_the_run_with_one_line)."""
    learner_steps_from_0()
    run = train_in(
        "env=gym",
        "env.id=FailsInTheLearner-v0",
        "env.import_module=bad_envs",
        "collector=multi_async",
        "algo.normalize_observations=false",
        "env.observe_time=false",  # auto plays random steps in the learner's process (test_refusals)
        "loop.eval_every_frames=1000",
    )
    run.failed_with(
        1,
        "trajrl: run failed: the environment env.id=FailsInTheLearner-v0 raised while trajrl evaluated the policy: "
        "RuntimeError: boom: the environment failed after 100 steps",
        capfd=capfd,
    )
    run.assert_nothing_left()
    run.assert_checkpoint_loads()


@pytest.mark.parametrize("case", ["measuring", "evaluating", "probing the clock"])
def test_an_environment_that_hangs_in_the_learners_process_ends_the_run(case, train_in, capfd):
    """Standardising observations, evaluating and ``env.observe_time=auto``'s random steps step the
    environment in the learner's process: a call that does not return within the stall timeout ends the run. Trained in
    the test's process (the CLI's line for an environment that fails in the learner's process:
    test_an_environment_that_raises_before_collection_ends_the_run_with_one_line)."""
    if case == "measuring":  # it hangs at its 1,001st step, within the 2,000 random steps, before any collector
        overrides = ["env.id=Hanging-v0", "+env.kwargs.after=1000", "collector=sync"]
        doing = "trajrl measured its observations"
    elif case == "evaluating":
        overrides = [
            "env.id=FailsInTheLearner-v0",
            "+env.kwargs.hang=true",
            "collector=multi_async",
            "algo.normalize_observations=false",
            "env.observe_time=false",
            "loop.eval_every_frames=1000",
        ]
        doing = "trajrl evaluated the policy"
    else:  # it hangs at its 101st step in the learner's process, within the 1,000 random steps
        overrides = ["env.id=FailsInTheLearner-v0", "+env.kwargs.hang=true", "env.observe_time=auto"]
        doing = "trajrl played 1,000 random steps for env.observe_time=auto"
    learner_steps_from_0()
    run = train_in("env=gym", "env.import_module=bad_envs", *overrides, "loop.stall_timeout_s=5")
    last = run.failed_with(1, "trajrl: run failed: the environment env.id=", within=60, capfd=capfd)
    assert "did not answer for 5 s while " + doing in last and "(loop.stall_timeout_s=5)" in last, last
    run.assert_nothing_left()


@pytest.mark.parametrize(
    "algo, collector",
    [("r2d2", "multi_async"), ("ppo", "sync"), pytest.param("ppo", "multi_sync", marks=pytest.mark.slow)],
)
def test_an_environment_that_hangs_ends_the_run_after_the_stall_timeout(algo, collector, run_in, train_in):
    """Off-policy, the loop sees no frame stored; PPO waits for a batch of complete
    episodes, in its own process (sync) or from workers (multi_sync, -m slow: the same
    wait of the episodic loop): either way the run ends. sync through the CLI (its line for
    a stalled run; the collector's thread, hung in its environment, ends with the CLI's
    process); workers' hangs trained in the test's process (the hung workers ended)."""
    run = (run_in if collector == "sync" else train_in)(
        "env=gym",
        "env.id=Hanging-v0",
        "+env.kwargs.after=1000",
        "env.import_module=bad_envs",
        "algo.normalize_observations=false",
        f"algo={algo}",
        f"collector={collector}",
        "total_frames=100000",
        "loop.stall_timeout_s=5",
    )
    err = run.failed_with(1, "trajrl: run failed: no ", within=90, traceback=True)
    assert "for 5 s (loop.stall_timeout_s=5)" in err.strip().splitlines()[-1], err[-3000:]
    run.assert_nothing_left()
    run.assert_checkpoint_loads()


def stuck_worker() -> None:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # as a worker stuck in its environment can be
    time.sleep(600)


def test_workers_that_do_not_stop_are_killed_after_one_wait_for_them_all():
    """``end_workers``: the workers still running ``wait_s`` after the call are killed;
    the wait is shared (with one each, 4 stuck workers would hold the run 4 times longer)."""
    from types import SimpleNamespace

    from trajrl.collect.watch import end_workers

    ctx = multiprocessing.get_context("forkserver")  # the session's (conftest.py): torch and trajrl imported once
    procs = [ctx.Process(target=stuck_worker, daemon=True) for _ in range(4)]
    for proc in procs:
        proc.start()
    time.sleep(1.0)  # each has set its signal handler
    start = time.monotonic()
    end_workers(SimpleNamespace(procs=procs), wait_s=2.0)
    took = time.monotonic() - start
    assert all(not proc.is_alive() and proc.exitcode == -signal.SIGKILL for proc in procs)
    assert took < 6.0, f"{took:.1f} s: a wait for each worker (8 s), not one for them all (2 s)"


def test_the_worker_whose_death_made_torchrl_end_the_others_is_named():
    """A worker SIGKILLed: TorchRL terminates the others (SIGTERM) and closes each 0.1 s later,
    which raises ValueError in place of its report where one is still exiting (a loaded machine).
    The run names the worker that died first (its exit code not SIGTERM's), whatever its index."""
    from types import SimpleNamespace

    from trajrl.collect.watch import CollectorWatch, death_behind

    ctx = multiprocessing.get_context("forkserver")
    procs = [ctx.Process(target=time.sleep, args=(600,), daemon=True) for _ in range(3)]
    for proc in procs:
        proc.start()
    os.kill(procs[1].pid, signal.SIGKILL)
    procs[1].join()
    procs[0].terminate()  # as TorchRL ends the others
    procs[0].join()
    watch = CollectorWatch(SimpleNamespace(procs=procs))
    try:
        with pytest.raises(ValueError, match="Cannot close a process while it is still running") as closing:
            procs[2].close()
        assert str(watch.first_death()) == "collector worker 1 died (exit code -9)"
        assert str(death_behind(closing.value, watch)) == "collector worker 1 died (exit code -9)"
        other = ValueError("an environment's own error")
        assert death_behind(other, watch) is other
    finally:
        watch.close()
        procs[2].kill()
        procs[2].join()


@pytest.mark.parametrize("collector", ["multi_async", "multi_sync"])
def test_a_killed_worker_ends_the_run_and_names_it(collector, run_in, train_in):
    """multi_async through the CLI; multi_sync (PPO's loop) trained in the test's process."""
    overrides = ["algo=ppo", "debug=smoke"] if collector == "multi_sync" else []
    run = (run_in if collector == "multi_async" else train_in)(
        f"collector={collector}", *overrides, "total_frames=1000000"
    )

    def kill_a_worker():
        run.wait_for_checkpoint()
        workers = run.workers()
        assert len(workers) == 2, workers
        os.kill(workers[1], signal.SIGKILL)

    if collector == "multi_async":  # the CLI
        kill_a_worker()
        err = run.failed_with(1, "trajrl: run failed: collection failed", within=30, traceback=True)
    else:
        err = run.failed_with(
            1, "trajrl: run failed: collection failed", beside=kill_a_worker, within=30, traceback=True
        )
    last = err.strip().splitlines()[-1]
    assert "worker 1" in last and "-9" in last, last
    run.assert_nothing_left()
    run.assert_checkpoint_loads()


# Ctrl-C and SIGTERM mid-run (exit code, checkpoint, nothing left): tests/cli/test_exits.py


# multi_async (its learner SIGKILLed, its workers exiting, nothing left; then resumed): test_faults.py,
# test_a_learner_killed_with_sigkill_resumes_exactly_from_its_last_periodic_checkpoint
SIGKILLED = {  # case -> overrides
    # -m slow: its workers exit as multi_async's do (trajrl.collect.collector_env.become_a_worker, in every worker's
    # environment): the multi_async cases, and test_a_worker_waiting_on_a_lock_its_dead_learner_held_exits
    "multi_sync": ["collector=multi_sync", "algo=ppo"],
    # the learner far behind: the environments wait at the closed gate most of the time (the recurrent
    # DQN's learner: the same path in half the default's time)
    "multi_async_gate_closed": [
        "collector=multi_async",
        "algo=r2d2",
        "loop.updates_per_frame=2",
        "loop.max_update_lag=1",
        "loop.checkpoint_every_frames=250",  # the first 100 updates after the warm-up's 200 frames
    ],
}


@pytest.mark.parametrize(
    "case", [pytest.param(case, marks=pytest.mark.slow) if case == "multi_sync" else case for case in SIGKILLED]
)
def test_sigkill_to_the_run_leaves_no_worker_behind(case, run_in):
    run = run_in(*SIGKILLED[case], "total_frames=1000000")
    run.wait_for_checkpoint()
    assert len(run.workers()) == 2
    run.proc.kill()  # the main process only: nothing of it runs to clean up
    run.end()
    run.assert_nothing_left(within=30)
    run.assert_checkpoint_loads()  # the last one saved, whole (written then renamed)


def hold_the_write_lock(lock, held) -> None:
    """A collector worker that is killed in the middle of a write."""
    lock.acquire()
    held.set()
    time.sleep(3600)


def kill_holding_the_write_lock(buffer) -> None:
    """A process takes ``buffer``'s write lock and is SIGKILLed holding it (as a worker killed while writing)."""
    context = multiprocessing.get_context("forkserver")
    held = context.Event()
    worker = context.Process(target=hold_the_write_lock, args=(buffer._write_lock, held))
    worker.start()
    assert held.wait(60)
    os.kill(worker.pid, signal.SIGKILL)
    worker.join()


@pytest.mark.parametrize("wait", ["update", "metrics row", "checkpoint"])
def test_a_worker_killed_while_writing_does_not_hang_the_learner(wait, tmp_path):
    """A process killed while it holds the shared buffer's write lock never releases
    it; each of the loop's waits on it (sampling for an update, reading the stored
    episodes for a metrics row, saving the buffer with a checkpoint) gives up after the
    stall timeout (the off-policy loop's own steps, on the pipeline's own buffer)."""
    from trajrl.base.errors import CollectorFailed
    from trajrl.checkpoint import checkpoint_path
    from trajrl.configuration.compose import validate

    cfg = validate(
        trajrl.compose(
            ["collector=multi_async", "debug=smoke", "loop.stall_timeout_s=1", "algo.normalize_observations=false"]
        )
    )
    with trajrl.build(cfg) as pipe:
        loop = loop_of(pipe, cfg, tmp_path)
        kill_holding_the_write_lock(pipe.buffer)
        start = time.monotonic()
        step = {"update": loop.update, "metrics row": lambda: loop.write_row({}), "checkpoint": loop.save_checkpoint}
        with pytest.raises(CollectorFailed, match=f"an? {wait} waited on the replay buffer"):
            step[wait]()
        assert time.monotonic() - start < 5
        assert not checkpoint_path(tmp_path).exists()
        loop.collection.watch.close()  # the supervisor's, made with the loop


def test_a_signal_during_an_update_whose_priorities_wait_on_a_dead_writers_lock_stops_the_learner(tmp_path):
    """Prioritised slices: after its gradient step, an update writes the batch's priorities
    under the write lock. A worker killed while writing (Ctrl-C reaches the workers too)
    never releases it: a Ctrl-C or SIGTERM then stops the learner at once, not after
    ``loop.stall_timeout_s`` (the update and its weight push are whole: signals wait for
    them, never for the lock)."""
    from trajrl.base.errors import RunInterrupted
    from trajrl.base.signals import interrupts_raise
    from trajrl.configuration.compose import validate

    cfg = validate(
        trajrl.compose(
            [
                "collector=multi_async",
                "debug=smoke",
                "sampler=prioritized_slice",
                "loop.stall_timeout_s=60",
                "algo.normalize_observations=false",
            ]
        )
    )
    with trajrl.build(cfg) as pipe:
        loop = loop_of(pipe, cfg, tmp_path)
        learn = pipe.algo.update

        def learn_then_a_writer_dies_and_ctrl_c(batch):
            stats = learn(batch)
            kill_holding_the_write_lock(pipe.buffer)
            threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGTERM)).start()  # SIGINT: ignored in a background job
            return stats

        with interrupts_raise(), loop.collection.running(loop.stored()):
            while pipe.buffer.write_count < 2 * cfg.loop.warmup_frames:
                time.sleep(0.1)
            loop.update()  # a first one, the lock free: priorities written
            updates = pipe.algo.updates
            pipe.algo.update = learn_then_a_writer_dies_and_ctrl_c
            start = time.monotonic()
            with pytest.raises(RunInterrupted, match="interrupted by SIGTERM"):
                loop.update()
        assert time.monotonic() - start < 30  # the collectors shut down (the lock freed) included; the stall: 60 s
        assert pipe.algo.updates == updates + 1  # the update the signal came in was whole


def alive(pid: int) -> bool:
    """Running (not exited, nor exited and not yet reaped)."""
    try:
        return "\nState:\tZ" not in Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return False


def wait_for_the_lock(lock) -> None:
    """A collector worker whose next write waits for the buffer's write lock."""
    from trajrl.collect.collector_env import become_a_worker

    become_a_worker(poll_s=0.1)
    lock.acquire()


def learner_holding_the_lock(lock, worker_pid, start_method) -> None:
    """A learner that starts a worker and is killed while it holds the write lock."""
    lock.acquire()
    worker = multiprocessing.get_context(start_method).Process(target=wait_for_the_lock, args=(lock,))
    worker.start()
    worker_pid.value = worker.pid
    time.sleep(3600)


@pytest.mark.parametrize("start_method", ["spawn", "forkserver"])
def test_a_worker_waiting_on_a_lock_its_dead_learner_held_exits(start_method):
    """SIGKILL to the learner while it samples (holding the write lock): its workers
    would wait on that lock forever; they exit once their parent is gone (under
    ``forkserver`` a worker's own parent is the fork server, which outlives the learner)."""
    context = multiprocessing.get_context("forkserver")  # the learner: from the session's fork server
    lock, worker_pid = context.Lock(), context.Value("i", 0)
    learner = context.Process(target=learner_holding_the_lock, args=(lock, worker_pid, start_method))
    learner.start()
    deadline = time.monotonic() + 60
    while worker_pid.value == 0:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    time.sleep(3)  # the worker has started and waits on the lock
    assert alive(worker_pid.value), "the worker exited while its learner was alive"
    os.kill(learner.pid, signal.SIGKILL)
    learner.join()
    gone_by = time.monotonic() + 10
    while alive(worker_pid.value):
        if time.monotonic() > gone_by:
            os.kill(worker_pid.value, signal.SIGKILL)
            raise AssertionError("the worker outlived its learner by 10 s")
        time.sleep(0.1)


def test_sigusr1_prints_the_stacks_of_the_run_and_its_workers_and_the_run_goes_on(run_in):
    """``kill -USR1`` says where a run that seems stuck waits (the tests print it for a run
    that does not end in time), without stopping it."""
    run = run_in(  # signalled once its first checkpoint is saved, 1,300 frames before its end
        "collector=multi_async", "collector.num_workers=2", "loop.checkpoint_every_frames=200", "total_frames=1500"
    )
    run.wait_for_checkpoint()
    workers = run.workers()
    assert len(workers) == 2
    for pid in [run.proc.pid, *workers]:
        os.kill(pid, signal.SIGUSR1)
    err = run.end(within=120)
    assert run.proc.returncode == 0, err[-3000:]
    assert err.count("(most recent call first)") >= 3, err[-3000:]
    assert "trajrl/training/loops.py" in err
    run.assert_nothing_left()
