"""How observations reach the networks: standardised with the statistics measured at the start,
the same in every network of a learner, which they do not leave, and in the policy the collectors act with."""

import pytest
import torch
from helpers import wait_for_frames

import trajrl
from trajrl.algos.networks import Standardize
from trajrl.base.keys import MASK_KEY
from trajrl.replay.episodes import as_sequences


def standardizers(module: torch.nn.Module) -> list[Standardize]:
    return [m for m in module.modules() if isinstance(m, Standardize)]


def test_the_statistics_do_not_move_with_updates():
    cfg = trajrl.compose(["collector=sync", "debug=smoke", "algo=r2d2"])
    with trajrl.build(cfg) as pipe:
        norm = standardizers(pipe.algo.qnet)[0]
        start = norm.loc.clone(), norm.scale.clone()
        pipe.collector.start()
        wait_for_frames(pipe, 600)
        pipe.algo.update(pipe.sequences.sample())
        assert torch.equal(norm.loc, start[0]) and torch.equal(norm.scale, start[1])


def test_a_checkpoint_that_counted_tracked_batches_loads_its_statistics():
    """Older checkpoints hold each standardiser's count of batches tracked (``tracked``), which
    nothing reads now: a strict load takes their statistics and drops the count."""
    loc, scale = torch.tensor([1.0, -2.0]), torch.tensor([0.5, 3.0])
    older = {"loc": loc, "scale": scale, "tracked": torch.tensor(12)}
    norm = Standardize(2)
    norm.load_state_dict(older)
    assert torch.equal(norm.loc, loc) and torch.equal(norm.scale, scale)
    assert set(norm.state_dict()) == {"loc", "scale"}


def test_ppo_acts_and_learns_with_the_same_statistics_before_and_after_an_update():
    """The ratio of a batch's first epoch is 1 (the learner gives the log-probs the policy acted
    with), for a batch acted before an update and for an episode acted with the weights pushed after it."""
    from trajrl.algos.ppo.networks import LOG_PROB_KEY

    cfg = trajrl.compose(
        [
            "algo=ppo",
            "collector=sync",
            "env=cartpole_novel",
            "algo.recurrent=true",
            "trajs_per_batch=6",
            "debug=smoke",
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
        assert torch.equal(norm.loc, before)
        pipe.acting.pull()  # the loop's weight push
        env = pipe.env_fn()
        with torch.no_grad():  # an episode acted with the new weights
            episode = env.rollout(500, pipe.policy).unsqueeze(0)
        env.close()
        episode.set(MASK_KEY, torch.ones(episode.shape, dtype=torch.bool))
        learner_reproduces_the_log_probs(episode)


@pytest.mark.parametrize(
    "algo, env", [("r2d2", "cartpole_novel"), ("rsac", "pendulum_novel"), ("ppo", "cartpole_novel")]
)
def test_the_measured_statistics_reach_every_network_of_each_algorithm(algo, env):
    """Every network of the learner (online and target, actor and critics) standardises with the
    statistics the factory measured; the policy that acts, with the same."""
    from trajrl.configuration.compose import validate
    from trajrl.envs.gym_envs import env_spaces
    from trajrl.factory.agent import agent_needs, build_agent

    cfg = validate(trajrl.compose([f"algo={algo}", f"env={env}", "debug=smoke"]))
    spaces = env_spaces(cfg.env)
    measured = agent_needs(cfg, spaces).inputs
    agent = build_agent(cfg, spaces)
    nets = {"r2d2": ["qnet", "target"], "rsac": ["actor", "critics", "target_critics"], "ppo": ["net"]}[algo]
    norms = [n for name in nets for n in standardizers(getattr(agent.algo, name))] + standardizers(agent.policy)
    assert len(norms) >= {"r2d2": 3, "rsac": 6, "ppo": 2}[algo]
    assert not torch.equal(torch.as_tensor(measured.scale).float(), torch.ones(len(measured.scale)))
    for norm in norms:
        torch.testing.assert_close(norm.loc, torch.as_tensor(measured.loc).float())
        torch.testing.assert_close(norm.scale, torch.as_tensor(measured.scale).float())
