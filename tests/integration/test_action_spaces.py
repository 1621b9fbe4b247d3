"""Actions of several parts (PPO: MultiDiscrete, MultiBinary) and actions no algorithm takes."""

import io

import action_envs  # noqa: F401 (registers the environments)
import gymnasium as gym
import pytest
import torch
from torch.distributions import Bernoulli, Categorical

import trajrl
from trajrl.algos.ppo.networks import ActorCritic, Bernoullis, MultiCategorical
from trajrl.base.errors import ConfigError
from trajrl.base.keys import LOG_PROB_KEY
from trajrl.configuration.compose import validate
from trajrl.envs.gym_envs import env_spaces
from trajrl.envs.spaces import MULTI_BINARY, MULTI_DISCRETE
from trajrl.training.progress import Progress


def test_a_multi_discrete_log_prob_and_entropy_are_the_sums_of_their_parts():
    torch.manual_seed(0)
    logits = torch.randn(4, 5, 3 + 4 + 2)
    dist = MultiCategorical(logits, (3, 4, 2))
    action = dist.sample()
    assert action.shape == (4, 5, 3) and action.dtype == torch.long
    parts = [Categorical(logits=part) for part in logits.split([3, 4, 2], -1)]
    torch.testing.assert_close(dist.log_prob(action), sum(p.log_prob(action[..., i]) for i, p in enumerate(parts)))
    torch.testing.assert_close(dist.entropy(), sum(p.entropy() for p in parts))
    torch.testing.assert_close(dist.deterministic_sample, torch.stack([p.probs.argmax(-1) for p in parts], -1))
    for i, (low, high) in enumerate(((0, 3), (3, 7), (7, 9))):  # each part samples its own categories
        draws = MultiCategorical(logits[:1, :1].expand(2000, 1, 9), (3, 4, 2)).sample()[..., i]
        assert set(draws.unique().tolist()) == set(range(high - low))


def test_a_multi_binary_log_prob_and_entropy_are_the_sums_over_its_bits():
    torch.manual_seed(0)
    logits = torch.randn(6, 4)
    dist = Bernoullis(logits)
    bits = dist.sample().to(torch.int8)  # as the environment's spec stores them
    bit = Bernoulli(logits=logits)
    torch.testing.assert_close(dist.log_prob(bits), bit.log_prob(bits.float()).sum(-1))
    torch.testing.assert_close(dist.entropy(), bit.entropy().sum(-1))
    torch.testing.assert_close(dist.deterministic_sample, (logits > 0).float())


@pytest.mark.parametrize(
    "env_id, kind, parts",
    [("MatchMultiDiscrete-v0", MULTI_DISCRETE, (3, 4, 2)), ("MatchMultiBinary-v0", MULTI_BINARY, ())],
)
def test_the_learner_scores_the_acted_actions_as_the_policy_did(env_id, kind, parts):
    """The log-probability stored while acting is the learner's of the same action: the first
    PPO ratio is 1 (recurrent: from the episode's start, as the acting state was)."""
    spaces = env_spaces(trajrl.compose(["env=gym", f"env.id={env_id}", "env.import_module=action_envs"]).env)
    assert (spaces.action_kind, spaces.action_parts) == (kind, parts)
    cfg = trajrl.compose(
        [
            "algo=ppo",
            "algo.recurrent=true",
            "collector=sync",
            "debug=smoke",
            "env=gym",
            f"env.id={env_id}",
            "env.import_module=action_envs",
        ]
    )
    with trajrl.build(cfg) as pipe:
        env = pipe.env_fn()
        with torch.no_grad():
            steps = env.rollout(10, pipe.policy)  # one whole episode
            env.close()
            net: ActorCritic = pipe.algo.net
            log_prob = net.distribution(steps["observation"].unsqueeze(0)).log_prob(steps["action"].unsqueeze(0))
    assert steps["action"].shape == (10, len(parts) or 4)
    torch.testing.assert_close(log_prob[0], steps[LOG_PROB_KEY], rtol=1e-5, atol=1e-5)


RANDOM_RETURN = {"MatchMultiDiscrete-v0": 10 * (1 / 3 + 1 / 4 + 1 / 2) / 3, "MatchMultiBinary-v0": 10 * 0.5}


@pytest.mark.parametrize(
    "env_id, recurrent",
    [
        ("MatchMultiDiscrete-v0", False),
        ("MatchMultiBinary-v0", False),
        # -m slow: the recurrent network's multi-part heads score the acted actions as the policy
        # did (test_the_learner_scores_the_acted_actions_as_the_policy_did), and its update is
        # recurrent PPO's (the rppo smoke runs)
        pytest.param("MatchMultiDiscrete-v0", True, marks=pytest.mark.slow),
        pytest.param("MatchMultiBinary-v0", True, marks=pytest.mark.slow),
    ],
)
def test_ppo_learns_actions_of_several_parts(env_id, recurrent, tmp_path):
    """A test-sized run (``train``, as the CLI runs it) ends well above a random policy (3.6 and
    5.0 of 10; reading the target: 10). The recurrent one learns at lr 1e-2 to fit the same 3,000
    frames (at the default 1e-3 it needs about twice as many)."""
    faster = ["algo.lr=1e-2"] if recurrent else []
    cfg = trajrl.compose(
        [
            "algo=ppo",
            f"algo.recurrent={str(recurrent).lower()}",
            *faster,
            "env=gym",
            f"env.id={env_id}",
            "env.import_module=action_envs",
            "total_frames=3000",
            "loop.eval_every_frames=1500",
            "logger.plots=false",
        ]
    )
    final = trajrl.train(cfg, tmp_path / "run", progress=Progress(3000, stream=io.StringIO()))
    assert final["eval/best_return"] >= RANDOM_RETURN[env_id] + 1.5, final["eval/best_return"]


@pytest.mark.parametrize("env_id", ["DictActions-v0", "TupleActions-v0"])
@pytest.mark.parametrize("algo", ["ppo", "r2d2", "rsac"])
def test_actions_no_algorithm_takes_are_refused_at_the_start(env_id, algo):
    cfg = trajrl.compose([f"algo={algo}", "env=gym", f"env.id={env_id}", "env.import_module=action_envs"])
    with pytest.raises(ConfigError) as refused:
        validate(cfg)
    space = "Dict('move': Discrete(3), 'push': " if env_id.startswith("Dict") else "Tuple(Discrete(3), "
    assert str(refused.value) == (
        f"env.id={env_id!r}: has {space}Box(-1.0, 1.0, (1,), float32)) actions, which no algorithm takes: wrap them "
        "into one of Discrete, continuous (a 1-D Box), MultiDiscrete (1-D), MultiBinary (1-D) (algo=ppo takes each "
        "of these)"
    )
    assert isinstance(gym.make(env_id).action_space, (gym.spaces.Dict, gym.spaces.Tuple))
