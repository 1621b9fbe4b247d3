"""Recurrent SAC: squashed-Gaussian log-probs, burn-in, padding, and the state the actor used."""

import copy
import math
import warnings

import pytest
import torch
from helpers import slices
from torch import nn
from torch.distributions import AffineTransform, Normal, TanhTransform, TransformedDistribution

import trajrl
from trajrl.algos.memory import FFM, LRU
from trajrl.algos.networks import DuelingHead, SideThread, read_statistics
from trajrl.algos.rsac.learner import RSAC
from trajrl.algos.rsac.networks import (
    RecurrentActor,
    RecurrentCritic,
    SquashedGaussian,
    critic_features,
    run_core,
    twin_critics,
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


def discrete_sac(
    actions: int = 3, critic_core: str = "separate", dueling: bool = False, planned_updates: int = 0, **settings
):
    torch.manual_seed(0)
    actor = RecurrentActor(2, actions, [8], 8, "lstm", None, None)
    critics = twin_critics(
        lambda: RecurrentCritic(2, actions, [8], 8, "lstm", discrete=True, dueling=dueling), critic_core != "separate"
    )
    if critic_core == "acting":
        actor.read_critic(critics[0])
    return RSAC(
        actor,
        critics,
        RSACSettings(
            **{
                "initial_state": "zero",
                "init_alpha": 0.3,
                "gamma": 0.9,
                "critic_core": critic_core,
                "reward_scaling": "none",  # the hand computations below are in the task's own unit,
                "soft_target": True,  # with SAC's soft value and squared error (the variants are passed)
                "critic_loss": "mse",
                **settings,
            }
        ),
        planned_updates=planned_updates,
    )


def discrete_batch():
    """Two slices of 5 and 3 valid steps (horizon 5) with actions among 3."""
    batch = slices([5, 3], horizon=5)
    batch["action"] = torch.tensor([[0, 2, 1, 1, 0], [2, 0, 1, 0, 0]])
    return batch


@pytest.mark.parametrize(
    "critic_core, n_step, soft_target, dueling, critic_loss",
    [
        ("separate", 1, True, False, "mse"),
        ("shared", 1, True, False, "mse"),
        ("separate", 3, True, False, "mse"),
        ("separate", 1, False, False, "mse"),
        ("shared", 3, False, False, "mse"),
        ("separate", 1, True, True, "mse"),
        ("acting", 1, False, True, "mse"),
        ("separate", 1, "faded", False, "mse"),
        ("separate", 3, "half_faded", False, "huber"),
        ("separate", 1, True, False, "huber"),
        ("separate", 1, True, False, "huber_delta"),
        ("separate", 1, True, False, "huber_bootstrapped"),
        ("separate", 3, True, False, "huber_bootstrapped"),
    ],
)
def test_sac_discrete_critic_target_and_actor_loss_are_the_exact_expectations_over_actions(
    critic_core, n_step, soft_target, dueling, critic_loss
):
    """On a tiny batch (one slice padded, one terminated step), by hand: the critics' target is
    r + gamma (1 - terminated) sum_a pi(a|s') (min_i Qtarget_i(s', a) - alpha log pi(a|s')) (with
    ``n_step`` n: the next n rewards within the slice, then gamma^n times that soft value), their
    loss the sum over both critics of the squared error at valid steps; the actor's loss is
    sum_a pi(a|s) (alpha log pi(a|s) - min_i Q_i(s, a)) (the critics' heads after their step, as
    SAC updates them in turn), and the temperature follows the exact entropy -sum_a pi log pi.
    With a shared core the same sums hold, both heads reading the one core. Without ``soft_target``
    the target's value is sum_a pi(a|s') min_i Qtarget_i(s', a): no entropy in it (the actor's loss
    and the temperature unchanged); ``faded`` (``soft_target_fade`` 4 after 4 updates): the soft value less alpha
    times the target entropy, 0.7 log 3; ``half_faded`` (after 2 of 4): less half that. With ``dueling`` each
    critic's head is V + A - mean(A); with ``critic_core=acting`` the actor's policy is its head over the
    critics' core (zero start here).
    With ``critic_loss=huber`` (rewards times 3, so that some errors pass 1) each step's squared error
    becomes d^2 for |d| <= 1 and 2 |d| - 1 past it; with ``huber_delta`` 1.5, d^2 up to 1.5 and 3 |d| - 2.25 past it;
    with ``huber_bootstrapped`` d^2 where the step's target holds no bootstrapped value (its episode terminates
    within the n steps summed), Huber's elsewhere."""
    delta = 1.5 if critic_loss == "huber_delta" else 1.0
    critic_loss = "huber" if critic_loss == "huber_delta" else critic_loss
    algo = discrete_sac(
        critic_core=critic_core,
        n_step=n_step,
        soft_target=bool(soft_target),
        soft_target_fade=None if soft_target in (True, False) else 4,
        dueling=dueling,
        critic_loss=critic_loss,
        huber_delta=delta,
    )
    algo.updates = {"faded": 4, "half_faded": 2}.get(soft_target, 0)  # the updates made before this one
    if dueling:
        assert isinstance(algo.critics[0].q[-1], DuelingHead)
    batch = discrete_batch()
    batch["step_count"] = torch.arange(5).expand(2, 5).unsqueeze(-1).clone()
    batch["next", "terminated"][0, 3] = True
    if critic_loss == "huber_bootstrapped":
        batch["next", "reward"][0, 3] = 2.0  # the terminal step's error past delta
    if critic_loss.startswith("huber"):
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
        bonus = alpha if soft_target else 0.0
        soft = (log_pi.exp()[:, 1:] * (q_next - bonus * log_pi[:, 1:])).sum(-1)
        faded = {"faded": 1.0, "half_faded": 0.5}.get(soft_target, 0.0)
        soft = soft - faded * alpha * 0.7 * math.log(3)
        alive = 1.0 - batch["next", "terminated"].squeeze(-1).float()
        reward, target = batch["next", "reward"].squeeze(-1), torch.zeros(2, 5)
        exact = torch.zeros(2, 5, dtype=torch.bool)
        for row, length in enumerate([5, 3]):
            for t in range(length):
                m = min(n_step, length - t)  # rewards summed, none past the slice's last valid step
                summed = sum(0.9**k * reward[row, t + k] for k in range(m))
                target[row, t] = summed + 0.9**m * alive[row, t + m - 1] * soft[row, t + m - 1]
                exact[row, t] = alive[row, t + m - 1] == 0
        taken = batch["action"].unsqueeze(-1)
        differences = [q_all(c, obs)[:, :-1].gather(-1, taken).squeeze(-1) - target for c in critics]
        errors = sum(d**2 for d in differences)
        if critic_loss.startswith("huber"):
            assert any((d[mask].abs() > delta).any() and (d[mask].abs() < delta).any() for d in differences)
            huber = sum(torch.where(d.abs() <= delta, d**2, 2 * delta * d.abs() - delta**2) for d in differences)
            if critic_loss == "huber_bootstrapped":  # the terminal step's error (n_step steps) squared in full
                assert exact.any() and all((d[exact].abs() > delta).any() for d in differences)
            errors = torch.where(exact, errors, huber) if critic_loss == "huber_bootstrapped" else huber
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


def test_double_average_q_clip_and_entropy_penalty_are_zhou_et_als_by_hand():
    """``twin_value=mean``, ``q_clip`` and ``entropy_penalty`` (Zhou et al., 2022), by hand on the tiny batch:
    the target's soft value reads the mean of the two target critics, not their min; each step's critic
    loss is max(d^2, (Qtarget(s, a) + clip(Q - Qtarget(s, a), -c, c) - y)^2), Qtarget the critic's own
    target (moved away from it first, so that some steps' band binds and others' does not); the actor's
    loss reads the critics' mean and adds beta (H_acting - H)^2, H_acting the entropy stored with the step."""
    clip, beta = 0.05, 0.5
    algo = discrete_sac(twin_value="mean", q_clip=clip, entropy_penalty=beta)
    with torch.no_grad():
        for p in algo.target_critics.parameters():
            p.add_(0.05 * torch.randn_like(p))
    batch = discrete_batch()
    batch["next", "terminated"][0, 3] = True
    batch["policy_entropy"] = torch.rand(2, 5, generator=torch.Generator().manual_seed(3)).unsqueeze(-1) + 0.3
    actor, critics, targets = (copy.deepcopy(m) for m in (algo.actor, algo.critics, algo.target_critics))
    obs = torch.cat([batch["observation"], batch["next", "observation"][:, -1:]], 1)
    obs[1, 3] = batch["next", "observation"][1, 2]
    alpha, mask = 0.3, batch[MASK_KEY]

    def q_all(critic, x):
        return critic.q(critic.rnn(critic.encoder(x))[0])

    with torch.no_grad():
        log_pi = torch.log_softmax(actor.head.net(actor.rnn(actor.encoder(obs))[0]), -1)
        q_next = ((q_all(targets[0], obs) + q_all(targets[1], obs)) / 2)[:, 1:]
        soft = (log_pi.exp()[:, 1:] * (q_next - alpha * log_pi[:, 1:])).sum(-1)
        alive = 1.0 - batch["next", "terminated"].squeeze(-1).float()
        target = batch["next", "reward"].squeeze(-1) + 0.9 * alive * soft
        taken = batch["action"].unsqueeze(-1)
        errors, binding = 0.0, []
        for critic, before in zip(critics, targets):
            q = q_all(critic, obs)[:, :-1].gather(-1, taken).squeeze(-1)
            q_target = q_all(before, obs)[:, :-1].gather(-1, taken).squeeze(-1)
            clipped = q_target + (q - q_target).clamp(-clip, clip)
            errors = errors + torch.maximum((q - target) ** 2, (clipped - target) ** 2)
            binding.append(((clipped - target) ** 2 > (q - target) ** 2)[mask])
        binding = torch.cat(binding)
        assert binding.any() and not binding.all()  # the band binds at some steps, not at all
        critic_loss = errors[mask].sum() / mask.sum()
        features = [c.rnn(c.encoder(obs))[0][:, :-1] for c in critics]

    stats = algo.update(batch)
    assert stats["critic_loss"] == pytest.approx(critic_loss.item(), rel=1e-5)
    with torch.no_grad():
        q_now = sum(c.q(f) for c, f in zip(algo.critics, features)) / 2
        pi = log_pi.exp()[:, :-1]
        entropy = -(pi * log_pi[:, :-1]).sum(-1)
        penalty = beta * (batch["policy_entropy"].squeeze(-1) - entropy) ** 2
        actor_loss = ((pi * (alpha * log_pi[:, :-1] - q_now)).sum(-1) + penalty)[mask].sum() / mask.sum()
    assert stats["actor_loss"] == pytest.approx(actor_loss.item(), rel=1e-5)


def test_the_acting_policy_stores_its_entropy_where_the_penalty_reads_it():
    """With ``algo.entropy_penalty`` the collection policy writes each step's exact entropy of the
    categorical policy it acted with; without, nothing more than the action."""
    from tensordict import TensorDict

    from trajrl.algos.rsac.networks import make_policy

    torch.manual_seed(0)
    actor = RecurrentActor(2, 3, [8], 8, "lstm", None, None)
    for entropy in (True, False):
        policy, core = make_policy(actor, entropy=entropy)
        step = TensorDict({"observation": torch.randn(4, 2), "is_init": torch.ones(4, 1, dtype=torch.bool)}, [4])
        states = {key: torch.zeros(4, *spec.shape) for key, spec in core.make_tensordict_primer().primers.items()}
        out = policy(step.update(states))
        if not entropy:
            assert "policy_entropy" not in out.keys()
            continue
        logits = actor.head.net(out["features"])
        expected = torch.distributions.Categorical(logits=logits).entropy()
        torch.testing.assert_close(out["policy_entropy"], expected)


def test_shared_critic_core_is_one_pass_for_both_heads_and_learns_from_both():
    """critic_core=shared: one sequence pass of the critics' core and one of the targets' core an
    update (separate: two each); the core's gradient is the sum of what each head's error sends it;
    the target critics share their core too, and a checkpoint keeps the sharing."""
    shared, separate = discrete_sac(critic_core="shared"), discrete_sac()
    assert shared.critics[0].rnn is shared.critics[1].rnn and shared.critics[0].q is not shared.critics[1].q
    assert shared.target_critics[0].rnn is shared.target_critics[1].rnn
    assert shared.target_critics[0].rnn is not shared.critics[0].rnn
    count = lambda algo: sum(p.numel() for p in algo.critics.parameters())  # noqa: E731
    assert count(separate) - count(shared) == sum(
        p.numel() for m in (separate.critics[1].encoder, separate.critics[1].rnn) for p in m.parameters()
    )
    batch = discrete_batch()
    for algo, passes in ((shared, 1), (separate, 2)):
        calls = {"online": 0, "target": 0}
        hooks = [
            c.rnn.register_forward_hook(lambda *_, k=k, calls=calls: calls.__setitem__(k, calls[k] + 1))
            for k, critics in (("online", algo.critics), ("target", algo.target_critics))
            for c in {c.rnn: c for c in critics}.values()
        ]
        algo.update(batch.clone())
        for h in hooks:
            h.remove()
        assert calls == {"online": passes, "target": passes}  # no burn-in: one call of the core a pass

    algo = discrete_sac(critic_core="shared")
    obs = torch.cat([batch["observation"], batch["next", "observation"][:, -1:]], 1)
    grads = []
    for head in algo.critics:
        algo.critics.zero_grad()
        head.values(head.features(obs, 0)).sum().backward()
        grads.append(algo.critics[0].rnn.weight_hh_l0.grad.clone())
    algo.critics.zero_grad()
    features = critic_features(algo.critics, obs, 0)
    sum(c.values(f).sum() for c, f in zip(algo.critics, features)).backward()
    torch.testing.assert_close(algo.critics[0].rnn.weight_hh_l0.grad, grads[0] + grads[1])

    restored = discrete_sac(critic_core="shared")
    torch.nn.init.zeros_(restored.critics[0].rnn.weight_hh_l0)
    restored.load_state_dict(algo.state_dict())
    assert restored.critics[0].rnn is restored.critics[1].rnn
    torch.testing.assert_close(restored.critics[1].rnn.weight_hh_l0, algo.critics[0].rnn.weight_hh_l0)


def test_acting_critic_core_starts_the_critics_from_the_stored_state_and_the_actor_reads_their_features():
    """critic_core=acting, by hand: one core (the critics', shared by both heads) acts, so the
    stored state it left at a slice's first step starts the critics and their targets (the target
    core from the same state); the actor's policy is its head over the critics' features; its
    optimiser holds the head alone, so the core learns from the critics' loss only."""
    algo = discrete_sac(critic_core="acting", initial_state="stored")
    actor, critics = algo.actor, algo.critics
    assert actor.rnn is critics[0].rnn is critics[1].rnn and actor.encoder is critics[0].encoder
    assert algo.target_critics[0].rnn is not actor.rnn
    optimised = {id(p) for group in algo.actor_optimizer.param_groups for p in group["params"]}
    assert optimised == {id(p) for p in actor.head.parameters()}

    batch = discrete_batch()
    batch["step_count"] = torch.arange(5).expand(2, 5).unsqueeze(-1).clone()
    obs = torch.cat([batch["observation"], batch["next", "observation"][:, -1:]], 1)
    obs[1, 3] = batch["next", "observation"][1, 2]
    state = tuple(batch[key][:, 0].transpose(0, 1).contiguous() for key in ("recurrent_state_h", "recurrent_state_c"))
    online, targets = copy.deepcopy(critics), copy.deepcopy(algo.target_critics)
    alpha, mask = 0.3, batch[MASK_KEY]
    with torch.no_grad():
        features = online[0].rnn(online[0].encoder(obs), state)[0]
        zero_start = online[0].rnn(online[0].encoder(obs))[0]
        assert not torch.allclose(features[:, 0], zero_start[:, 0])  # the stored state matters
        target_features = targets[0].rnn(targets[0].encoder(obs), state)[0][:, 1:]
        log_pi = torch.log_softmax(actor.head.net(features), -1)
        q_next = torch.minimum(targets[0].q(target_features), targets[1].q(target_features))
        soft = (log_pi.exp()[:, 1:] * (q_next - alpha * log_pi[:, 1:])).sum(-1)
        target = batch["next", "reward"].squeeze(-1) + 0.9 * soft
        taken = batch["action"].unsqueeze(-1)
        errors = sum((c.q(features[:, :-1]).gather(-1, taken).squeeze(-1) - target) ** 2 for c in online)
        critic_loss = errors[mask].sum() / mask.sum()
    stats = algo.update(batch)
    assert stats["critic_loss"] == pytest.approx(critic_loss.item(), rel=1e-5)
    with torch.no_grad():
        q_now = torch.minimum(*(c.q(features[:, :-1]) for c in algo.critics))
        pi = log_pi.exp()[:, :-1]
        actor_loss = (pi * (alpha * log_pi[:, :-1] - q_now)).sum(-1)[mask].sum() / mask.sum()
    assert stats["actor_loss"] == pytest.approx(actor_loss.item(), rel=1e-5)

    restored = discrete_sac(critic_core="acting", initial_state="stored")
    restored.load_state_dict(algo.state_dict())
    assert restored.actor.rnn is restored.critics[0].rnn
    torch.testing.assert_close(restored.actor.rnn.weight_hh_l0, algo.critics[0].rnn.weight_hh_l0)


def test_the_factory_builds_the_critics_and_the_actor_the_settings_name():
    """``algo.dueling`` and ``algo.critic_core=acting`` reach the networks the run trains: dueling
    heads on both critics; one core, the critics', in the actor and in the policy that acts."""
    from trajrl.configuration.compose import compose, validate
    from trajrl.envs.gym_envs import env_spaces
    from trajrl.factory.agent import build_agent

    cfg = validate(compose(["debug=smoke", "algo.dueling=true", "algo.critic_core=acting"]))
    agent = build_agent(cfg, env_spaces(cfg.env))
    algo = agent.algo
    assert all(isinstance(critic.q[-1], DuelingHead) for critic in algo.critics)
    assert algo.actor.rnn is algo.critics[0].rnn is algo.critics[1].rnn
    assert sum(p.numel() for p in agent.policy.parameters()) == sum(
        p.numel() for module in (algo.actor.encoder, algo.actor.rnn, algo.actor.head) for p in module.parameters()
    )  # the acting policy holds the one core and the head, no second core


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


def test_actor_and_critic_rates_decay_linearly_to_lr_end_and_the_temperatures_stays():
    """``algo.lr_end``: over the planned updates the actor's and the critics' rates fall linearly from
    ``lr`` to ``lr_end`` (the memory cores' ``rnn_lr`` in the same proportion), then stay; the
    temperature's rate does not move. The factory plans (total_frames - warmup) x updates_per_frame."""
    from trajrl.configuration.compose import validate
    from trajrl.envs.gym_envs import env_spaces
    from trajrl.factory.agent import build_agent

    cfg = trajrl.compose(["debug=smoke", "total_frames=2400", "loop.warmup_frames=400", "loop.updates_per_frame=0.5"])
    assert build_agent(validate(cfg), env_spaces(cfg.env)).algo.planned_updates == 1000
    algo = discrete_sac(lr=1e-3, rnn_lr=2e-3, lr_end=1e-4, planned_updates=4)
    batch = discrete_batch()
    seen = []
    for _ in range(6):
        stats = algo.update(batch)
        rates = [[g["lr"] for g in o.param_groups] for o in (algo.actor_optimizer, algo.critic_optimizer)]
        assert rates[0] == rates[1] and stats["lr"] == rates[0][0]
        seen.append(rates[0])
        assert algo.alpha_optimizer.param_groups[0]["lr"] == 1e-3
    expected = [1e-3, 7.75e-4, 5.5e-4, 3.25e-4, 1e-4, 1e-4]
    assert seen == [pytest.approx([lr, 2 * lr]) for lr in expected]
    constant = discrete_sac(lr=1e-3, planned_updates=4)
    assert [constant.update(batch)["lr"] for _ in range(6)] == [1e-3] * 6


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


def test_a_pass_on_the_side_thread_keeps_the_callers_grad_mode_and_raises_its_error_in_the_caller():
    """``algo.learner_threads=2``'s second thread: a daemon (a run's exit does not wait on it) that runs
    each pass in the grad mode of the caller who submitted it and hands its exception back."""
    import threading

    side = SideThread(True)
    with torch.no_grad():
        assert side.submit(torch.is_grad_enabled).result() is False
    assert side.submit(torch.is_grad_enabled).result() is True
    assert side.submit(lambda: threading.current_thread().daemon).result() is True
    assert side.submit(threading.get_ident).result() != threading.get_ident()

    def fails():
        raise ValueError("a pass that fails")

    with pytest.raises(ValueError, match="a pass that fails"):
        side.submit(fails).result()
    assert side.submit(lambda: 2 + 2).result() == 4  # the thread goes on
    inline = SideThread(False)
    assert inline.submit(threading.get_ident).result() == threading.get_ident()


@pytest.mark.parametrize(
    "actions, critic_core", [("continuous", "separate"), ("discrete", "shared"), ("discrete", "acting")]
)
def test_an_update_on_two_threads_gives_the_bits_of_one_thread(actions, critic_core):
    """``algo.learner_threads=2`` on slices with a burn-in, two of which start their episode (the
    gradient reaches back through their burn-in): the same statistics and weights, to the bit, as
    ``learner_threads=1``, for continuous actions and for critics sharing a core or acting with it."""
    torch.manual_seed(0)
    if actions == "continuous":
        actor = RecurrentActor(2, 1, [8], 8, "lstm", torch.tensor([-2.0]), torch.tensor([2.0]))
        critics = twin_critics(lambda: RecurrentCritic(2, 1, [8], 8, "lstm"), critic_core != "separate")
    else:
        actor = RecurrentActor(2, 3, [8], 8, "lstm", None, None)
        critics = twin_critics(lambda: RecurrentCritic(2, 3, [8], 8, "lstm", discrete=True), True)
        if critic_core == "acting":
            actor.read_critic(critics[0])
    batch = slices([12, 5, 9, 12], horizon=12)
    if actions == "discrete":
        batch["action"] = torch.randint(0, 3, (4, 12))
    two = RSAC(actor, critics, RSACSettings(critic_core=critic_core, learner_threads=2), burn_in=3)
    one = copy.deepcopy(two)
    one.side = SideThread(False)
    results = []
    for algo in (two, one):
        torch.manual_seed(1)
        stats = [algo.update(batch.clone()) for _ in range(3)]
        results.append((stats, [p.detach().clone() for p in [*algo.actor.parameters(), *algo.critics.parameters()]]))
    (stats_two, weights_two), (stats_one, weights_one) = results
    assert two.side.enabled and not one.side.enabled and stats_two == stats_one
    assert all(torch.equal(a, b) for a, b in zip(weights_two, weights_one))


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
    critics = twin_critics(lambda: RecurrentCritic(2, 3, [8], 8, "lstm", discrete=True), False)
    batch = slices([12, 5, 9, 12], horizon=12)
    batch["action"] = torch.randint(0, 3, (4, 12))
    update = RSAC(actor, critics, RSACSettings(), burn_in=3).update(batch)
    assert all(type(v) is float and math.isfinite(v) for v in update.values()), update
    assert {"critic_loss", "actor_loss", "alpha", "entropy", "q_mean", "action_gap", "lr"} <= set(update)
