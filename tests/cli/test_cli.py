"""The training CLI in a subprocess where the command is the point (what a run prints and
writes around its training, sweeps, help); the smoke runs of every collector, sampler and
algorithm train in the test's process (``train_in``: the same run, metrics and printed rows),
except the ones that stand for the CLI's paths (workers from its fork server, or none)."""

import re
from pathlib import Path

import pytest
import torch
from counted_envs import assert_the_frames_add_up, counted
from counted_envs import stepped as counted_steps
from helpers import REPO, TESTS, collector_sampler_pairs, help_settings, job_settings, read_metrics, trajrl

from trajrl.checkpoint import load_checkpoint
from trajrl.configuration.settings import LOCAL_COLLECTORS

SAMPLERS = ("slice", "slice_without_replacement", "prioritized_slice", "episode", "random")


def smoke_run_of(collector, sampler, tmp_path, request, train_in) -> tuple[str, Path, Path | None]:
    """``(what it printed, run directory, where its environments counted their steps)`` of the
    audited smoke run of ``collector`` x ``sampler``, and that the CLI wrote its command beside its
    config where the CLI ran it: the default run (the one conftest.py shares: worker processes from
    the CLI's fork server; its environment, the default task, counts nothing) and sync with slice
    (the collector in the learner's process: no fork server); the other pairs train in the test's
    process (the collector and the sampler are the point). All but the default run step CartPole
    that counts what the collectors step (``counted_envs``)."""
    counts = tmp_path / "counts"
    audited = (f"collector={collector}", f"sampler={sampler}", "debug=smoke", "audit=true", "audit_every=1")
    if (collector, sampler) == ("multi_async", "prioritized_slice"):  # the default run
        proc, run_dir = request.getfixturevalue("smoke_run")
        counts = None
    elif (collector, sampler) == ("sync", "slice"):
        run_dir = tmp_path / "run"
        proc = trajrl(*audited, *counted(counts), f"hydra.run.dir={run_dir}", cwd=tmp_path, pythonpath=TESTS)
        assert proc.returncode == 0, proc.stderr[-3000:]
    else:
        run = train_in(*audited, *counted(counts))
        run.train()
        return run.out, run.dir, counts
    assert (run_dir / "command.txt").exists()
    return proc.stdout, run_dir, counts


# each sampler with the collector that runs in the learner's process (the cheapest run); with
# worker processes writing into a shared buffer: test_pipeline's pairs
# -m slow as well: async_batched with the default sampler, whose whole run is test_faults' (a worker killed,
# the run reaching total_frames) and whose writes test_pipeline's; slice_without_replacement, whose batches
# test_pipeline samples, audits and learns from (the loop runs them as any slice sampler's);
# prioritized_slice in the learner's thread, whose whole run (priorities written and resumed) is test_lanes'
SLOW_SMOKE = (
    ("async_batched", "prioritized_slice"),
    ("sync", "slice_without_replacement"),
    ("sync", "prioritized_slice"),
)


@pytest.mark.parametrize(
    "collector, sampler",
    [
        pytest.param(*p.values, marks=pytest.mark.slow) if p.values in SLOW_SMOKE else p
        for p in collector_sampler_pairs(LOCAL_COLLECTORS, SAMPLERS, samplers_with="sync")
    ],
)
def test_smoke_run_of_every_collector_and_sampler_writes_metrics(collector, sampler, tmp_path, request, train_in):
    out, run_dir, counts = smoke_run_of(collector, sampler, tmp_path, request, train_in)
    rows = read_metrics(run_dir)
    assert rows and int(rows[-1]["frames"]) >= 1000
    assert float(rows[-1]["train/updates"]) > 0
    # CartPole's reward is 1 a step (the evaluation's environment counts nothing): a return is a length
    assert float(rows[-1]["eval/return"]) == float(rows[-1]["eval/length"]) >= 8, rows[-1]
    assert float(rows[-1]["audit/batches_checked"]) == float(rows[-1]["train/updates"])
    if counts is not None:  # stepped, stored, lost and in flight against the environments' own counts
        assert_the_frames_add_up(run_dir, counts)
    else:  # what the buffer holds: the checkpoint's count of the steps written
        written = load_checkpoint(run_dir)["buffer"]["_writer"]["_write_count"]
        assert float(rows[-1]["frames"]) == float(rows[-1]["buffer/frames_written"]) == written, rows[-1]
    assert float(rows[-1]["audit/violations"]) == 0, {k: v for k, v in rows[-1].items() if k.startswith("audit")}
    workers = [float(v) for k, v in rows[-1].items() if k.startswith("collect/worker") and k.endswith("/frames") and v]
    assert collector in ("sync", "async") or len(workers) == 2
    assert sum(workers or [float(rows[-1]["collect/frames_stepped"])]) == float(rows[-1]["collect/frames_stepped"])
    sampled = [r for r in rows if r.get("sample/valid_frac")]
    assert sampled and all(
        0 < float(r["sample/valid_frac"]) <= 1 and float(r["sample/staleness_mean"]) >= 0 for r in sampled
    )
    assert (run_dir / "config.yaml").exists()
    assert "== trajrl run finished ==" in out
    assert not (run_dir / "plots").exists() and "plots " not in out  # debug=smoke: logger.plots=false


@pytest.mark.parametrize(
    "collector, traj_format",
    [
        ("sync", "padded"),
        ("multi_sync", "cat"),  # each collector and each format once; the other pairs with -m slow
        pytest.param("sync", "cat", marks=pytest.mark.slow),
        pytest.param("multi_sync", "padded", marks=pytest.mark.slow),
    ],
)
def test_smoke_run_of_ppo_learns_from_complete_episodes(collector, traj_format, train_in, tmp_path):
    counts = tmp_path / "counts"
    run = train_in(
        *counted(counts),
        "algo=ppo",
        "algo.recurrent=true",
        f"collector={collector}",
        f"traj_format={traj_format}",
        "audit=true",
        "audit_every=1",
    )
    run.train()
    rows = read_metrics(run.dir)
    last = rows[-1]
    assert int(last["frames"]) >= 1000 and float(last["train/updates"]) > 0
    assert float(last["audit/violations"]) == 0 and float(last["audit/batches_checked"]) >= 1
    assert 0 < float(last["batch/valid_frac"]) < 1 and "train/clip_fraction" in last
    if collector != "sync":  # sync: PPO's loop steps it in the main thread, where Counted-v0 counts nothing
        stepped = sum(process.frames for process in counted_steps(counts).values())  # the environments' own count
        assert float(last["collect/frames_stepped"]) == stepped, last
        assert float(last["buffer/frames_in_flight_dropped"]) >= 0 and float(last["frames"]) <= stepped, last
    assert float(last["eval/return"]) == float(last["eval/length"]) >= 8, last  # CartPole: 1 a step


@pytest.mark.parametrize(
    "collector", [c if c == "multi_async" else pytest.param(c, marks=pytest.mark.slow) for c in LOCAL_COLLECTORS]
)  # the collectors' paths: the default's smoke runs (recurrent SAC-discrete) above
def test_smoke_run_of_recurrent_sac_on_every_collector(collector, train_in):
    run = train_in("experiment=rsac_pendulum_novel", f"collector={collector}", "audit=true", "audit_every=1")
    run.train()
    last = read_metrics(run.dir)[-1]
    assert int(last["frames"]) >= 1000 and float(last["train/updates"]) > 0
    assert float(last["audit/violations"]) == 0 and float(last["audit/batches_checked"]) == float(last["train/updates"])
    assert "train/alpha" in last
    assert float(last["eval/length"]) == 200 and -16.3 * 200 < float(last["eval/return"]) <= 0, last  # Pendulum


def test_reward_scale_multiplies_every_reward_collected_and_evaluated(train_in):
    """env.reward_scale=0.01 on CartPole (a reward of 1 a step): every return the run logs, its
    episodes' and its evaluation's, is 0.01 x the episode's length; the learner sees the same."""
    run = train_in("algo=rsac", "env.reward_scale=0.01", "collector=sync")
    run.train()
    rows = [r for r in read_metrics(run.dir) if r.get("episode/return")]
    assert rows and all(
        float(r["episode/return"]) == pytest.approx(0.01 * float(r["episode/length"]), rel=1e-5) for r in rows
    )
    last = read_metrics(run.dir)[-1]
    assert float(last["eval/return"]) == pytest.approx(0.01 * float(last["eval/length"]), rel=1e-5)
    from trajrl.checkpoint import load_checkpoint

    storage = load_checkpoint(run.dir)["buffer"]["_storage"]  # what the learner samples from
    rewards = storage["_storage"]["next.reward"][: storage["_len"]]
    assert len(rewards) > 0 and torch.allclose(rewards, torch.full_like(rewards, 0.01))


def test_multirun_makes_one_run_directory_per_job(sweep):
    """Seeds x algorithms; each algorithm brings its own collector, storage and sampler."""
    from omegaconf import OmegaConf

    runs = sorted(p for p in sweep.iterdir() if p.is_dir() and (p / "metrics.csv").exists())
    assert [p.name for p in runs] == ["0", "1", "2", "3"]
    configs = [OmegaConf.load(p / "config.yaml") for p in runs]
    assert all(int(read_metrics(p)[-1]["frames"]) >= c.total_frames == 1000 for p, c in zip(runs, configs))
    assert [(c.seed, c.algo.name, c.collector.kind, c.storage.kind) for c in configs] == [
        (0, "r2d2", "multi_async", "lazy_tensor"),
        (0, "ppo", "multi_sync", "none"),
        (1, "r2d2", "multi_async", "lazy_tensor"),
        (1, "ppo", "multi_sync", "none"),
    ]


@pytest.mark.parametrize(
    "overrides",
    [
        ["algo.rnn=lru"],
        pytest.param(["algo=r2d2", "algo.rnn=ffm"], marks=pytest.mark.slow),  # its learner: tests/unit/test_tapes.py
    ],
    ids=["rsac-lru", "r2d2-ffm"],
)
def test_a_run_on_tapes_of_whole_episodes_learns_and_every_tape_passes_the_audit(overrides, train_in):
    run = train_in("sampler=tape", *overrides, "debug=smoke", "audit=true", "audit_every=1")
    run.train()
    rows = read_metrics(run.dir)
    assert float(rows[-1]["train/updates"]) > 0
    assert float(rows[-1]["audit/batches_checked"]) == float(rows[-1]["train/updates"])
    assert float(rows[-1]["audit/violations"]) == 0, {k: v for k, v in rows[-1].items() if k.startswith("audit")}


def test_help_lists_every_group_and_option_and_the_values_the_run_gets(tmp_path):
    """``algo=rsac collector=sync --help-all``: every group's options, then every setting with the
    value that run gets: what ``--cfg job`` prints for the same command line; ``--help``: a screenful, the
    usage of every command; ``algo=ppo``'s: no setting PPO does not read."""
    import yaml

    proc = trajrl("algo=rsac", "collector=sync", "--help-all", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    unwrapped = re.sub(r"\n {4,}", " ", proc.stdout)
    for group in ("collector", "sampler", "storage", "env", "algo", "logger", "experiment", "debug"):
        options = sorted(
            {p.stem for p in (REPO / "configs" / group).glob("*.yaml")}
            | ({"ppo", "r2d2", "rsac"} if group == "algo" else set())
        )
        assert f"{group}: {', '.join(options)}" in unwrapped
    job = trajrl("algo=rsac", "collector=sync", "--cfg", "job", cwd=tmp_path)
    assert job.returncode == 0, job.stderr
    shown = help_settings(proc.stdout)
    assert shown == job_settings(yaml.safe_load(job.stdout))
    assert shown["collector.num_workers"] == 1 and shown["total_frames"] == 16_000  # sync's, rsac's
    # where a value that is not its declaration's comes from: an option's file, or the command line
    assert "  total_frames = 16000 (algo=rsac; declared 60000) | >= 1: " in proc.stdout
    assert "  loop.warmup_frames = 1000 (algo=rsac; declared 2000) | " in proc.stdout
    assert "  seed = " in proc.stdout and "seed = 0 (" not in proc.stdout  # the declaration's: nothing added
    assert max(len(line) for line in proc.stdout.splitlines()) <= 120
    other = trajrl("algo=rsac", "collector=sync", "total_frames=5000", "debug=smoke", "--help-all", cwd=tmp_path)
    assert "  total_frames = 5000 (the command line; declared 60000) | " in other.stdout
    assert "  loop.stall_timeout_s = 60.0 (debug=smoke; declared 120.0) | " in other.stdout
    short = trajrl("--help", cwd=tmp_path).stdout
    assert len(short.splitlines()) <= 60 and max(len(line) for line in short.splitlines()) <= 120
    for command in ("resume=", "--multirun", "--help-all", "--cfg job", "check-env", "evaluate", "export", "plot"):
        assert f"python -m trajrl {command}" in short or f"python -m trajrl [group=option ...] {command}" in short
    assert "  algo.lr = " in short and "algo.critic_loss" not in short  # the main settings alone
    ppo = trajrl("algo=ppo", "--help-all", cwd=tmp_path).stdout
    assert "  algo.clip_epsilon = " in ppo
    assert not re.search(r"sampler\.her_|loop\.warmup_frames|loop\.updates_per_frame|storage\.capacity", ppo)


def test_any_gymnasium_id_with_kwargs_and_a_module_that_registers_it(train_in, tmp_path, monkeypatch):
    """env=gym: the module is imported first (in the workers too: they start with this
    process's sys.path, as the CLI's with its PYTHONPATH), then the id is made with the kwargs."""
    (tmp_path / "my_envs.py").write_text(
        "import gymnasium as gym\n"
        "gym.register('MyCartPole-v0', entry_point='gymnasium.envs.classic_control:CartPoleEnv')\n"
    )
    monkeypatch.syspath_prepend(tmp_path)
    run = train_in(
        "env=gym",
        "env.id=MyCartPole-v0",
        "env.import_module=my_envs",
        "+env.kwargs.max_episode_steps=25",
        "sampler.slice_len=20",
        "sampler.burn_in=5",
        "collector=multi_async",
    )
    run.train()
    last = read_metrics(run.dir)[-1]
    assert float(last["episode/length"]) <= 25 and float(last["eval/length"]) <= 25
