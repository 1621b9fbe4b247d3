"""Recurrent DQN: targets, burn-in, and the state the policy used (invariant 5)."""

import pytest
import torch
from helpers import slices
from tensordict import TensorDict

import trajrl
from trajrl.algos.r2d2.learner import R2D2, signed_hyperbolic, signed_parabolic
from trajrl.algos.r2d2.networks import RecurrentQNet
from trajrl.algos.r2d2.settings import R2D2Settings
from trajrl.algos.sequences import n_step_return
from trajrl.base.keys import TD_KEY
from trajrl.replay.batches import sequence_priority


def brute_force_target(reward, terminated, bootstrap, length, gamma, n):
    """Per sequence, per step: the n-step return written out with loops."""
    horizon = reward.shape[-1]
    out = torch.zeros(horizon)
    for t in range(length):
        g, k = 0.0, 0
        while k < n and t + k < length:
            g += gamma**k * reward[t + k]
            k += 1
        j = t + k - 1
        out[t] = g + gamma**k * (1 - terminated[j]) * bootstrap[j]
    return out


def test_n_step_return_matches_the_loops():
    """The n-step return both sequence learners bootstrap from (recurrent DQN, recurrent SAC)."""
    torch.manual_seed(0)
    n_seq, horizon, gamma = 6, 9, 0.9
    lengths = torch.tensor([9, 1, 4, 9, 2, 7])
    terminated = torch.zeros(n_seq, horizon)
    terminated[2, 3] = 1  # an episode ending inside the sequence's last valid step
    terminated[3, 8] = 1
    reward, bootstrap = torch.randn(n_seq, horizon), torch.randn(n_seq, horizon)
    mask = torch.arange(horizon) < lengths.unsqueeze(-1)
    for n in (1, 3, 5):
        got = n_step_return(reward, terminated, bootstrap, mask, gamma, n)
        for row in range(n_seq):
            want = brute_force_target(reward[row], terminated[row], bootstrap[row], int(lengths[row]), gamma, n)
            valid = slice(0, int(lengths[row]))
            torch.testing.assert_close(got[row, valid], want[valid])


def test_value_rescaling_inverts():
    x = torch.linspace(-500, 500, 101)
    torch.testing.assert_close(signed_parabolic(signed_hyperbolic(x)), x, rtol=1e-4, atol=1e-3)


def test_burn_in_steps_are_not_learned_unless_the_slice_starts_its_episode():
    torch.manual_seed(0)
    algo = R2D2(RecurrentQNet(2, 2, [8], 8), R2D2Settings(), burn_in=3)
    n_seq, horizon = 2, 6
    batch = TensorDict(
        {
            "observation": torch.randn(n_seq, horizon, 2),
            ("next", "observation"): torch.randn(n_seq, horizon, 2),
            "action": torch.zeros(n_seq, horizon, dtype=torch.long),
            ("next", "reward"): torch.ones(n_seq, horizon, 1),
            ("next", "terminated"): torch.zeros(n_seq, horizon, 1, dtype=torch.bool),
            "recurrent_state_h": torch.zeros(n_seq, horizon, 1, 8),
            "recurrent_state_c": torch.zeros(n_seq, horizon, 1, 8),
            "step_count": torch.tensor([[0, 1, 2, 3, 4, 5], [7, 8, 9, 10, 11, 12]]).unsqueeze(-1),
            ("collector", "mask"): torch.tensor([[1, 1, 1, 1, 1, 0], [1, 1, 1, 1, 1, 1]]).bool(),
        },
        [n_seq, horizon],
    )
    stats = algo.update(batch)
    # row 0 starts its episode: 5 valid steps learned; row 1: 6 - 3 burn-in steps.
    assert stats["learn_frac"] == pytest.approx((5 + 3) / 12)


def test_padded_steps_change_no_update():

    batch = slices([12, 5, 1, 9], horizon=14)  # two columns that are padding in every row
    batch.set("action", torch.randint(2, (4, 14)))
    noisy = batch.clone()
    pad = ~batch.get(("collector", "mask"))
    for key in ("observation", ("next", "observation"), ("next", "reward")):
        noisy.get(key)[pad] = 1e3
    noisy.get("action")[pad] = 1 - noisy.get("action")[pad]
    noisy.get(("next", "terminated"))[pad] = True
    results = []
    for data in (batch, noisy, batch[:, :12].clone()):
        torch.manual_seed(0)
        algo = R2D2(RecurrentQNet(2, 2, [8], 8), R2D2Settings(n_step=3), burn_in=3)
        stats = [algo.update(data) for _ in range(3)]
        results.append(
            (stats, sequence_priority(data.get(TD_KEY), eta=0.9), [p.detach().clone() for p in algo.qnet.parameters()])
        )
    (stats_a, prio_a, params_a) = results[0]
    for stats_b, prio_b, params_b in results[1:]:
        for a, b in zip(stats_a, stats_b):
            assert a == pytest.approx(b, rel=1e-4, abs=1e-6)
        torch.testing.assert_close(prio_a, prio_b)
        for a, b in zip(params_a, params_b):
            torch.testing.assert_close(a, b)


def test_evaluation_acts_with_a_copy_of_the_online_network_and_only_that():
    """The greedy (evaluation) policy acts on a CPU copy that ``evaluated.pull()`` fills with the
    online network's weights, not the target network's; the behaviour policy acts on another copy,
    of the online network too (``acting.pull()``)."""
    from trajrl.configuration.compose import validate
    from trajrl.envs.gym_envs import env_spaces
    from trajrl.factory.agent import build_agent

    cfg = trajrl.compose(["debug=smoke", "algo=r2d2"])
    agent = build_agent(validate(cfg), env_spaces(cfg.env))
    online, target = agent.algo.qnet, agent.algo.target
    learner = {id(p) for net in (online, target) for p in net.parameters()}
    assert not {id(p) for p in agent.greedy_policy.parameters()} & learner  # copies, not the learner's own
    assert not {id(p) for p in agent.policy.parameters()} & learner
    assert not {id(p) for p in agent.policy.parameters()} & {id(p) for p in agent.greedy_policy.parameters()}

    def values(module):
        return [p.detach().clone() for p in module.parameters()]

    def acted(policy, net):  # the policy's copy of ``net``: its parameters, in the same order
        copies = [p for p in policy.parameters() if p.shape != torch.Size([])]
        return copies[: len(list(net.parameters()))]

    with torch.no_grad():
        for p in online.parameters():
            p.add_(1.0)
        for p in target.parameters():
            p.sub_(3.0)
    greedy_before = values(agent.greedy_policy)
    agent.evaluated.pull()
    assert all(torch.equal(a, b) for a, b in zip(acted(agent.greedy_policy, online), online.parameters()))
    assert not any(torch.equal(a, b) for a, b in zip(acted(agent.greedy_policy, online), greedy_before))
    # The behaviour policy acts with the online network, from the next push on.
    explore_before = values(agent.policy)
    assert all(torch.equal(a, b) for a, b in zip(acted(agent.policy, agent.algo.qnet), explore_before))
    agent.acting.pull()
    assert all(torch.equal(a, b) for a, b in zip(acted(agent.policy, agent.algo.qnet), agent.algo.qnet.parameters()))


def test_dueling_head_is_value_plus_centred_advantage():
    from trajrl.algos.networks import DuelingHead

    torch.manual_seed(0)
    head = DuelingHead(8, 3)
    features = torch.randn(5, 8)
    q = head(features)
    advantage = head.advantage(features)
    torch.testing.assert_close(q.mean(-1, keepdim=True), head.value(features))
    torch.testing.assert_close(q - q.mean(-1, keepdim=True), advantage - advantage.mean(-1, keepdim=True))


def test_the_td_error_written_for_each_step_is_its_distance_from_its_target():
    """Q(s, .) = (1, 3) everywhere (a head with zero weights), reward 1, gamma 0.9, one step:
    the target is 1 + 0.9 x 3 = 3.7, and the TD error written for each step is |Q(s, a) - 3.7|,
    worked out by hand."""
    qnet = RecurrentQNet(2, 2, [8], 8)
    with torch.no_grad():
        qnet.head.weight.zero_()
        qnet.head.bias.copy_(torch.tensor([1.0, 3.0]))
    algo = R2D2(qnet, R2D2Settings(gamma=0.9, n_step=1))
    n_seq, horizon = 2, 5
    action = torch.tensor([[0, 1, 0, 0, 1], [1, 1, 0, 1, 0]])
    batch = TensorDict(
        {
            "observation": torch.randn(n_seq, horizon, 2),
            ("next", "observation"): torch.randn(n_seq, horizon, 2),
            "action": action,
            ("next", "reward"): torch.ones(n_seq, horizon, 1),
            ("next", "terminated"): torch.zeros(n_seq, horizon, 1, dtype=torch.bool),
            "recurrent_state_h": torch.zeros(n_seq, horizon, 1, 8),
            "recurrent_state_c": torch.zeros(n_seq, horizon, 1, 8),
            "step_count": torch.arange(horizon).expand(n_seq, horizon).unsqueeze(-1),
            ("collector", "mask"): torch.ones(n_seq, horizon, dtype=torch.bool),
        },
        [n_seq, horizon],
    )
    algo.update(batch)
    want = torch.where(action == 1, torch.tensor(0.7), torch.tensor(2.7))
    torch.testing.assert_close(batch.get(TD_KEY), want)


def test_spread_epsilon_gives_each_environment_of_a_vector_its_own_and_evaluation_none():
    """Slot s of a collector holds environments s * per_slot onward; each explores at
    eps^(1 + spread * i / (actors - 1)); under deterministic exploration nothing changes."""
    from tensordict import TensorDict
    from torchrl.data import Categorical
    from torchrl.envs.utils import ExplorationType, set_exploration_type

    from trajrl.algos.r2d2.networks import SpreadEpsilonGreedy
    from trajrl.base.keys import WORKER_KEY

    module = SpreadEpsilonGreedy(Categorical(4), 0.5, 0.5, 1, spread=3.0, actors=6, per_slot=3)
    td = TensorDict({"action": torch.zeros(3, dtype=torch.long), WORKER_KEY: torch.full((3,), 1)}, [3])
    torch.testing.assert_close(module.epsilons(td), 0.5 ** (1 + 3.0 * torch.tensor([3.0, 4.0, 5.0]) / 5))
    torch.manual_seed(0)
    many = TensorDict(
        {"action": torch.zeros(20_000, 3, dtype=torch.long), WORKER_KEY: torch.zeros(20_000, 3)}, [20_000, 3]
    )
    changed = (
        (module(many.clone())["action"] != 0).float().mean(0)
    )  # a random action is one of the 3 others 3/4 of the time
    expected = 0.75 * 0.5 ** (1 + 3.0 * torch.arange(3.0) / 5)
    torch.testing.assert_close(changed, expected, atol=0.015, rtol=0)
    with set_exploration_type(ExplorationType.DETERMINISTIC):
        assert module(many.clone())["action"].eq(0).all()


@pytest.mark.parametrize("initial_state", ["zero", "stored"])
def test_a_zero_learning_state_is_zero_whatever_the_buffer_stored(initial_state):
    """algo.initial_state=zero: each slice's first step sees a zero state, whatever state the
    buffer stored with it (one slice here starts mid-episode, where stored would be read): the
    update equals the one on the same batch with its stored states zeroed; stored: it differs."""
    batch = slices([12, 9], horizon=12)
    batch.set("action", torch.randint(2, (2, 12), generator=torch.Generator().manual_seed(0)))
    zeroed = batch.clone()
    for key in ("recurrent_state_h", "recurrent_state_c"):
        zeroed.get(key).zero_()
    losses = []
    for data in (batch, zeroed):
        torch.manual_seed(0)
        algo = R2D2(RecurrentQNet(2, 2, [8], 8), R2D2Settings(initial_state=initial_state))
        if initial_state == "zero":
            assert all(h.eq(0).all() for h in algo.initial_state(data))
        losses.append(algo.update(data)["loss"])
    assert (losses[0] == losses[1]) is (initial_state == "zero")
