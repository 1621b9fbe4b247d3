"""Recurrent SAC: squashed-Gaussian log-probs, burn-in, padding, and the state the actor used."""
import pytest
import torch
from torch import nn
from torch.distributions import AffineTransform, Normal, TanhTransform, TransformedDistribution

import trajrl
from trajrl.algos.rsac import RSAC, RecurrentActor, RecurrentCritic, SquashedGaussian, run_core
from trajrl.settings import RSACSettings
from trajrl.replay.episodes import MASK_KEY
from helpers import slices


def test_squashed_gaussian_log_prob_is_the_change_of_variables():
    torch.manual_seed(0)
    head = SquashedGaussian(5, 2, low=torch.tensor([-2.0, 0.0]), high=torch.tensor([2.0, 1.0]))
    features = torch.randn(7, 5)
    action, log_prob = head.sample(features)
    mean, log_std = head.net(features).chunk(2, -1)
    reference = TransformedDistribution(Normal(mean, log_std.clamp(-5, 2).exp()), [
        TanhTransform(), AffineTransform(head.loc, head.scale)])
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


@pytest.mark.parametrize("rnn", [nn.LSTM(3, 4, batch_first=True), nn.GRU(3, 4, batch_first=True)])
def test_burn_in_steps_carry_no_gradient(rnn):
    x = torch.randn(2, 8, 3, requires_grad=True)
    out = run_core(rnn, x, None, burn_in=3)
    torch.testing.assert_close(out, rnn(x)[0])  # same values as one pass
    out[:, 3:].sum().backward()
    assert (x.grad[:, :3] == 0).all() and (x.grad[:, 3:] != 0).any()


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


def test_the_actor_starts_from_the_state_it_stored_while_acting():
    """From the stored state at any step, the learner's actor pass gives the actions
    the policy took (deterministic acting): the stored state is the one it used."""
    from helpers import acting_rollout
    from torchrl.envs.utils import ExplorationType, set_exploration_type

    cfg = trajrl.compose(["experiment=rsac_pendulum_novel", "collector=sync", "debug=smoke"])
    with trajrl.build(cfg) as pipe:
        with set_exploration_type(ExplorationType.DETERMINISTIC):
            steps = acting_rollout(pipe, 260)
        actor = pipe.algo.actor
        for start in (0, 17, 150, 201):
            stop = min(start + 30, 200 if start < 200 else 260)
            batch = steps[start:stop].unsqueeze(0)
            state = pipe.algo.actor_state(batch)
            with torch.no_grad():
                features = run_core(actor.rnn, actor.encoder(batch["observation"]), state, burn_in=0)
                action, _ = actor.head.sample(features, deterministic=True)
            torch.testing.assert_close(action[0], steps["action"][start:stop], rtol=1e-5, atol=1e-5)
