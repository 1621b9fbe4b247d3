"""``resume=<run dir>``: a stopped run continues from its checkpoint, with its
learner, its replay buffer and its counters exactly as they were saved."""

import io
import shutil

import pytest
import torch
from conftest import run_once
from helpers import Trained, read_metrics
from helpers import trajrl as cli
from tensordict import TensorDict

import trajrl
from trajrl.__main__ import resume_arguments
from trajrl.base.keys import TRAJ_KEY
from trajrl.checkpoint import load_checkpoint
from trajrl.replay.audit import audit_storage
from trajrl.training.progress import Progress


def tensors(tree, prefix=""):
    """Every tensor of a nested state dict, by its path."""
    if isinstance(tree, torch.Tensor):
        return {prefix: tree}
    if isinstance(tree, dict):
        return {k: v for key, sub in tree.items() for k, v in tensors(sub, f"{prefix}/{key}").items()}
    return {}


def stored(buffer_state) -> TensorDict:
    """The stored steps of a saved buffer, as a TensorDict."""
    storage = buffer_state["_storage"]
    flat = {k: v[: storage["_len"]] for k, v in storage["_storage"].items()}
    return TensorDict({tuple(k.split(".")): v for k, v in flat.items()}, batch_size=[storage["_len"]])


@pytest.fixture(scope="session")
def finished_run(tmp_path_factory, worker_id):
    """A run of the CLI to its end, run once for the tests that resume it (each a copy: ``run_dir``)."""
    _, where = run_once(
        tmp_path_factory,
        worker_id,
        "resumable",
        "collector=multi_async",
        "debug=smoke",
        "total_frames=1500",
        "storage.capacity=6000",
        "loop.log_every_frames=500",
        "hydra.run.dir=run",
        timeout=180,
    )
    return where / "run"


@pytest.fixture
def run_dir(finished_run, tmp_path):
    """A copy of ``finished_run``'s directory, this test's to resume."""
    return shutil.copytree(finished_run, tmp_path / "run")


def test_a_resumed_run_continues_where_its_checkpoint_stopped(run_dir, tmp_path):
    saved = load_checkpoint(run_dir)
    frames, updates = saved["frames"], saved["algo"]["updates"]
    before = stored(saved["buffer"])
    rows_before = read_metrics(run_dir)
    assert frames >= 1500 and updates > 0 and len(before) == frames

    # Rebuilt from the checkpoint, before anything runs: the same learner, buffer and counters.
    cfg = trajrl.compose(["collector=multi_async", "debug=smoke", "storage.capacity=6000", f"resume={run_dir}"])
    with trajrl.build(cfg) as pipe:
        assert pipe.resumed.frames == frames and pipe.resumed.episodes == saved["loop"]["episodes"] > 0
        assert pipe.buffer.write_count == frames and len(pipe.buffer) == frames
        restored = tensors(pipe.algo.state_dict())
        wanted = tensors(saved["algo"])
        assert restored.keys() == wanted.keys()
        assert all(torch.equal(restored[k], wanted[k]) for k in wanted)  # networks, targets, optimiser moments
        assert pipe.algo.updates == saved["algo"]["updates"]
        optimizers = [v for k, v in pipe.algo.state_dict().items() if k.endswith("optimizer")]
        steps = [s["step"] for optimizer in optimizers for s in optimizer["state"].values()]
        assert steps and all(int(step) == updates for step in steps)
        assert_same_steps(pipe.buffer[:], before)
        # The collector's policy acts with the restored weights from its first step (its CPU copy).
        acting = list(pipe.policy.parameters())
        assert acting and all(any(torch.equal(p.detach(), w) for w in wanted.values()) for p in acting)

    # The CLI resumes in the same directory, with the run's own overrides and a new total.
    second = cli(f"resume={run_dir}", "total_frames=3000", cwd=tmp_path)
    assert second.returncode == 0, second.stderr[-3000:]
    final = load_checkpoint(run_dir)
    assert final["frames"] >= 3000 and final["algo"]["updates"] > updates
    after = stored(final["buffer"])
    assert_same_steps(after[:frames], before)  # what was stored is still there, untouched
    assert not any(audit_storage(after, full=False).values())  # old and new episodes: whole, distinct ids
    rows = read_metrics(run_dir)
    kept = [r for r in rows if int(r["frames"]) <= frames]
    assert kept == [r for r in rows_before if int(r["frames"]) <= frames]
    resumed_rows = rows[len(kept) :]
    assert resumed_rows and all(int(r["frames"]) > frames for r in resumed_rows)
    assert float(resumed_rows[0]["train/updates"]) > updates
    assert float(resumed_rows[-1]["collect/frames_stepped"]) >= float(resumed_rows[-1]["frames"])
    command = (run_dir / "command.txt").read_text()
    assert f"# resumed by: python -m trajrl resume={run_dir} total_frames=3000" in command


def assert_same_steps(now, then) -> None:
    """Equal stored steps; episode ids may differ by a shift (a resumed run renumbers them)."""
    assert now.shape == then.shape
    for key in then.keys(include_nested=True, leaves_only=True):
        if key == TRAJ_KEY:
            shift = now.get(key) - then.get(key)
            assert (shift == shift.reshape(-1)[0]).all()
        else:
            assert torch.equal(now.get(key), then.get(key)), key


def test_a_resumed_ppo_run_continues_its_frames_and_updates(tmp_path):
    """Both runs in the test's process (``resume=`` through the CLI: the test above)."""
    run_dir = tmp_path / "run"
    overrides = ["algo=ppo", "debug=smoke", "loop.log_every_frames=200"]
    trajrl.train(trajrl.compose([*overrides, "total_frames=1000"]), run_dir, progress=Progress(0, io.StringIO()))
    saved = load_checkpoint(run_dir)
    assert "buffer" not in saved and saved["frames"] >= 1000
    resumed = trajrl.compose([*overrides, f"resume={run_dir}", "total_frames=2000"])
    trajrl.train(resumed, progress=Progress(0, io.StringIO()))
    final = load_checkpoint(run_dir)
    assert final["frames"] >= 2000
    assert final["algo"]["updates"] > saved["algo"]["updates"]
    assert final["loop"]["episodes"] > saved["loop"]["episodes"]
    frames = [int(r["frames"]) for r in read_metrics(run_dir)]
    assert frames == sorted(frames) and frames[-1] == final["frames"]
    assert any(f <= saved["frames"] for f in frames) and any(f > saved["frames"] for f in frames)


def resumed_here(tmp_path, run_dir, *typed):
    """``python -m trajrl resume=<run_dir> *typed`` as a ``helpers.Trained`` run in the test's process:
    its overrides as the CLI's ``resume=`` composes them (``trajrl.__main__.resume_arguments``: the
    run's own, then those typed), in the run's directory."""
    *overrides, where = resume_arguments([f"resume={run_dir}", *typed])
    assert where == f"hydra.run.dir={run_dir}"
    run = Trained(tmp_path, *overrides)
    assert run.dir == run_dir
    return run


def test_resuming_from_a_checkpoint_that_does_not_fit_is_refused_and_the_run_kept(run_dir, tmp_path, capfd):
    """Resumed in the test's process (the line and exit code the CLI's ``one_line`` gives the
    error); the CLI's refusal of a checkpoint, its line and exit code with nothing left running:
    tests/cli/test_exits.py, test_a_resume_from_a_corrupt_checkpoint_leaves_no_process."""
    metrics = (run_dir / "metrics.csv").read_bytes()
    run = resumed_here(tmp_path, run_dir, "storage.capacity=3000")
    run.failed_with(
        2,
        "trajrl: cannot resume: the checkpoint's buffer holds 6,000 frames and this run's 3,000; "
        "resume with storage.capacity=6000",
        capfd=capfd,
    )
    run.assert_nothing_left()

    checkpoint = run_dir / "checkpoints" / "latest.pt"
    checkpoint.write_bytes(checkpoint.read_bytes()[:1000])
    run = resumed_here(tmp_path, run_dir)
    run.failed_with(2, "trajrl: cannot resume:", "truncated, corrupt or not a trajrl checkpoint", capfd=capfd)
    run.assert_nothing_left()
    assert (run_dir / "metrics.csv").read_bytes() == metrics  # nothing written lost


def files_of(run_dir):
    """Every file under ``run_dir`` with its size and time of last change."""
    return {p: (p.stat().st_size, p.stat().st_mtime_ns) for p in sorted(run_dir.rglob("*")) if p.is_file()}


@pytest.mark.parametrize(
    "override, line",
    [
        ("algo.hidden_size=32", "algo.hidden_size=32: the checkpoint in {run} holds 128; a resume keeps the algorithm"),
        ("algo=r2d2", "algo='r2d2': the checkpoint in {run} was made with algo=rsac; a resume keeps the algorithm"),
    ],
)
def test_a_resume_that_contradicts_its_checkpoint_is_refused_before_anything_is_written(
    run_dir, tmp_path, override, line
):
    before = files_of(run_dir)
    refused = cli(f"resume={run_dir}", override, cwd=tmp_path)
    assert refused.returncode == 2, refused.stderr[-3000:]
    lines = refused.stderr.strip().splitlines()
    assert len(lines) == 1 and line.format(run=run_dir) in lines[0], refused.stderr
    assert files_of(run_dir) == before  # not even Hydra's .hydra/ files or its log
