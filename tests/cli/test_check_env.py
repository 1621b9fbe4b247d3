"""``trajrl check-env``: what trajrl sees of a user's environment and what it would refuse, without
training (the environments of tests/misbehaving_envs.py misbehave from step 3 of each episode on)."""

import gymnasium as gym
import misbehaving_envs  # noqa: F401 (registers the test environments)
import pytest
from helpers import TESTS, exited


def check_env(tmp_path, env_id, *overrides):
    proc, left = exited(
        "check-env",
        "env=gym",
        f"env.id={env_id}",
        "env.import_module=misbehaving_envs",
        *overrides,
        cwd=tmp_path,
        pythonpath=TESTS,
    )
    assert left == [] and "Traceback" not in proc.stderr, proc.stderr
    assert not (tmp_path / "outputs").exists()  # nothing written
    return proc


def random_episode_lengths(env_id: str, steps: int, seed: int) -> list[int]:
    """The lengths of the episodes that end within ``steps`` random steps (the reset and the actions seeded)."""
    env = gym.make(env_id)
    env.action_space.seed(seed)
    env.reset(seed=seed)
    lengths, t = [], 0
    for _ in range(steps):
        t += 1
        _, _, terminated, truncated, _ = env.step(env.action_space.sample())
        if terminated or truncated:
            lengths.append(t)
            env.reset()
            t = 0
    return lengths


def test_an_environment_that_behaves_is_described_and_nothing_refused(tmp_path):
    """Its spaces, its episodes under random actions, the cast it needs, and the run that would train on it."""
    proc = check_env(tmp_path, "Float64Observation-v0", "algo=r2d2", "--steps", "300")
    assert proc.returncode == 0, proc.stderr
    lines = dict(line.split(None, 1) for line in proc.stdout.splitlines() if line[:1] != " ")
    assert lines["environment"] == "Float64Observation-v0 (env.import_module=misbehaving_envs)"
    assert lines["observations"].startswith("Box(") and lines["observations"].endswith("(4,), float32)")
    assert lines["actions"] == "Discrete(2)"
    assert lines["episodes"] == "up to 200 steps (its TimeLimit)"
    lengths = random_episode_lengths("Float64Observation-v0", steps=300, seed=0)
    assert lines["random"].startswith(
        f"steps    300 (seed 0): {len(lengths)} episodes ended, lengths {min(lengths)} .. {max(lengths)} "
    ), lines["random"]
    assert lines["random"].endswith("; rewards 1 .. 1")
    assert "observations come as float64, declared float32: trajrl casts them" in proc.stdout
    assert lines["inputs"] == "4 numbers: the observation (4 numbers flat)"  # algo=r2d2 adds nothing
    assert lines["algo=r2d2"].strip() == (
        "nothing refused: python -m trajrl env=gym env.id=Float64Observation-v0 "
        "env.import_module=misbehaving_envs algo=r2d2 trains on it"
    )


def test_the_inputs_added_to_the_observation_are_named(tmp_path):
    """The default agent's previous action, and the episode's time where ``env.observe_time=auto`` finds a clock
    (the 3-step recall: every episode terminated at step 50) and where it does not (a time limit's cut)."""
    for env_id, clock, size in (("trajrl/RepeatPrevious-v0", True, 4 + 2 + 4), ("Float64Observation-v0", False, 4 + 2)):
        proc = check_env(tmp_path, env_id, "env.observe_time=auto", "--steps", "120")
        assert proc.returncode == 0, proc.stderr
        inputs = dict(line.split(None, 1) for line in proc.stdout.splitlines() if line[:1] != " ")["inputs"]
        time = "the episode's time (tanh(t / s), s = 16, 64), " if clock else ""
        assert inputs == (
            f"{size} numbers: the observation (4 numbers flat), {time}the previous action; env.observe_time=auto: "
            + ("every random episode terminated at one length (a clock)" if clock else "no clock")
        ), inputs


@pytest.mark.parametrize(
    "env_id, algo, words",
    [
        ("NanReward-v0", "rsac", "its step 3 of episode 1 returned a reward of nan (random actions, reset seed 0)"),
        ("InfObservation-v0", "ppo", "its step 3 of episode 1 returned an observation holding inf (entry 1)"),
        ("UnboundedLine-v0", "rsac", "declares Box(-inf, inf, (1,), float32) actions, without finite bounds"),
    ],
)
def test_what_a_run_would_refuse_is_named_in_one_line(tmp_path, env_id, algo, words):
    proc = check_env(tmp_path, env_id, f"algo={algo}")
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.count("\n") == 1 and proc.stderr.startswith(f"trajrl check-env: env.id='{env_id}': ")
    assert words in proc.stderr
    assert "plays more steps" not in proc.stderr  # the advice to run check-env, not given inside it
    assert proc.stdout.startswith(f"environment     {env_id}")  # what it saw comes first


def test_an_environment_whose_package_is_missing_is_named_in_one_line(tmp_path):
    """gymnasium's ``DependencyNotInstalled`` as the environment is made: its own line, what to install."""
    proc = check_env(tmp_path, "NeedsPhysics-v0", "algo=rsac")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert proc.stderr == (
        "trajrl check-env: env.id='NeedsPhysics-v0': needs a package that is not installed: "
        'FakePhysics is not installed, you can install it by run `pip install "fakephysics"`\n'
    )


def test_a_gaussian_policy_takes_actions_without_bounds(tmp_path):
    proc = check_env(tmp_path, "UnboundedLine-v0", "algo=ppo")
    assert proc.returncode == 0, proc.stderr
    assert "actions         Box(-inf, inf, (1,), float32)" in proc.stdout and "algo=ppo" in proc.stdout


def test_an_unknown_option_is_a_configuration_error(tmp_path):
    """A fresh interpreter, as a user types it."""
    proc, left = exited("check-env", "env=nonesuch", cwd=tmp_path, timeout=60, fresh=True)
    assert proc.returncode == 2 and left == []
    assert proc.stderr.startswith("trajrl check-env: configuration error: env='nonesuch': use one of "), proc.stderr


def test_float64_observations_of_a_float32_space_are_cast_and_trained_on(tmp_path):
    """numpy's default dtype: cast, not refused, in the workers that step the environment (multi_async)."""
    proc, left = exited(
        *["env=gym", "env.id=Float64Observation-v0", "env.import_module=misbehaving_envs", "debug=smoke"],
        "hydra.run.dir=run",
        cwd=tmp_path,
        timeout=120,
        pythonpath=TESTS,
    )
    assert proc.returncode == 0 and left == [], proc.stderr[-2000:]
    assert (tmp_path / "run" / "checkpoints" / "latest.pt").exists()
