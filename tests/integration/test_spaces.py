"""Every observation space gymnasium has, and continuous actions for PPO: flattened as
gymnasium flattens them, encoded part by part, and learnt from by each algorithm's update."""

import math

import gymnasium as gym
import numpy as np
import pytest
import torch
from space_envs import KINDS

import trajrl
from trajrl.algos.networks import Inputs, ObservationInputs
from trajrl.base.errors import ConfigError
from trajrl.base.keys import LOG_PROB_KEY, MASK_KEY, SAMPLE_KEY
from trajrl.configuration.compose import validate
from trajrl.envs.spaces import CODES, IMAGE, NUMBERS, flat_observations, parts_of


def spaces_env(kind: str, actions: str = "discrete") -> list[str]:
    return [
        "env.id=Spaces-v0",
        "env.import_module=space_envs",
        f"+env.kwargs.kind={kind}",
        f"+env.kwargs.actions={actions}",
    ]


@pytest.mark.parametrize("kind", KINDS)
def test_the_flat_observation_is_gymnasiums_flatten_and_its_parts_tile_it(kind):
    import space_envs

    raw = gym.make("Spaces-v0", kind=kind)
    env = flat_observations(gym.make("Spaces-v0", kind=kind))
    obs, _ = env.reset(seed=3)
    raw_obs, _ = raw.reset(seed=3)
    expected = gym.spaces.flatten(raw.observation_space, raw_obs)
    np.testing.assert_array_equal(obs, expected.astype(obs.dtype))
    assert obs.shape == env.observation_space.shape and obs.dtype == env.observation_space.dtype
    assert obs.dtype == (np.uint8 if kind.startswith("image") else np.float32)
    parts = parts_of(raw.observation_space)
    assert [p.start for p in parts] == [0] + list(np.cumsum([p.size for p in parts])[:-1])
    assert sum(p.size for p in parts) == obs.size
    kinds = {
        "box2d": [NUMBERS],
        "float64": [NUMBERS],
        "image": [IMAGE],
        "image_chw": [IMAGE],
        "discrete": [CODES],
        "multi_discrete": [CODES],
        "multibinary": [CODES],
        "dict": [IMAGE, CODES, NUMBERS],
        "tuple": [CODES, NUMBERS, CODES],
    }[kind]
    assert [p.kind for p in parts] == kinds
    for part in parts:  # an image part holds the image, pixel for pixel
        if part.kind == IMAGE:
            image = raw_obs["camera"] if kind == "dict" else raw_obs
            np.testing.assert_array_equal(obs[part.start : part.start + part.size], image.reshape(-1))
    assert space_envs  # the module registered Spaces-v0


def test_codes_are_not_standardised_and_images_reach_a_convolution():
    """Standardisation statistics apply to numbers only; a one-hot code stays 0/1."""
    parts = parts_of(gym.make("Spaces-v0", kind="dict").observation_space)
    size = sum(p.size for p in parts)
    inputs = ObservationInputs(parts, Inputs(torch.full((size,), 5.0), torch.full((size,), 2.0)))
    obs = torch.zeros(4, size)
    obs[:, 1600 + 1] = 1.0  # the cue code
    obs[:, 1603] = 7.0  # the position
    obs[:, 1604] = -19.0
    out = inputs(obs)
    assert out.shape == (4, inputs.out_features) and inputs.out_features > 5
    torch.testing.assert_close(out[:, :3], obs[:, 1600:1603])  # codes as they are
    standardised = torch.tensor([1.0, -12.0]).expand(4, 2)  # (7 - 5) / 2, (-19 - 5) / 2
    torch.testing.assert_close(out[:, 3:5], standardised)
    assert len(inputs.images) == 1 and isinstance(inputs.images[0].net[0], torch.nn.Conv2d)


def test_a_space_with_no_flat_form_and_actions_an_algorithm_cannot_take_are_refused():
    with pytest.raises(ValueError, match="no fixed-size flat form"):
        parts_of(gym.spaces.Text(5))
    with pytest.raises(ConfigError, match=r"algo=r2d2 takes Discrete actions: .* \(use algo=ppo or algo=rsac\)"):
        validate(trajrl.compose(["algo=r2d2", "env=pendulum_novel"]))
    refused = r"has MultiDiscrete.*algo=r2d2 takes Discrete actions \(use algo=ppo or algo=rsac\)"
    with pytest.raises(ConfigError, match=refused):
        validate(
            trajrl.compose(
                ["algo=r2d2", "env.id=Spaces-v0", "env.import_module=space_envs", "+env.kwargs.actions=multi"]
            )
        )
    assert validate(trajrl.compose(["algo=rsac", "env=cartpole_novel"])).algo.name == "rsac"  # SAC-discrete


def learn_once(pipe) -> dict:
    """One update of the pipeline's learner on data its own collector gathered, and the
    new weights pulled into the collector's policy (as the loop's weight push does); the learner
    is what ``trajrl.algos.learner.Learner`` says a learner is."""
    from trajrl.algos.learner import Learner

    assert isinstance(pipe.algo, Learner) and isinstance(pipe.algo.device, torch.device)
    if pipe.on_policy:  # PPO: a batch of complete episodes
        stats = pipe.algo.update(next(iter(pipe.collector)))
    else:
        for _ in pipe.collector:
            if pipe.buffer.write_count >= 200:
                break
        stats = pipe.algo.update(pipe.sequences.sample())
    pipe.acting.pull()
    return stats


def algo_overrides(algo: str) -> list[str]:
    return {"r2d2": ["algo=r2d2"], "rsac": ["algo=rsac"], "ppo": ["algo=ppo", "algo.recurrent=true"]}[algo]


def space_cases() -> list:
    """Every space kind with every algorithm (and PPO with both kinds of actions): each kind
    with one of them and the richest space (a Dict with an image) with all run by default;
    the rest, which repeat those code paths, with -m slow."""
    learners = [("r2d2", "discrete"), ("rsac", "continuous"), ("ppo", "discrete"), ("ppo", "continuous")]
    cases = []
    for i, kind in enumerate(KINDS):
        for j, (algo, actions) in enumerate(learners):
            default = j == i % len(learners) or kind == "dict"
            cases.append(pytest.param(kind, algo, actions, marks=() if default else pytest.mark.slow))
    return cases


CASES = space_cases()


@pytest.mark.parametrize("kind,algo,actions", CASES)
def test_each_algorithm_learns_from_each_observation_space(kind, algo, actions):
    cfg = trajrl.compose(["collector=sync", "debug=smoke", *algo_overrides(algo), *spaces_env(kind, actions)])
    with trajrl.build(cfg) as pipe:
        weights = [p.detach().clone() for p in pipe.policy.parameters()]
        stats = learn_once(pipe)
        assert all(math.isfinite(v) for v in stats.values()), stats
        assert any(not torch.equal(w, p) for w, p in zip(weights, pipe.policy.parameters())), "nothing learnt"


@pytest.mark.parametrize(
    "env_id,algo",
    [("FrozenLake-v1", "r2d2"), ("FrozenLake-v1", "ppo"), ("Blackjack-v1", "r2d2"), ("Blackjack-v1", "ppo")],
)
def test_gymnasiums_own_discrete_and_tuple_observations_are_learnt_from(env_id, algo):
    """FrozenLake observes a Discrete cell, Blackjack a Tuple of three Discrete."""
    cfg = trajrl.compose(["collector=sync", "debug=smoke", *algo_overrides(algo), f"env.id={env_id}"])
    with trajrl.build(cfg) as pipe:
        weights = [p.detach().clone() for p in pipe.policy.parameters()]
        stats = learn_once(pipe)
        assert all(math.isfinite(v) for v in stats.values()), stats
        assert any(not torch.equal(w, p) for w, p in zip(weights, pipe.policy.parameters()))


@pytest.mark.parametrize("recurrent", [False, True])
def test_ppo_continuous_log_probs_are_the_gaussians_of_the_sample_and_the_env_gets_it_clipped(recurrent):
    """By hand: log N(u; mu, sigma) summed over the action, u the stored sample before
    clipping; the environment's action is u clipped to [-1, 1] and scaled to [-2, 2]."""
    cfg = trajrl.compose(
        [
            "collector=sync",
            "algo=ppo",
            f"algo.recurrent={recurrent}",
            "env=pendulum_novel",
            "debug=smoke",
            "trajs_per_batch=2",
        ]
    )
    with trajrl.build(cfg) as pipe:
        with torch.no_grad():
            pipe.algo.net.std.log_std.fill_(0.3)  # wide: some samples fall outside the bounds
        pipe.acting.pull()
        batch = next(iter(pipe.collector))
    mask = batch.get(MASK_KEY)
    net = pipe.algo.net
    with torch.no_grad():
        mean = net.actor.sequence(batch.get("observation"))
    sigma = math.exp(0.3)
    u = batch.get(SAMPLE_KEY)
    by_hand = (-0.5 * ((u - mean) / sigma) ** 2 - math.log(sigma) - 0.5 * math.log(2 * math.pi)).sum(-1)
    stored = batch.get(LOG_PROB_KEY).reshape(mask.shape)
    torch.testing.assert_close(by_hand[mask], stored[mask], rtol=1e-5, atol=1e-5)
    action = batch.get("action").reshape(u.shape)
    torch.testing.assert_close(action[mask], 2.0 * u[mask].clamp(-1, 1))
    assert (u[mask].abs() > 1).any() and (action[mask].abs() <= 2.0).all()
    with torch.no_grad():  # the learner's log-probability of the same sample: a first ratio of exactly 1
        learnt = net.distribution(batch.get("observation")).log_prob(u)
    torch.testing.assert_close(learnt[mask], stored[mask], rtol=1e-5, atol=1e-5)
