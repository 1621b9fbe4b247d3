"""Recurrent SAC: squashed-Gaussian log-probs, burn-in, padding, and the state the actor used."""

import copy
import math
import warnings

import pytest
import torch
from helpers import slices
from torch import nn
from torch.distributions import AffineTransform, Normal, TanhTransform, TransformedDistribution

from trajrl.algos.memory import FFM, LRU
from trajrl.algos.networks import read_statistics
from trajrl.algos.rsac.learner import RSAC
from trajrl.algos.rsac.networks import (
    RecurrentActor,
    RecurrentCritic,
    SquashedGaussian,
    run_core,
)
from trajrl.algos.rsac.settings import RSACSettings
from trajrl.base.keys import MASK_KEY, TD_KEY


def test_squashed_gaussian_log_prob_is_the_change_of_variables():
    torch.manual_seed(0)
    head = SquashedGaussian(5, 2, low=torch.tensor([-2.0, 0.0]), high=torch.tensor([2.0, 1.0]))
    features = torch.randn(7, 5)
    action, log_prob = head.sample(features)
    mean, log_std = head.net(features).chunk(2, -1)
    reference = TransformedDistribution(
        Normal(mean, log_std.clamp(-5, 2).exp()), [TanhTransform(), AffineTransform(head.loc, head.scale)]
    )
    torch.testing.assert_close(log_prob, reference.log_prob(action).sum(-1), rtol=1e-3, atol=1e-3)
    assert ((action >= head.loc - head.scale) & (action <= head.loc + head.scale)).all()


def test_a_saturated_action_keeps_its_exact_log_prob_and_a_gradient_back_from_the_bounds():
    """Where tanh saturates in float32 (|u| > 9), the log-probability is still the change of
    variables (computed here in float64) and its gradient still pulls the mean back."""
    head = SquashedGaussian(1, 2, low=torch.tensor([-2.0, -1.0]), high=torch.tensor([2.0, 1.0]))
    with torch.no_grad():
        head.net.weight.zero_()
        head.net.bias.copy_(torch.tensor([12.0, -15.0, -5.0, -5.0]))  # means far past the bounds, std e^-5
    features = torch.ones(1, 1)
    torch.manual_seed(0)
    action, log_prob = head.sample(features)
    torch.manual_seed(0)
    u = (head.net(features).chunk(2, -1)[0] + torch.randn(1, 2) * torch.tensor(-5.0).exp()).double()
    mean, std = torch.tensor([12.0, -15.0], dtype=torch.float64), torch.tensor(-5.0, dtype=torch.float64).exp()
    exact = Normal(mean, std).log_prob(u) - torch.log(head.scale.double() * (1 - torch.tanh(u) ** 2))
    torch.testing.assert_close(log_prob.double(), exact.sum(-1), rtol=1e-5, atol=1e-3)
    assert log_prob.item() > 40  # log(1e-6) would have stopped it near 2 x 13.8 + 2 x 4.1
    log_prob.sum().backward()
    mean_grad = head.net.bias.grad[:2]
    assert mean_grad[0] > 1 and mean_grad[1] < -1  # lowering log_prob moves the means back inside


@pytest.mark.parametrize(
    "rnn", [nn.LSTM(3, 4, batch_first=True), nn.GRU(3, 4, batch_first=True), LRU(3, 4, size=2), FFM(3, 4, 2, 2)]
)
def test_burn_in_steps_carry_no_gradient(rnn):
    x = torch.randn(2, 8, 3, requires_grad=True)
    out = run_core(rnn, x, None, burn_in=3)
    torch.testing.assert_close(out, rnn(x)[0])  # same values as one pass
    out[:, 3:].sum().backward()
    assert (x.grad[:, :3] == 0).all() and (x.grad[:, 3:] != 0).any()


@pytest.mark.parametrize("rnn", [nn.LSTM(3, 4, batch_first=True), LRU(3, 4, size=2)])
def test_a_slice_that_starts_its_episode_keeps_the_gradient_of_its_burn_in(rnn):
    """``episode_starts``: in the rows that start their episode a loss on a later step reaches the
    episode's first input (a memory of it can be learnt); the other rows' burn-in stays without
    gradient, and the burn-in steps' own features carry none in any row. The values are one pass's."""
    x = torch.randn(2, 8, 3, requires_grad=True)
    out = run_core(rnn, x, None, burn_in=3, episode_starts=torch.tensor([True, False]))
    torch.testing.assert_close(out, rnn(x)[0])
    out[:, -1].sum().backward()  # a loss on the last step alone
    assert (x.grad[0, 0] != 0).any()  # back to the first step of the row that starts its episode
    assert (x.grad[1, :3] == 0).all() and (x.grad[1, 3:] != 0).any()
    x.grad = None
    run_core(rnn, x, None, burn_in=3, episode_starts=torch.tensor([True, False]))[:, :3].sum().backward()
    assert (x.grad == 0).all()  # the burn-in steps' own losses: none into the core


def test_padded_steps_change_no_update():
    batch = slices([12, 5, 1, 9], horizon=12)
    noisy = batch.clone()
    pad = ~batch.get(MASK_KEY)
    for key in ("observation", ("next", "observation"), "action", ("next", "reward")):
        noisy.get(key)[pad] = 1e3
    results = []
    for data in (batch, noisy):
        torch.manual_seed(0)
        low, high = torch.tensor([-2.0]), torch.tensor([2.0])
        actor = RecurrentActor(2, 1, [8], 8, "lstm", low, high)
        critics = nn.ModuleList(RecurrentCritic(2, 1, [8], 8, "lstm") for _ in range(2))
        algo = RSAC(actor, critics, RSACSettings(), burn_in=3)
        stats = [algo.update(data) for _ in range(3)]
        results.append((stats, [p.detach().clone() for p in actor.parameters()]))
    (stats_a, params_a), (stats_b, params_b) = results
    for a, b in zip(stats_a, stats_b):
        assert a == pytest.approx(b, rel=1e-4, abs=1e-6)
    for a, b in zip(params_a, params_b):
        torch.testing.assert_close(a, b)


def discrete_sac(actions: int = 3, **settings):
    torch.manual_seed(0)
    actor = RecurrentActor(2, actions, [8], 8, "lstm", None, None)
    critics = nn.ModuleList(RecurrentCritic(2, actions, [8], 8, "lstm", discrete=True) for _ in range(2))
    return RSAC(
        actor,
        critics,
        RSACSettings(
            **{
                "initial_state": "zero",
                "init_alpha": 0.3,
                "gamma": 0.9,
                "reward_scaling": "none",  # the hand computations below are in the task's own unit,
                "critic_loss": "mse",  # with the squared error (the variants are passed)
                **settings,
            }
        ),
    )


def discrete_batch():
    """Two slices of 5 and 3 valid steps (horizon 5) with actions among 3."""
    batch = slices([5, 3], horizon=5)
    batch["action"] = torch.tensor([[0, 2, 1, 1, 0], [2, 0, 1, 0, 0]])
    return batch


@pytest.mark.parametrize(
    "n_step, fade, critic_loss",
    [
        (1, None, "mse"),
        (3, None, "mse"),
        (1, "faded", "mse"),
        (3, "half_faded", "huber"),
        (1, None, "huber"),
    ],
)
def test_sac_discrete_critic_target_and_actor_loss_are_the_exact_expectations_over_actions(n_step, fade, critic_loss):
    """On a tiny batch (one slice padded, one terminated step), by hand: the critics' target is
    r + gamma (1 - terminated) sum_a pi(a|s') (min_i Qtarget_i(s', a) - alpha log pi(a|s')) (with
    ``n_step`` n: the next n rewards within the slice, then gamma^n times that soft value), their
    loss the sum over both critics of the squared error at valid steps; the actor's loss is
    sum_a pi(a|s) (alpha log pi(a|s) - min_i Q_i(s, a)) (the critics' heads after their step, as
    SAC updates them in turn), and the temperature follows the exact entropy -sum_a pi log pi.
    ``faded`` (``soft_target_fade`` 4 after 4 updates): the soft value less alpha times the target entropy,
    0.7 log 3; ``half_faded`` (after 2 of 4): less half that; None (``soft_target_fade=null``): SAC's own.
    With ``critic_loss=huber`` (rewards times 3, so that some errors pass 1) each step's squared error
    becomes d^2 for |d| <= 1 and 2 |d| - 1 past it."""
    delta = 1.0
    algo = discrete_sac(n_step=n_step, soft_target_fade=None if fade is None else 4, critic_loss=critic_loss)
    algo.updates = {"faded": 4, "half_faded": 2}.get(fade, 0)  # the updates made before this one
    batch = discrete_batch()
    batch["step_count"] = torch.arange(5).expand(2, 5).unsqueeze(-1).clone()
    batch["next", "terminated"][0, 3] = True
    if critic_loss == "huber":
        batch["next", "reward"] = batch["next", "reward"] * 3
    actor, critics, targets = (copy.deepcopy(m) for m in (algo.actor, algo.critics, algo.target_critics))
    obs = torch.cat([batch["observation"], batch["next", "observation"][:, -1:]], 1)  # T + 1 observations
    obs[1, 3] = batch["next", "observation"][1, 2]  # the short slice's next observation follows its last step
    alpha, mask = 0.3, batch[MASK_KEY]

    def q_all(critic, x):
        return critic.q(critic.rnn(critic.encoder(x))[0])

    with torch.no_grad():
        log_pi = torch.log_softmax(actor.head.net(actor.rnn(actor.encoder(obs))[0]), -1)
        q_next = torch.minimum(q_all(targets[0], obs), q_all(targets[1], obs))[:, 1:]
        soft = (log_pi.exp()[:, 1:] * (q_next - alpha * log_pi[:, 1:])).sum(-1)
        faded = {"faded": 1.0, "half_faded": 0.5}.get(fade, 0.0)
        soft = soft - faded * alpha * 0.7 * math.log(3)
        alive = 1.0 - batch["next", "terminated"].squeeze(-1).float()
        reward, target = batch["next", "reward"].squeeze(-1), torch.zeros(2, 5)
        for row, length in enumerate([5, 3]):
            for t in range(length):
                m = min(n_step, length - t)  # rewards summed, none past the slice's last valid step
                summed = sum(0.9**k * reward[row, t + k] for k in range(m))
                target[row, t] = summed + 0.9**m * alive[row, t + m - 1] * soft[row, t + m - 1]
        taken = batch["action"].unsqueeze(-1)
        differences = [q_all(c, obs)[:, :-1].gather(-1, taken).squeeze(-1) - target for c in critics]
        errors = sum(d**2 for d in differences)
        if critic_loss == "huber":
            assert any((d[mask].abs() > delta).any() and (d[mask].abs() < delta).any() for d in differences)
            errors = sum(torch.where(d.abs() <= delta, d**2, 2 * delta * d.abs() - delta**2) for d in differences)
        critic_loss = errors[mask].sum() / mask.sum()
        td = (differences[0].abs() + differences[1].abs()) / 2  # the priority a prioritised sampler reads
        features = [c.rnn(c.encoder(obs))[0][:, :-1] for c in critics]  # before the critics' step

    weighted = copy.deepcopy(algo)
    stats = algo.update(batch)
    assert stats["critic_loss"] == pytest.approx(critic_loss.item(), rel=1e-5)
    torch.testing.assert_close(batch[TD_KEY][mask], td[mask])
    assert batch[TD_KEY][~mask].isnan().all()
    importance = torch.tensor([[3.0], [0.5]]).expand(2, 5).unsqueeze(-1)  # a slice's weight, at each step
    scaled = weighted.update(batch.clone().set("priority_weight", importance))["critic_loss"]
    assert scaled == pytest.approx(((errors * importance.squeeze(-1))[mask].sum() / mask.sum()).item(), rel=1e-5)
    with torch.no_grad():
        q_now = torch.minimum(*(c.q(f) for c, f in zip(algo.critics, features)))
        pi = log_pi.exp()[:, :-1]
        actor_loss = (pi * (alpha * log_pi[:, :-1] - q_now)).sum(-1)[mask].sum() / mask.sum()
        entropy = -(pi * log_pi[:, :-1]).sum(-1)[mask].sum() / mask.sum()
    assert stats["actor_loss"] == pytest.approx(actor_loss.item(), rel=1e-5)
    assert stats["entropy"] == pytest.approx(entropy.item(), rel=1e-5)
    assert algo.log_alpha.grad.item() == pytest.approx(entropy.item() - 0.7 * math.log(3), rel=1e-5)
    gap = (q_now.max(-1).values - q_now.mean(-1))[mask].mean()  # the logged action gap: best above the mean
    assert stats["action_gap"] == pytest.approx(gap.item(), rel=1e-5)


def test_the_factory_builds_two_critics_of_their_own_beside_the_actor():
    """The networks the run trains: two critics, each with its own encoder, core and Q head, none of them
    the actor's; the policy that acts holds the actor's encoder, core and head, nothing of the critics."""
    from trajrl.configuration.compose import compose, validate
    from trajrl.envs.gym_envs import env_spaces
    from trajrl.factory.agent import build_agent

    cfg = validate(compose(["debug=smoke"]))
    agent = build_agent(cfg, env_spaces(cfg.env))
    algo = agent.algo
    assert len(algo.critics) == 2 and all(isinstance(critic, RecurrentCritic) for critic in algo.critics)
    for part in ("encoder", "rnn", "q"):
        first, second = (getattr(critic, part) for critic in algo.critics)
        assert first is not second and getattr(algo.actor, part, None) not in (first, second)
    assert sum(p.numel() for p in agent.policy.parameters()) == sum(
        p.numel() for module in (algo.actor.encoder, algo.actor.rnn, algo.actor.head) for p in module.parameters()
    )


def test_sac_discrete_target_entropy_is_a_fraction_of_the_uniform_policys():
    assert discrete_sac(5).target_entropy == pytest.approx(0.7 * math.log(5))
    assert discrete_sac(5, target_entropy_fraction=0.5).target_entropy == pytest.approx(0.5 * math.log(5))
    assert discrete_sac(5, target_entropy=0.2).target_entropy == 0.2


@pytest.mark.parametrize("alpha_lr", [None, 0.05])
def test_the_temperature_moves_at_its_own_rate(alpha_lr):
    """One update moves log alpha by about its rate (Adam's first step is the rate times the
    gradient's sign): ``alpha_lr``, or ``lr`` where it is null."""
    algo = discrete_sac(lr=1e-3, alpha_lr=alpha_lr)
    batch = discrete_batch()
    before = algo.log_alpha.item()
    algo.update(batch)
    assert abs(algo.log_alpha.item() - before) == pytest.approx(alpha_lr or 1e-3, rel=1e-3)


def test_rewards_divided_by_their_rms_train_a_task_times_c_as_the_task_itself():
    """``algo.reward_scaling=rms``: the same batch with every reward times 100 gives the same
    update (losses, temperature, weights), where without it the losses are far apart; the
    statistic is checkpointed."""

    def update(scale: float, scaling: str):
        algo = discrete_sac(reward_scaling=scaling)
        batch = discrete_batch()
        batch["next", "reward"] = batch["next", "reward"] * scale
        stats = algo.update(batch)
        return algo, stats, [p.detach().clone() for p in [*algo.actor.parameters(), *algo.critics.parameters()]]

    (algo, one, weights), (_, hundred, weights_100) = update(1.0, "rms"), update(100.0, "rms")
    assert hundred["reward_rms"] == pytest.approx(100 * one["reward_rms"], rel=1e-6)
    for key in ("critic_loss", "actor_loss", "alpha", "entropy", "q_mean"):
        assert hundred[key] == pytest.approx(one[key], rel=1e-4, abs=1e-6), key
    for a, b in zip(weights, weights_100):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-6)
    (_, plain, _), (_, plain_100, _) = update(1.0, "none"), update(100.0, "none")
    assert "reward_rms" not in plain and plain_100["critic_loss"] > 100 * plain["critic_loss"]
    restored = discrete_sac(reward_scaling="rms")
    restored.load_state_dict(algo.state_dict())
    assert restored.reward_rms.state_dict() == algo.reward_rms.state_dict() != {"count": 0, "sum_of_squares": 0.0}


def test_rewards_all_one_train_with_rms_exactly_as_without():
    """The default ``algo.reward_scaling=rms`` leaves a task whose every reward is 1 (CartPole's) as it
    was: its statistic is exactly 1, and the update's losses and weights are the same bits."""

    def update(scaling: str):
        algo = discrete_sac(reward_scaling=scaling)
        batch = discrete_batch()
        batch["next", "reward"] = torch.ones_like(batch["next", "reward"])
        stats = [algo.update(batch) for _ in range(3)][-1]
        return stats, [p.detach().clone() for p in [*algo.actor.parameters(), *algo.critics.parameters()]]

    (rms, weights_rms), (none, weights_none) = update("rms"), update("none")
    assert RSACSettings().reward_scaling == "rms" and rms["reward_rms"] == 1.0
    assert all(rms[key] == none[key] for key in ("critic_loss", "actor_loss", "alpha", "q_mean")), (rms, none)
    assert all(torch.equal(a, b) for a, b in zip(weights_rms, weights_none))


def test_sac_discrete_acts_with_the_most_likely_action_when_deterministic():
    from torchrl.envs.utils import ExplorationType, set_exploration_type

    head = discrete_sac(4).actor.head
    features = torch.randn(6, 8)
    with set_exploration_type(ExplorationType.DETERMINISTIC):
        torch.testing.assert_close(head(features), head.net(features).argmax(-1))
    with set_exploration_type(ExplorationType.RANDOM):
        torch.manual_seed(0)
        sampled = torch.stack([head(features) for _ in range(200)])
    assert ((sampled >= 0) & (sampled < 4)).all() and len(sampled.unique()) > 1


@pytest.mark.parametrize("initial_state", ["zero", "stored"])
def test_a_zero_learning_state_is_zero_whatever_the_buffer_stored(initial_state):
    """algo.initial_state=zero: the actor's state at each slice's first step is zero whatever the
    buffer stored (the critics always start at zero): the update equals the one on zeroed stored
    states, every statistic; stored: the actor's loss differs."""
    batch = slices([12, 9], horizon=12)
    batch.set("action", torch.randint(3, (2, 12), generator=torch.Generator().manual_seed(0)))
    zeroed = batch.clone()
    for key in ("recurrent_state_h", "recurrent_state_c"):
        zeroed.get(key).zero_()
    stats = [discrete_sac(initial_state=initial_state).update(data) for data in (batch, zeroed)]
    if initial_state == "zero":
        assert stats[0] == stats[1]
    else:
        assert stats[0]["actor_loss"] != stats[1]["actor_loss"]


def test_an_updates_statistics_are_read_together_as_the_floats_each_gives_alone():
    """``read_statistics``: every statistic, in order, as the float ``.item()`` gives it alone (a loss with its
    graph, a count, a shape-(1,) value), without a warning, on the CPU (each read alone) and on a GPU where there is
    one (read together); and a recurrent SAC update's statistics, one float each."""
    loss = (torch.tensor([1.5, 2.25], requires_grad=True) ** 2).sum()
    stats = {"loss": loss, "count": torch.tensor(7), "share": torch.tensor([True, False]).float().mean()}
    stats["norm"] = torch.tensor([0.1])
    for device in ["cpu", *(["cuda"] if torch.cuda.is_available() else [])]:
        with warnings.catch_warnings():  # nothing said on a user's terminal (a loss's graph read as a float)
            warnings.simplefilter("error")
            read = read_statistics({name: value.to(device) for name, value in stats.items()})
        assert list(read) == ["loss", "count", "share", "norm"]
        assert read == {"loss": 7.3125, "count": 7.0, "share": 0.5, "norm": torch.tensor([0.1]).item()}
        assert all(type(v) is float for v in read.values())
    torch.manual_seed(0)
    actor = RecurrentActor(2, 3, [8], 8, "lstm", None, None)
    critics = nn.ModuleList(RecurrentCritic(2, 3, [8], 8, "lstm", discrete=True) for _ in range(2))
    batch = slices([12, 5, 9, 12], horizon=12)
    batch["action"] = torch.randint(0, 3, (4, 12))
    update = RSAC(actor, critics, RSACSettings(), burn_in=3).update(batch)
    assert all(type(v) is float and math.isfinite(v) for v in update.values()), update
    assert {"critic_loss", "actor_loss", "alpha", "entropy", "q_mean", "action_gap", "lr"} <= set(update)


# ---------------------------------------------------------------- factored actions (MultiDiscrete, MultiBinary)
def factored_sac(categories: tuple[int, ...], dtype: torch.dtype = torch.long, **settings):
    """``discrete_sac``'s learner over a factored action of ``categories`` (one categorical per dimension)."""
    torch.manual_seed(0)
    actions = sum(categories)
    actor = RecurrentActor(2, actions, [8], 8, "lstm", None, None, categories=categories, action_dtype=dtype)
    critics = nn.ModuleList(
        RecurrentCritic(2, actions, [8], 8, "lstm", discrete=True, categories=categories) for _ in range(2)
    )
    base = {"initial_state": "zero", "init_alpha": 0.3, "gamma": 0.9, "reward_scaling": "none", "critic_loss": "mse"}
    return RSAC(actor, critics, RSACSettings(**{**base, **settings}))


#: A MultiDiscrete([3, 4, 2]) action and a MultiBinary(4) one (2 categories a bit, stored as int8).
FACTORED = {"multi_discrete": ((3, 4, 2), torch.long), "multi_binary": ((2, 2, 2, 2), torch.int8)}


@pytest.mark.parametrize("space", sorted(FACTORED))
@pytest.mark.parametrize("fade", [None, "half_faded"])
def test_factored_sac_losses_are_the_exact_expectations_per_dimension(space, fade):
    """Over a factored action (a hand-built batch: one slice padded, one terminated step), by hand, one
    dimension d at a time: pi = prod_d pi_d (a softmax over each dimension's own categories) and each
    critic's Q(h, a) = mean_d Q_d(h, a_d); the twin critics' min is taken per dimension and category. The
    critics' target is r + gamma (1 - terminated) [mean_d sum_{a_d} pi_d(a_d|s') minQ_d(s', a_d) - alpha
    sum_d sum_{a_d} pi_d log pi_d] (``half_faded``: less alpha times half the target entropy); the actor's
    loss sum_d sum_{a_d} pi_d (alpha log pi_d) - mean_d sum_{a_d} pi_d minQ_d; the temperature follows the
    entropy sum_d H_d towards 0.7 sum_d log n_d; the logged action gap is each dimension's, averaged."""
    categories, dtype = FACTORED[space]
    algo = factored_sac(categories, dtype, soft_target_fade=None if fade is None else 4)
    algo.updates = 2 if fade else 0
    batch = slices([5, 3], horizon=5)
    gen = torch.Generator().manual_seed(1)
    batch["action"] = torch.stack([torch.randint(n, (2, 5), generator=gen) for n in categories], -1).to(dtype)
    batch["step_count"] = torch.arange(5).expand(2, 5).unsqueeze(-1).clone()
    batch["next", "terminated"][0, 3] = True
    actor, critics, targets = (copy.deepcopy(m) for m in (algo.actor, algo.critics, algo.target_critics))
    obs = torch.cat([batch["observation"], batch["next", "observation"][:, -1:]], 1)
    obs[1, 3] = batch["next", "observation"][1, 2]  # the short slice's next observation follows its last step
    alpha, mask, dims = 0.3, batch[MASK_KEY], len(categories)
    target_entropy = 0.7 * sum(math.log(n) for n in categories)
    assert algo.target_entropy == pytest.approx(target_entropy)

    def per_dimension(x):  # [..., sum n_d] -> each dimension's [..., n_d]
        return x.split(categories, -1)

    def q_all(critic, x):
        return critic.q(critic.rnn(critic.encoder(x))[0])

    with torch.no_grad():
        logits = actor.head.net(actor.rnn(actor.encoder(obs))[0])
        log_pi = [torch.log_softmax(part, -1) for part in per_dimension(logits)]  # each dimension's own policy
        q_next = per_dimension(torch.minimum(q_all(targets[0], obs), q_all(targets[1], obs))[:, 1:])
        expected_q = sum((lp[:, 1:].exp() * q).sum(-1) for lp, q in zip(log_pi, q_next)) / dims
        next_entropy = sum(-(lp[:, 1:].exp() * lp[:, 1:]).sum(-1) for lp in log_pi)
        soft = expected_q + alpha * next_entropy - (0.5 * alpha * target_entropy if fade else 0.0)
        alive = 1.0 - batch["next", "terminated"].squeeze(-1).float()
        target = batch["next", "reward"].squeeze(-1) + 0.9 * alive * soft
        taken = batch["action"].long()

        def q_taken(critic):
            parts = per_dimension(q_all(critic, obs)[:, :-1])
            return sum(q.gather(-1, taken[..., d : d + 1]).squeeze(-1) for d, q in enumerate(parts)) / dims

        differences = [q_taken(c) - target for c in critics]
        critic_loss = sum(d**2 for d in differences)[mask].sum() / mask.sum()
        features = [c.rnn(c.encoder(obs))[0][:, :-1] for c in critics]

    stats = algo.update(batch)
    assert stats["critic_loss"] == pytest.approx(critic_loss.item(), rel=1e-5)
    torch.testing.assert_close(batch[TD_KEY][mask], ((differences[0].abs() + differences[1].abs()) / 2)[mask])
    with torch.no_grad():
        q_now = per_dimension(torch.minimum(*(c.q(f) for c, f in zip(algo.critics, features))))
        pi_now = [lp[:, :-1].exp() for lp in log_pi]
        bonus = sum((p * alpha * lp[:, :-1]).sum(-1) for p, lp in zip(pi_now, log_pi))
        actor_loss = (bonus - sum((p * q).sum(-1) for p, q in zip(pi_now, q_now)) / dims)[mask].mean()
        entropy = sum(-(p * lp[:, :-1]).sum(-1) for p, lp in zip(pi_now, log_pi))[mask].mean()
        gap = (sum(q.max(-1).values - q.mean(-1) for q in q_now) / dims)[mask].mean()
    assert stats["actor_loss"] == pytest.approx(actor_loss.item(), rel=1e-5)
    assert stats["entropy"] == pytest.approx(entropy.item(), rel=1e-5)
    assert algo.log_alpha.grad.item() == pytest.approx(entropy.item() - target_entropy, rel=1e-5)
    assert stats["action_gap"] == pytest.approx(gap.item(), rel=1e-5)


@pytest.mark.parametrize("space", sorted(FACTORED))
def test_a_factored_action_is_one_category_per_dimension_most_likely_when_deterministic(space):
    """The acting head: each dimension's most likely category (evaluation), in the environment's dtype, the
    same as the greedy step ``trajrl export`` writes (``PartsArgmax``); sampled, every dimension draws
    among its own categories only."""
    from torchrl.envs.utils import ExplorationType, set_exploration_type

    categories, dtype = FACTORED[space]
    actor = factored_sac(categories, dtype).actor
    features = torch.randn(300, 8)
    logits = actor.head.net(features).split(categories, -1)
    with set_exploration_type(ExplorationType.DETERMINISTIC):
        greedy = actor.head(features)
    assert greedy.dtype == dtype and greedy.shape == (300, len(categories))
    torch.testing.assert_close(greedy.long(), torch.stack([part.argmax(-1) for part in logits], -1))
    torch.testing.assert_close(actor.greedy_parts()[2](features), greedy.long())
    with set_exploration_type(ExplorationType.RANDOM):
        sampled = actor.head(features)
    for d, n in enumerate(categories):
        assert set(sampled[:, d].tolist()) == set(range(n)), (d, n)
