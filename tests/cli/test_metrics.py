"""What a run reports: episode, mask, worker, buffer and staleness statistics checked
exactly on environments whose episode lengths are known (runs trained in the test's
process); the TensorBoard and wandb (offline) files and the progress output in a pipe
(the session's CLI smoke run) and on a terminal; plots, summaries and a seed's reading
(scripts/read_seed.py) of a multirun (real CLI in subprocesses)."""

import glob
import io
import subprocess
import sys

import pytest
from helpers import REPO, rows_of, run_cli

from trajrl.training.progress import Progress


def test_off_policy_statistics_are_exact_on_episodes_of_known_length(train_in):
    """Every episode lasts 5 steps and slices are 8 long, so every slice is one whole
    episode: 5 valid cells of 8 in every row, whatever the sampler draws."""
    run = train_in(
        "env=gym",
        "env.id=KnownLengths-v0",
        "env.import_module=known_envs",
        "collector=multi_async",
        "sampler=slice",
        "sampler.slice_len=8",
        "sampler.burn_in=0",
        "sampler.slices_per_batch=32",
        "storage.capacity=1500",
        "total_frames=2000",  # the storage written over
    )
    run.train()
    rows = rows_of(run.dir)
    logged = [r for r in rows if "episode/return" in r]
    assert logged
    for row in logged:
        for name in ("return", "return_min", "return_max", "length", "length_min", "length_max", "length_p50"):
            assert row[f"episode/{name}"] == 5.0, (name, row)
    sampled = [r for r in rows if "sample/valid_frac" in r]
    assert sampled
    for row in sampled:
        assert row["sample/valid_frac"] == 5 / 8 and row["sample/padding_frac"] == 3 / 8
        assert row["sample/length"] == 5.0 and row["sample/length_max"] == 5.0
        assert row["sample/width"] == 8.0 and row["sample/rows"] == 32.0
        assert 0 <= row["sample/staleness_mean"] <= row["sample/staleness_max"] <= row["train/policy_version"]
    last = rows[-1]
    # 2 workers; each worker's frames are 5 per finished episode plus its unfinished one.
    workers = [(last[f"collect/worker{i}/frames"], last[f"collect/worker{i}/episodes"]) for i in (0, 1)]
    assert sum(f for f, _ in workers) == last["collect/frames_stepped"]
    assert all(0 <= frames - 5 * episodes < 5 for frames, episodes in workers), workers
    assert all(last.get(f"collect/worker{i}/return", 5.0) == 5.0 for i in (0, 1))
    # The buffer: whole episodes only (1500 is a multiple of 5, so wrapping keeps them whole).
    assert last["buffer/frames"] == 1500 and last["buffer/fill_frac"] == 1.0
    assert last["buffer/episodes"] == 300
    progression = [
        (r["frames"], r["buffer/frames_written"], r["episode/completed"], r.get("collect/frames_stepped")) for r in rows
    ]  # (frames, written, episodes counted, frames stepped) of every row, if this fails
    assert last["frames"] == last["buffer/frames_written"] == 5 * last["episode/completed"], progression
    assert last["buffer/frames_in_flight_dropped"] == last["collect/frames_stepped"] - last["frames"]
    begun = sum(episodes for _, episodes in workers) + sum(frames % 5 > 0 for frames, _ in workers)
    assert last["buffer/episodes_in_flight_dropped"] == begun - last["episode/completed"]


@pytest.mark.parametrize("rollout", [13, 26])
def test_episodic_batch_statistics_are_exact_on_episodes_of_known_length(rollout, train_in):
    """Episodes alternate 4 and 9 steps; batches of 2 complete episodes are [2, 9] with
    13 valid cells: valid fraction 13/18, lengths 6.5 mean and 9 max.

    Staleness: the collector steps ``collector.frames_per_batch`` frames at a time and
    hands complete episodes over two by two. With 13 frames per rollout each batch is
    fresh; with 26, every second batch was collected before the last update."""
    run = train_in(
        "env=gym",
        "env.id=KnownLengths-v0",
        "env.import_module=known_envs",
        "+env.kwargs.lengths=[4,9]",
        "algo=ppo",
        "collector=sync",
        "trajs_per_batch=2",
        f"collector.frames_per_batch={rollout}",
        "traj_format=padded",
        "total_frames=1000",
        "loop.log_every_frames=100",
    )
    run.train()
    rows = rows_of(run.dir)
    batches = [r for r in rows if "batch/valid_frac" in r]
    assert len(batches) >= 5
    for row in batches:
        assert row["batch/valid_frac"] == pytest.approx(13 / 18) and row["batch/padding_frac"] == pytest.approx(5 / 18)
        assert row["batch/length"] == 6.5 and row["batch/length_max"] == 9.0
        assert row["batch/rows"] == 2.0 and row["batch/width"] == 9.0
        assert row["episode/length_min"] == 4.0 and row["episode/length_max"] == 9.0
        assert row["episode/return"] == 6.5
        if rollout == 13:
            assert row["batch/staleness_mean"] == 0.0 and row["batch/staleness_max"] == 0.0
        else:
            assert 0.0 < row["batch/staleness_mean"] < 1.0 and row["batch/staleness_max"] == 1.0
    last = rows[-1]
    assert last["episode/completed"] * 6.5 == last["frames"]


def test_the_learners_time_split_adds_up_with_pausing_counted_inside_it(smoke_run):
    """Off-policy: sampling, updating, evaluating and the rest (``wait``) add up to the run's wall-clock;
    collection paused happens while the learner updates or evaluates, so it is inside those, not beside."""
    _, run_dir = smoke_run
    last = rows_of(run_dir)[-1]
    parts = ("sample", "update", "eval", "wait")
    assert sum(last[f"time/{k}_frac"] for k in parts) == pytest.approx(1.0, abs=1e-3)
    assert sum(last[f"time/{k}_s"] for k in parts) == pytest.approx(last["time/elapsed_s"], rel=1e-3)
    assert last["time/wait_s"] > 0  # at least the warm-up's frames were waited for
    assert last["time/paused_s"] <= last["time/update_s"] + last["time/eval_s"] + last["time/sample_s"]


def test_tensorboard_and_wandb_offline_runs_write_their_files(smoke_run):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    _, run_dir = smoke_run
    final_eval = rows_of(run_dir)[-1]["eval/return"]

    scalars, histograms, texts = [], [], []
    for path in glob.glob(str(run_dir / "logs" / "tensorboard" / "**" / "events.out.tfevents.*"), recursive=True):
        events = EventAccumulator(path, size_guidance={"scalars": 0, "histograms": 0})
        events.Reload()
        tags = events.Tags()
        scalars += [(tag, [e.value for e in events.Scalars(tag)]) for tag in tags["scalars"]]
        histograms += tags["histograms"]
        texts += tags["tensors"]
    values = dict(scalars)
    assert values["eval/return"][-1] == pytest.approx(final_eval)
    assert {"episode/return", "sample/valid_frac", "buffer/fill_frac", "time/frames_per_s"} <= set(values)
    assert "episode/lengths" in histograms

    (wandb_file,) = glob.glob(str(run_dir / "logs" / "wandb" / "offline-run-*" / "run-*.wandb"))
    data = open(wandb_file, "rb").read()
    assert b"eval/return" in data and b"sample/valid_frac" in data  # metrics
    assert b"loop.warmup_frames" in data  # hyperparameters, once
    # csv is metrics.csv, written once: TorchRL's CSVLogger would write every metric a second time
    assert not (run_dir / "logs" / "csv").exists()


def test_a_multirun_is_plotted_and_summarised_across_seeds(sweep, tmp_path):
    """The sweep seed=0,1 x algo=r2d2,ppo (conftest.py): one curve and one row per algorithm."""
    for job, algo in (("0", "r2d2"), ("1", "ppo")):
        assert (sweep / job / "command.txt").read_text().startswith(f"python -m trajrl seed=0 algo={algo} debug=smoke")
        assert (sweep / job / "plots" / "returns.png").stat().st_size > 10_000

    plot = run_cli(tmp_path, "plot", str(sweep))
    assert plot.returncode == 0, plot.stderr
    names = sorted(p.name for p in (sweep / "plots").glob("*.png"))
    assert names == ["lengths.png", "masks.png", "returns.png", "throughput.png"]
    assert plot.stdout.split() == [
        str(sweep / "plots" / n) for n in ("returns.png", "lengths.png", "masks.png", "throughput.png")
    ]

    summary = run_cli(tmp_path, "summary", str(sweep))
    assert summary.returncode == 0, summary.stderr
    table = summary.stdout.strip().splitlines()
    assert table[0].startswith("| configuration | seeds | final eval return")
    assert len(table) == 4
    for jobs, algo in (("02", "r2d2"), ("13", "ppo")):
        (line,) = [
            row
            for row in table[2:]
            if row.startswith(
                f"| algo={algo} debug=smoke logger.plots=True loop.eval_every_frames=500 total_frames=1000 | 0, 1 | "
            )
        ]
        finals = [rows_of(sweep / job)[-1]["eval/return"] for job in jobs]
        mean, std = sum(finals) / 2, abs(finals[0] - finals[1]) / 2
        assert line.split(" | ")[2] == f"{mean:.1f} ± {std:.1f}"
    assert (sweep / "summary.md").read_text().strip() == summary.stdout.strip()

    missing = run_cli(tmp_path, "plot", str(tmp_path / "nowhere"))
    assert missing.returncode != 0 and "does not exist" in missing.stderr


def test_read_seed_prints_at_each_evaluation_what_the_learner_logged_last(sweep):
    """``scripts/read_seed.py`` (a failing seed's reading) on the sweep's recurrent DQN and PPO runs:
    a line at each evaluation, its greedy return and the last value of each column logged by then;
    a column the algorithm does not log (recurrent DQN has no temperature) is nan."""
    import math

    runs = [sweep / "0", sweep / "1"]  # seed 0: algo=r2d2, algo=ppo
    proc = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "read_seed.py"), *map(str, runs)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    for run_dir in runs:
        start = lines.index(str(run_dir))
        assert lines[start + 1].split() == ["frames", "greedy", "training", "q_mean", "entropy", "alpha",
                                            "critic_loss", "action_gap", "grad_norm", "staleness", "episodes",
                                            "updates"]  # fmt: skip
        rows, last, expected = rows_of(run_dir), {}, []
        for row in rows:
            last.update(row)
            if "eval/return" in row:
                expected.append([row["frames"], row["eval/return"], last.get("train/q_mean", math.nan)])
        printed = [[float(x) for x in line.split()] for line in lines[start + 2 : start + 2 + len(expected)]]
        assert len(expected) >= 2 and len(printed) == len(expected)
        for values, (frames, greedy, q_mean) in zip(printed, expected):
            assert values[0] == frames and values[1] == pytest.approx(greedy, rel=1e-3)
            assert values[3] == pytest.approx(q_mean, rel=1e-3, nan_ok=True)
        alphas = [values[5] for values in printed]
        assert all(map(math.isnan, alphas))  # neither recurrent DQN nor PPO has a temperature


def test_progress_redraws_a_status_line_on_a_terminal_and_prints_plain_lines_elsewhere():
    log = io.StringIO()
    plain = Progress(1000, stream=log, live=False)
    plain.status(100, 20.0)
    plain.row("frames 100 | eval return 20.0")
    plain.close()
    assert log.getvalue() == "frames 100 | eval return 20.0\n"

    term = io.StringIO()
    live = Progress(1000, stream=term, live=True, min_interval_s=0.0)
    live.status(250, 42.5)
    live.row("frames 250 | eval return 40.0")
    live.close()
    out = term.getvalue()
    assert "25%" in out and "250/1000" in out and "return 42.5" in out  # tqdm's status line
    # The row is printed on a line of its own, and the status line redrawn under it.
    row_at = out.index("frames 250 | eval return 40.0\n")
    assert out[row_at - 1] == "\r" and "250/1000" in out[row_at:]
    assert out.endswith("\r")  # cleared at the end: the terminal is left on a fresh line


def test_a_run_in_a_pipe_prints_plain_lines(smoke_run):
    proc, _ = smoke_run
    assert "\r" not in proc.stdout and "\x1b" not in proc.stdout
    lines = [line for line in proc.stdout.splitlines() if line.startswith("frames ") and " fps " in line]
    assert len(lines) >= 3 and all(" | updates " in line for line in lines)


def test_environments_count_the_actions_that_were_not_the_greedy_one():
    """collect/random_action_frac comes from the environments' counters (the buffer no
    longer stores the Q-values): per step, actions that differ from argmax Q."""
    import torch
    from tensordict import TensorDict

    from trajrl.collect.counters import CountSteps, WorkerCounters
    from trajrl.training.metrics import WorkerStats

    counters = WorkerCounters(slots=1)
    stats = WorkerStats(counters)
    count = CountSteps(counters.counts, 0, counters.gate)
    after = TensorDict({"done": torch.zeros(3, 1, dtype=torch.bool), "episode_reward": torch.zeros(3, 1)}, [3])
    for action in ([0, 1, 1], [1, 0, 1]):  # Q prefers actions 0, 1, 0: one then three not greedy
        acted = TensorDict(
            {"action_value": torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 0.0]]), "action": torch.tensor(action)}, [3]
        )
        count._step(acted, after)
    assert stats.update()["collect/random_action_frac"] == pytest.approx(4 / 6)
    no_q = WorkerCounters(slots=1)  # a policy without Q-values: no such statistic
    no_q_stats = WorkerStats(no_q)
    CountSteps(no_q.counts, 0, no_q.gate)._step(TensorDict({"action": torch.zeros(3)}, [3]), after)
    row = no_q_stats.update()
    assert row["collect/frames_per_s"] > 0 and "collect/random_action_frac" not in row


def five_step_episodes(count: int, first_id: int = 0):
    """``count`` flat episodes of 5 steps, reward 1 a step, as the buffer stores them."""
    import torch
    from tensordict import TensorDict

    t = torch.arange(5).repeat(count)
    ids = torch.arange(first_id, first_id + count).repeat_interleave(5)
    return TensorDict(
        {
            "step_count": t.unsqueeze(-1),
            "episode_reward": t.float().unsqueeze(-1),
            ("collector", "traj_ids"): ids,
            "is_init": (t == 0).unsqueeze(-1),
            ("next", "reward"): torch.ones(5 * count, 1),
            ("next", "done"): (t == 4).unsqueeze(-1),
            "observation": torch.randn(5 * count, 64),
        },
        [5 * count],
    )


def write_episodes(buffer, batches: int, count: int) -> None:
    """A collector's worker process: extends the shared buffer ``batches`` times."""
    for batch in range(batches):
        buffer.extend(five_step_episodes(count, first_id=batch * count))


def test_episodes_are_counted_exactly_while_a_worker_process_writes_them():
    """TorchRL's writer moves write_count before the steps are in the storage: the
    learner, reading what was written while a worker process writes, must wait for
    the write (it counted stale steps, or indexed past the storage, without the lock)."""
    import multiprocessing

    from torchrl.data import LazyTensorStorage, TensorDictReplayBuffer

    from trajrl.replay.writer import EpisodeWriter
    from trajrl.training.metrics import StoredEpisodeStats, buffer_stats

    batches, count = 30, 800
    buffer = TensorDictReplayBuffer(
        storage=LazyTensorStorage(5 * count * batches), writer=EpisodeWriter(), shared=True, batch_size=8
    )
    buffer.extend(five_step_episodes(1))  # the storage exists before the worker starts, as collectors do
    buffer.empty()
    stats = StoredEpisodeStats(buffer)
    # from the session's fork server (conftest.py), as a collector's worker: torch and trajrl imported once
    worker = multiprocessing.get_context("forkserver").Process(target=write_episodes, args=(buffer, batches, count))
    worker.start()
    reads = 0
    while worker.is_alive():
        stats.read()
        reads += 1
    worker.join()
    assert worker.exitcode == 0
    row = stats.update()
    assert reads > batches  # the reads overlapped the writes
    assert row["episode/completed"] == batches * count
    assert row["episode/length_min"] == row["episode/length_max"] == 5.0 and row["episode/return"] == 5.0
    assert buffer_stats(buffer)["buffer/episodes"] == batches * count
