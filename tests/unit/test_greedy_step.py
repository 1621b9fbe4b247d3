"""The greedy step ``trajrl export`` writes (``trajrl.report.export.GreedyStep``) acts as trajrl's greedy
policy for every algorithm, memory core and action space, untrained weights (any weights do): the
same actions at every step of the same episodes; and the exported program with them."""

import numpy as np
import pytest
import torch

import trajrl
from trajrl.configuration.compose import validate
from trajrl.envs.gym_envs import env_spaces
from trajrl.factory.agent import build_agent
from trajrl.report.export import (
    Exported,
    describe,
    example_inputs,
    exported_program,
    greedy_step,
    play_exported,
    play_trajrl,
    quiet_exporters,
    raw_spaces,
    same_actions,
    write_onnx,
)

PENDULUM = ["env=gym", "env.id=Pendulum-v1"]
MATCH = ["env=gym", "env.import_module=action_envs", "env.previous_action=true"]
SHORT = ["sampler.slice_len=10", "sampler.burn_in=2"]  # the Match tasks' 10-step episodes
CASES = {
    "r2d2, LRU, dueling": ["algo=r2d2", "algo.rnn=lru", "algo.dueling=true"],
    "rsac, GRU, Box actions": ["algo.rnn=gru", *PENDULUM],
    "rsac, FFM, Dict observation": [
        "algo.rnn=ffm",
        "env=gym",
        "env.id=Spaces-v0",
        "env.import_module=space_envs",
        "+env.kwargs.kind=tuple",
    ],  # fmt: skip
    "rsac, LSTM, Box actions, the episode's time": ["env.observe_time=true", *PENDULUM],
    "rsac, LSTM, MultiDiscrete": [*MATCH, "env.id=MatchMultiDiscrete-v0", *SHORT],
    "rsac, GRU, MultiBinary": ["algo.rnn=gru", *MATCH, "env.id=MatchMultiBinary-v0", *SHORT],
    "ppo, no memory, Box actions": ["algo=ppo", "algo.recurrent=false", *PENDULUM],
    "ppo, LSTM, MultiDiscrete": ["algo=ppo", "algo.recurrent=true", *MATCH, "env.id=MatchMultiDiscrete-v0"],
    "ppo, LRU, MultiBinary, previous reward": [
        "algo=ppo",
        "algo.recurrent=true",
        "algo.rnn=lru",
        *MATCH,
        "env.id=MatchMultiBinary-v0",
        "env.previous_reward=true",
    ],  # fmt: skip
}


@pytest.mark.parametrize("case", CASES)
def test_the_greedy_step_and_its_program_act_as_trajrls_greedy_policy(case):
    cfg = validate(trajrl.compose([*CASES[case], "debug=smoke"]))
    agent = build_agent(cfg, env_spaces(cfg.env))
    step = greedy_step(cfg, agent)
    spec = describe(cfg, step, "latest", "torch")
    seeds = [0]
    ours, returns = play_trajrl(cfg, agent, seeds)
    for module in (step, exported_program(step, example_inputs(step, spec["observation_size"])).module()):
        theirs, their_returns = play_exported(Exported.of(module, spec), seeds)
        assert same_actions(theirs, ours, atol=1e-6) is None
        assert their_returns == pytest.approx(returns, rel=1e-6)


ONNX_CASES = {
    "rsac, FFM, Box actions, the previous reward scaled": [
        "algo.rnn=ffm",
        *PENDULUM,
        "env.previous_reward=true",
        "env.reward_scale=0.1",
    ],  # fmt: skip
    "r2d2, LRU, the episode's time": ["algo=r2d2", "algo.rnn=lru", "env.observe_time=true"],
}


@pytest.mark.parametrize("case", ONNX_CASES)
def test_the_onnx_file_of_a_linear_core_acts_as_trajrls_greedy_policy(case, tmp_path):
    """The linear cores' step in real arithmetic (ONNX carries no complex numbers), written as ONNX and
    run by onnxruntime along trajrl's own episodes: the same actions (a Box action within 1e-5: onnxruntime
    rounds otherwise than torch, docs/export.md)."""
    overrides = ONNX_CASES[case]
    cfg = validate(trajrl.compose([*overrides, "debug=smoke"]))
    agent = build_agent(cfg, env_spaces(cfg.env))
    step = greedy_step(cfg, agent)
    spec = describe(cfg, step, "latest", "onnx")
    example = example_inputs(step, spec["observation_size"])
    with quiet_exporters():
        write_onnx(exported_program(step, example), example, spec, tmp_path / "agent.onnx")
    ours, returns = play_trajrl(cfg, agent, [0, 1])
    theirs, their_returns = play_exported(Exported(tmp_path / "agent.onnx"), [0, 1], steer=ours)
    assert same_actions(theirs, ours, atol=1e-5) is None
    assert their_returns == pytest.approx(returns, rel=1e-12)


def test_the_state_restarts_at_an_episode_start_whatever_is_passed():
    """``episode_start`` zeroes the state (the memory and the previous action) before the step:
    a state of noise gives the same action and next state as zeros there, and another one elsewhere."""
    cfg = validate(trajrl.compose(["debug=smoke"]))
    step = greedy_step(cfg, build_agent(cfg, env_spaces(cfg.env)))
    obs, noise = torch.randn(4, 2), 5 * torch.randn(4, step.state_size)
    start, going = torch.ones(4, dtype=torch.bool), torch.zeros(4, dtype=torch.bool)
    with torch.no_grad():
        zero = step(obs, torch.zeros_like(noise), start)
        for got, want in zip(step(obs, noise, start), zero):
            torch.testing.assert_close(got, want)
        assert not torch.equal(step(obs, noise, going)[1], zero[1])


def test_a_wrong_observation_is_named_with_what_the_agent_takes():
    cfg = validate(trajrl.compose(["debug=smoke"]))
    step = greedy_step(cfg, build_agent(cfg, env_spaces(cfg.env)))
    agent = Exported.of(step, describe(cfg, step, "latest", "torch"))
    with pytest.raises(ValueError, match=r"shape \(1, 4\): the agent takes \[B, 2\] float32, gymnasium.spaces.flatten"):
        agent(np.zeros((1, 4), np.float32), agent.initial_state(1), np.ones(1, bool))


def test_the_files_spaces_come_from_the_environment_made_with_the_runs_kwargs():
    """An environment kwarg that is a list reaches gymnasium as a list, as in training (``raw_spaces``)."""
    import gymnasium as gym
    from omegaconf import OmegaConf

    class Sized(gym.Env):
        def __init__(self, sizes=(1,)):
            self.observation_space = gym.spaces.Box(-1.0, 1.0, (sum(sizes),))
            self.action_space = gym.spaces.Discrete(2)

    gym.register("trajrl-test/Sized-v0", entry_point=Sized)
    env = OmegaConf.create({"id": "trajrl-test/Sized-v0", "kwargs": {"sizes": [2, 3]}})
    observations, actions = raw_spaces(env)
    assert observations.shape == (5,) and actions.n == 2
