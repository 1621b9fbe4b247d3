"""How observations reach the networks: standardisation statistics that follow the
data the learner trains on (``algo.observation_stats=running``), the same in every
network of a learner, and in the policy the collectors act with."""

import pytest
import torch
from helpers import wait_for_frames
from tensordict import TensorDict

import trajrl
from trajrl.algos.networks import Standardize
from trajrl.base.keys import MASK_KEY
from trajrl.replay.episodes import as_sequences


def standardizers(module: torch.nn.Module) -> list[Standardize]:
    return [m for m in module.modules() if isinstance(m, Standardize)]


def test_running_statistics_average_every_batch_then_move_at_the_rate():
    torch.manual_seed(0)
    start_loc, start_scale = torch.tensor([0.0, 0.0]), torch.tensor([1.0, 1.0])
    norm = Standardize(2, start_loc, start_scale)
    moving = torch.tensor([True, False])  # the second column is a code: never moved
    batch = torch.randn(10_000, 2) * 0.1 + 3.0
    norm.track(batch, moving, min_rate=1e-3)
    # The first batch counts as much as the starting statistics: mean and second moment halfway.
    torch.testing.assert_close(norm.loc[0], 0.5 * batch[:, 0].mean())
    second = 0.5 * (1.0 + batch[:, 0].square().mean())
    torch.testing.assert_close(norm.scale[0], (second - norm.loc[0] ** 2).sqrt())
    assert norm.loc[1] == 0.0 and norm.scale[1] == 1.0
    for _ in range(3_000):
        norm.track(torch.randn(500, 2) * 0.1 + 3.0, moving, min_rate=1e-3)
    assert abs(float(norm.loc[0]) - 3.0) < 0.01 and abs(float(norm.scale[0]) - 0.1) < 0.01
    assert int(norm.tracked) == 3_001


def test_a_small_std_far_from_zero_is_kept_and_a_constant_keeps_the_std_floor():
    torch.manual_seed(0)
    far = Standardize(1, torch.tensor([0.0]), torch.tensor([1.0]))
    constant = Standardize(1, torch.tensor([0.0]), torch.tensor([1.0]))
    for _ in range(3_000):
        far.track(1000.0 + 0.05 * torch.randn(64, 1), torch.tensor([True]), min_rate=1e-2)
        constant.track(torch.full((8, 1), 2.0), torch.tensor([True]), min_rate=1e-2)
    assert abs(float(far.loc) - 1000.0) < 0.01 and abs(float(far.scale) - 0.05) < 0.005
    assert abs(float(constant.loc) - 2.0) < 1e-4 and float(constant.scale) == pytest.approx(1e-3)


@pytest.mark.parametrize("algo", ["r2d2", "rsac"])
def test_off_policy_learners_standardise_with_the_statistics_of_the_slices_they_learn_from(algo):
    """After updates with observation_stats=running, every network of the learner (online,
    target, actor, critics) holds the same statistics, moved from the random policy's
    toward the sampled observations; the policy the collectors act with gets them with the weights."""
    env = "cartpole_novel" if algo == "r2d2" else "pendulum_novel"
    cfg = trajrl.compose(
        [f"algo={algo}", f"env={env}", "collector=sync", "debug=smoke", "algo.observation_stats=running"]
    )
    with trajrl.build(cfg) as pipe:
        norms = standardizers(pipe.algo.qnet if algo == "r2d2" else pipe.algo.actor)
        start = norms[0].loc.clone(), norms[0].scale.clone()
        pipe.collector.start()
        wait_for_frames(pipe, 600)
        batches = [pipe.sequences.sample() for _ in range(5)]
        for batch in batches:
            pipe.algo.update(batch)
        learner = (
            [pipe.algo.qnet, pipe.algo.target]
            if algo == "r2d2"
            else [pipe.algo.actor, pipe.algo.critics, pipe.algo.target_critics]
        )
        every = [n for net in learner for n in standardizers(net)]
        assert len(every) == (2 if algo == "r2d2" else 5)
        for n in every:
            torch.testing.assert_close(n.loc, every[0].loc)
            torch.testing.assert_close(n.scale, every[0].scale)
            assert int(n.tracked) == 5
        assert not torch.allclose(every[0].loc, start[0]) and not torch.allclose(every[0].scale, start[1])
        # The start and each batch weigh the same so far: the loc is the mean of their means.
        means = [start[0]] + [b.get("observation")[b.get(MASK_KEY)].mean(0) for b in batches]
        torch.testing.assert_close(every[0].loc, torch.stack(means).mean(0))
        pipe.acting.pull()  # as the loop does before each push
        pushed = TensorDict.from_module(pipe.policy)  # what the loop pushes to the collectors
        locs = [v for k, v in pushed.items(True, True) if k[-2:] == ("standardize", "loc")]
        assert locs and all(torch.equal(loc, every[0].loc) for loc in locs)


def test_fixed_statistics_do_not_move():
    cfg = trajrl.compose(["collector=sync", "debug=smoke", "algo=r2d2"])
    with trajrl.build(cfg) as pipe:
        norm = standardizers(pipe.algo.qnet)[0]
        start = norm.loc.clone()
        pipe.collector.start()
        wait_for_frames(pipe, 600)
        pipe.algo.update(pipe.sequences.sample())
        assert torch.equal(norm.loc, start) and int(norm.tracked) == 0


def test_ppo_tracks_after_learning_so_that_acting_and_learning_use_the_same_statistics():
    """The statistics move after a batch's epochs, not before: the ratio of a batch's first
    epoch is 1 (the log-probs the policy acted with), before and after the statistics moved."""
    from trajrl.algos.ppo.networks import LOG_PROB_KEY

    cfg = trajrl.compose(
        [
            "algo=ppo",
            "collector=sync",
            "env=cartpole_novel",
            "algo.recurrent=true",
            "trajs_per_batch=6",
            "debug=smoke",
            "algo.observation_stats=running",
        ]
    )

    def learner_reproduces_the_log_probs(episodes):
        mask = episodes.get(MASK_KEY)
        with torch.no_grad():
            logits = pipe.algo.net.actor.sequence(episodes.get("observation"))
            log_prob = torch.distributions.Categorical(logits=logits).log_prob(
                episodes.get("action").reshape(mask.shape)
            )
        torch.testing.assert_close(log_prob[mask], episodes.get(LOG_PROB_KEY).reshape(mask.shape)[mask])

    with trajrl.build(cfg) as pipe:
        batch = next(iter(pipe.collector))
        if batch.batch_dims == 1:  # traj_format=cat: as the episodic loop reads it
            batch = as_sequences(batch, batch.get("is_init"))
        learner_reproduces_the_log_probs(batch)
        norm = standardizers(pipe.algo.net.actor)[0]
        before = norm.loc.clone()
        pipe.algo.update(batch)
        assert not torch.equal(norm.loc, before) and int(norm.tracked) == 1
        pipe.acting.pull()  # the loop's weight push
        env = pipe.env_fn()
        with torch.no_grad():  # an episode acted with the new weights and statistics
            episode = env.rollout(500, pipe.policy).unsqueeze(0)
        env.close()
        episode.set(MASK_KEY, torch.ones(episode.shape, dtype=torch.bool))
        learner_reproduces_the_log_probs(episode)


@pytest.mark.parametrize(
    "algo, env", [("r2d2", "cartpole_novel"), ("rsac", "pendulum_novel"), ("ppo", "cartpole_novel")]
)
def test_squash_observations_reaches_every_network_of_each_algorithm(algo, env):
    from trajrl.algos.networks import ObservationInputs
    from trajrl.configuration.compose import validate
    from trajrl.envs.gym_envs import env_spaces
    from trajrl.factory.agent import build_agent

    for squash in (False, True):
        cfg = validate(
            trajrl.compose(
                [f"algo={algo}", f"env={env}", "debug=smoke", f"algo.squash_observations={str(squash).lower()}"]
            )
        )
        agent = build_agent(cfg, env_spaces(cfg.env))
        learner = agent.algo
        nets = {
            "r2d2": ["qnet", "target"],
            "rsac": ["actor", "critics", "target_critics"],
            "ppo": ["net"],
        }[algo]
        nets = [getattr(learner, name) for name in nets]
        inputs = [m for net in nets for m in net.modules() if isinstance(m, ObservationInputs)]
        assert inputs and all(m.squash is squash for m in inputs)
