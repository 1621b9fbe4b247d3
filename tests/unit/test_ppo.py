"""PPO on whole episodes: what is easy to get wrong with padding and recurrence."""

import pytest
import torch
from helpers import random_episodes

from trajrl.algos.ppo.learner import PPO, masked_gae
from trajrl.algos.ppo.networks import ActorCritic
from trajrl.algos.ppo.settings import PPOSettings
from trajrl.base.keys import LOG_PROB_KEY, MASK_KEY


def gae_of_one_episode(reward, value, next_value, terminated, gamma, lam):
    """Textbook GAE on one unpadded episode, step by step."""
    advantage, running = [0.0] * len(reward), 0.0
    for t in reversed(range(len(reward))):
        delta = reward[t] + gamma * (1 - terminated[t]) * next_value[t] - value[t]
        running = delta + gamma * lam * running
        advantage[t] = running
    return torch.tensor(advantage)


@pytest.mark.parametrize("seed", range(10))
def test_masked_gae_equals_gae_computed_on_each_unpadded_episode(seed):
    gen = torch.Generator().manual_seed(seed)
    lengths = torch.randint(1, 30, (6,), generator=gen)
    lengths[0] = 1
    horizon = int(lengths.max()) + 3
    mask = torch.arange(horizon) < lengths.unsqueeze(-1)
    reward, value, next_value = (torch.randn(6, horizon, generator=gen) for _ in range(3))
    terminated = torch.zeros(6, horizon, dtype=torch.bool)
    ends_by_failure = torch.rand(6, generator=gen) < 0.5  # the others are cut by a time limit
    terminated[torch.arange(6), lengths - 1] = ends_by_failure
    advantage = masked_gae(reward, value, next_value, terminated, mask, 0.97, 0.9)
    for row, length in enumerate(lengths.tolist()):
        expected = gae_of_one_episode(
            reward[row, :length].tolist(),
            value[row, :length].tolist(),
            next_value[row, :length].tolist(),
            terminated[row, :length].float().tolist(),
            0.97,
            0.9,
        )
        torch.testing.assert_close(advantage[row, :length], expected)
        assert (advantage[row, length:] == 0).all()


def perturb_padding(batch):
    noisy = batch.clone()
    pad = ~batch.get(MASK_KEY)
    for key in ("observation", ("next", "observation")):
        noisy.get(key)[pad] = 1e3 * torch.randn(int(pad.sum()), noisy.get(key).shape[-1])
    noisy.get("action")[pad] = 1 - noisy.get("action")[pad]
    noisy.get(LOG_PROB_KEY)[pad] = 5.0
    noisy.get(("next", "reward"))[pad] = -1e3
    noisy.get(("next", "terminated"))[pad] = True
    return noisy


@pytest.mark.parametrize("rnn", [None, "lstm", "gru", "lru", "ffm"])
def test_padded_steps_change_no_loss_no_advantage_and_no_statistic(rnn):
    batch = random_episodes([1, 7, 3, 12])
    results = []
    for data in (batch, perturb_padding(batch)):
        torch.manual_seed(0)
        ppo = PPO(ActorCritic(3, 2, [16], rnn, 8), PPOSettings(epochs=2, anneal_lr=False), minibatch_episodes=2)
        advantage, returns = ppo.advantages(data)
        loss, stats = ppo.loss(data, advantage, returns)
        results.append((advantage[data.get(MASK_KEY)], loss.detach(), stats, ppo.update(data)))
    (adv_a, loss_a, stats_a, update_a), (adv_b, loss_b, stats_b, update_b) = results
    torch.testing.assert_close(adv_a, adv_b)
    torch.testing.assert_close(loss_a, loss_b)
    for name in stats_a:
        torch.testing.assert_close(stats_a[name], stats_b[name])
    assert update_a == pytest.approx(update_b, rel=1e-5)


def test_reward_scale_divides_by_the_running_std_of_the_discounted_return():
    """algo.normalize_rewards: R_t = gamma R_{t-1} + r_t within each episode (padding
    excluded); rewards are divided by the std of every R seen so far."""
    from trajrl.algos.ppo.learner import RewardScale

    gen = torch.Generator().manual_seed(0)
    scale = RewardScale(gamma=0.9)
    seen = []
    for lengths in ([5, 3], [4, 4, 2]):
        reward = torch.randn(len(lengths), max(lengths), generator=gen) * 10
        mask = torch.arange(max(lengths)).unsqueeze(0) < torch.tensor(lengths).unsqueeze(1)
        for row, n in zip(reward, lengths):
            running = 0.0
            for r in row[:n].tolist():
                running = 0.9 * running + r
                seen.append(running)
        scaled = scale(reward, mask)
        expected_std = torch.tensor(seen, dtype=torch.float64).std(unbiased=False).item()
        torch.testing.assert_close(scaled, reward / expected_std, rtol=1e-5, atol=1e-6)


def test_the_learning_rate_and_clip_range_decay_linearly_over_the_run():
    """total_frames of four equal batches: each batch learns at the share of the run learnt before
    it (the first at lr and clip_epsilon, the middle one at half, the last at a quarter of the way
    to 0 and clip_epsilon_end), in its loss too (a ratio past the range is clipped there)."""
    batch = random_episodes([5, 5])
    frames = int(batch.get(MASK_KEY).sum())
    settings = PPOSettings(lr=1e-3, clip_epsilon=0.2, clip_epsilon_end=0.04, epochs=1)
    ppo = PPO(ActorCritic(3, 2, [8], None, 8), settings, minibatch_episodes=2, total_frames=4 * frames)
    seen = [ppo.update(batch) for _ in range(4)]
    assert [s["lr"] for s in seen] == pytest.approx([1e-3, 0.75e-3, 0.5e-3, 0.25e-3])
    assert [s["clip_epsilon"] for s in seen] == pytest.approx([0.2, 0.16, 0.12, 0.08])
    ratio_past = batch.clone()
    ratio_past.set(LOG_PROB_KEY, ratio_past.get(LOG_PROB_KEY) - 0.1)  # every ratio ~1.1: past 0.08
    advantage, returns = ppo.advantages(ratio_past)
    assert ppo.loss(ratio_past, advantage, returns)[1]["clip_fraction"] > 0.5
    constant = PPO(ActorCritic(3, 2, [8], None, 8), PPOSettings(anneal_lr=False, epochs=1), total_frames=frames)
    assert [constant.update(batch)["clip_epsilon"] for _ in range(2)] == [0.2, 0.2]


def test_target_kl_stops_a_batch_before_the_step_that_would_move_the_policy_past_it():
    """Five passes over one minibatch acted by the current policy: the first looks at KL 0 and
    steps; with target_kl=1e-9 the second sees the step's KL and stops before stepping (1 gradient
    step); target_kl=10 lets all five run; a batch acted by another policy is past it at once:
    no step, the weights unchanged."""
    batch = random_episodes([5, 5])

    def learner(target_kl):
        net = ActorCritic(3, 2, [8], None, 8)
        with torch.no_grad():
            batch.set(LOG_PROB_KEY, net.distribution(batch.get("observation")).log_prob(batch.get("action")))
        return PPO(net, PPOSettings(epochs=5, target_kl=target_kl), minibatch_episodes=2, total_frames=10**6)

    assert learner(1e-9).update(batch)["gradient_steps"] == 1
    assert learner(10.0).update(batch)["gradient_steps"] == 5
    ppo = learner(1e-3)
    batch.set(LOG_PROB_KEY, batch.get(LOG_PROB_KEY) - 0.5)  # acted by a policy a ratio of ~1.6 away
    before = [p.clone() for p in ppo.net.parameters()]
    stats = ppo.update(batch)
    assert stats["gradient_steps"] == 0 and stats["kl"] > 1.5e-3 and stats["grad_norm"] == 0
    assert all(torch.equal(a, b) for a, b in zip(before, ppo.net.parameters(), strict=True))
