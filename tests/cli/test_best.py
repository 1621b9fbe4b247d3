"""Keeping what was learned: ``checkpoints/best.pt`` holds the agent of the best
evaluation, ``load_agent(which="best")`` restores it, ``trajrl evaluate`` reports it."""

import itertools
import re

import pytest
import torch
from helpers import failed_with, loop_of
from helpers import trajrl as trajrl_cli
from omegaconf import OmegaConf

import trajrl
from trajrl.checkpoint import checkpoint_path, load_checkpoint
from trajrl.configuration.compose import validate


@pytest.mark.parametrize("algo", ["r2d2", "ppo"])
def test_best_pt_is_the_agent_of_the_best_evaluation(algo, tmp_path):
    """A scripted evaluation sequence (3, 9, 5, 9, 1, ...): best.pt holds the weights the
    agent had at the first 9 (a tie does not replace it), latest.pt the last ones. PPO's
    batches are whole episodes, so they grow as it learns: evaluations are asked for every
    200 frames to have at least the four the script needs."""
    cfg = validate(
        trajrl.compose(
            [
                f"algo={algo}",
                "collector=sync",
                "debug=smoke",
                "loop.eval_every_frames=200",
                "loop.updates_per_frame=0.1",
            ]
        )
    )
    OmegaConf.save(cfg, tmp_path / "config.yaml")
    script = itertools.chain([3.0, 9.0, 5.0, 9.0], itertools.repeat(1.0))
    seen = []
    with trajrl.build(cfg) as pipe:

        def evaluate() -> dict:
            seen.append(({k: v.clone() for k, v in pipe.algo.state_dict()[net].items()}, next(script)))
            return {"return": seen[-1][1]}

        net = "qnet" if algo == "r2d2" else "net"
        loop = loop_of(pipe, cfg, tmp_path, evaluate=evaluate, keep_best=True)
        final = loop.run()
    assert len(seen) >= 4 and final["eval/best_return"] == 9.0, [score for _, score in seen]
    best_weights = seen[1][0]
    assert any(not torch.equal(best_weights[k], seen[3][0][k]) for k in best_weights)  # it kept learning
    best = load_checkpoint(tmp_path, which="best")
    assert "buffer" not in best and best["loop"]["best_eval"] == 9.0
    for key, tensor in best_weights.items():
        torch.testing.assert_close(best["algo"][net][key], tensor, rtol=0, atol=0)
    latest = load_checkpoint(tmp_path)
    assert any(not torch.equal(latest["algo"][net][k], best_weights[k]) for k in best_weights)
    agent = trajrl.load_agent(tmp_path, which="best")
    restored = agent.algo.state_dict()[net]
    assert all(torch.equal(restored[k], best_weights[k]) for k in best_weights)


def test_load_agent_refuses_a_checkpoint_a_run_does_not_keep(tmp_path):
    from trajrl.base.errors import CheckpointError

    with pytest.raises(CheckpointError, match="which='first'"):
        trajrl.load_agent(tmp_path, which="first")


def run_evaluation(run_dir) -> tuple[list[str], float]:
    """``trajrl evaluate``'s arguments that play the episodes the run's own evaluations played (seed + 10,000,
    ``loop.eval_episodes`` of them), and the best return those evaluations measured (kept in best.pt)."""
    cfg = OmegaConf.load(run_dir / "config.yaml")
    best = load_checkpoint(run_dir, which="best")["loop"]["best_eval"]
    return ["--episodes", str(cfg.loop.eval_episodes), "--seed", str(cfg.seed + 10_000)], best


def test_evaluate_a_finished_run_prints_its_best_return_and_writes_a_video(smoke_run, tmp_path):
    """Played on the episodes its evaluations played, the best agent returns what the run measured when it kept it
    (one evaluation, at the end: debug=smoke)."""
    _, run_dir = smoke_run
    assert checkpoint_path(run_dir, "best").exists()
    same_episodes, best = run_evaluation(run_dir)
    proc = trajrl_cli(
        "evaluate", str(run_dir), *same_episodes, "--video", str(tmp_path / "videos"), cwd=tmp_path, timeout=120
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    found = re.search(r"\(best agent\): return (-?[\d.]+) ± ([\d.]+) over \d+ deterministic episodes", proc.stdout)
    assert found and found[1] == f"{best:.1f}", (best, proc.stdout)
    video = tmp_path / "videos" / "best-episode-0.mp4"
    assert f"video: {video}" in proc.stdout and video.stat().st_size > 1000
    assert proc.stderr.strip() == "", proc.stderr


#: A smoke run (config.yaml and checkpoints/best.pt) saved by trajrl 0.1.0 on 2026-11-29, when trajrl's modules
#: were at the package's root (before configuration/, envs/ and base/) and its config held settings since retired.
SAVED_RUN = "run_saved_2026-11-29"


def test_a_run_saved_by_trajrl_0_1_0_on_2026_11_29_plays_as_it_did_then(tmp_path):
    """A checkpoint holds tensors and names, no class: the saved best agent is restored to the bit, and played on
    the episodes of the run's evaluations it returns the 10.0 its run measured then."""
    import shutil

    from helpers import REPO

    run_dir = shutil.copytree(REPO / "tests" / "data" / SAVED_RUN, tmp_path / "run")
    saved = load_checkpoint(run_dir, which="best")["algo"]
    restored = trajrl.load_agent(run_dir, which="best").algo.state_dict()
    for net in ("actor", "critics", "target_critics"):
        # every tensor the agent has now comes from the file (which also holds a counter trajrl no longer keeps:
        # encoder.0.standardize.tracked)
        assert restored[net].keys() <= saved[net].keys(), net
        assert all(torch.equal(saved[net][k], restored[net][k]) for k in restored[net]), net
    same_episodes, best = run_evaluation(run_dir)
    assert best == 10.0
    proc = trajrl_cli("evaluate", str(run_dir), *same_episodes, cwd=tmp_path, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "(best agent): return 10.0 ± 1.4 over 2 deterministic episodes (length 10.0)" in proc.stdout, proc.stdout


def test_a_saved_run_with_a_setting_trajrl_no_longer_has_is_refused_unless_it_held_what_trajrl_does(tmp_path):
    """The saved run's config.yaml holds settings trajrl no longer has (``RETIRED``): at the value trajrl now
    always uses they are dropped (the test above); at another (``algo.critic_core=shared``) its agent was made by
    code that is gone, and ``trajrl evaluate`` says so in one line."""
    import shutil

    from helpers import REPO

    run_dir = shutil.copytree(REPO / "tests" / "data" / SAVED_RUN, tmp_path / "run")
    config = run_dir / "config.yaml"
    config.write_text(config.read_text().replace("critic_core: separate", "critic_core: shared"))
    proc = trajrl_cli("evaluate", str(run_dir), "--episodes", "2", cwd=tmp_path, timeout=120)
    failed_with(proc, 2, "trajrl evaluate: algo.critic_core='shared'", "a setting trajrl no longer has", "'separate'")


def test_evaluate_without_the_video_extra_names_it_and_leaves_no_folder(smoke_run, tmp_path):
    """``trajrl evaluate --video`` where moviepy cannot be imported (what ``make run`` installs):
    the return, then one line naming the extra; the folder RecordVideo made is not left behind
    (a later try, the extra installed, would warn that it overwrites it)."""
    from helpers import trajrl_without

    _, run_dir = smoke_run
    videos = tmp_path / "videos"
    proc = trajrl_without("moviepy", "evaluate", str(run_dir), "--episodes", "2", "--video", str(videos), cwd=tmp_path)
    failed_with(proc, 2, "trajrl evaluate: --video", "rendering needs a package not installed", "trajrl[video]")
    assert "return" in proc.stdout
    assert not videos.exists()


def test_evaluate_refuses_a_video_of_an_environment_that_renders_no_frames(tmp_path):
    cfg = validate(
        trajrl.compose(
            ["env=cue_memory", "collector=sync", "debug=smoke", "total_frames=600", "loop.warmup_frames=300"]
        )
    )
    trajrl.train(cfg, run_dir=tmp_path / "run")
    proc = trajrl_cli(
        "evaluate", str(tmp_path / "run"), "--which", "latest", "--episodes", "2", "--video", cwd=tmp_path, timeout=120
    )
    err = failed_with(proc, 2, "trajrl evaluate: --video", "rgb_array")
    assert "return" in proc.stdout and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("seed", [0, 1])
def test_evaluation_plays_its_episodes_side_by_side_as_gymnasium_plays_each_from_its_own_seed(seed):
    """The evaluator steps ``episodes`` environments as one vector (``env.stepping=lean``);
    environment ``i`` is seeded ``seed * episodes + i``, so each episode is the one
    gymnasium plays alone from that seed (reset twice: once by the seeding, once to start),
    and another evaluation seed plays other episodes."""
    import gymnasium as gym
    from tensordict.nn import TensorDictModule

    from trajrl.collect.collector_env import eval_env_factory
    from trajrl.training.evaluator import Evaluator

    cfg = trajrl.compose(["env=cartpole_novel"])
    lean_right = lambda obs: (obs[..., 1] > 0).long()  # noqa: E731  (push towards where the pole leans)
    episodes, limit = 6, 500
    evaluator = Evaluator(
        eval_env_factory(cfg.env),
        TensorDictModule(lean_right, ["observation"], ["action"]),
        episodes=episodes,
        seed=seed,
        max_steps=limit,
        env_id=cfg.env.id,
    )
    try:
        stats = evaluator()
    finally:
        evaluator.close()
    returns = []
    for i in range(episodes):
        env = gym.make(cfg.env.id)
        env.reset(seed=seed * episodes + i)
        obs, _ = env.reset()
        total, done = 0.0, False
        while not done:
            obs, reward, terminated, truncated, _ = env.step(int(obs[1] > 0))
            total, done = total + reward, terminated or truncated
        returns.append(total)
    assert len(set(returns)) > 1  # the episodes differ: the comparison below can tell them apart
    assert stats["return"] == pytest.approx(sum(returns) / episodes) and stats["unfinished"] == 0
    assert stats["length"] == pytest.approx(sum(returns) / episodes)
