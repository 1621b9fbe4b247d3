"""The linear memory cores: one parallel pass over a sequence equals stepping it, resets included."""

from __future__ import annotations

import math

import pytest
import torch
from tensordict import TensorDict

from trajrl.algos.memory import FFM, LRU, MemoryStep, Scan, linear_scan, run_memory


def stepped(core, x, state, starts):
    """The core one step at a time, its state zeroed by hand before each flagged step."""
    outs = []
    for t in range(x.shape[1]):
        state = torch.where(starts[:, t].view(1, -1, 1), 0.0, state)
        out, state = core(x[:, t : t + 1], state)
        outs.append(out)
    return torch.cat(outs, 1), state


def episodes_on_a_tape(rows: int, horizon: int, seed: int) -> torch.Tensor:
    """Start flags of episodes of different lengths laid end to end (a row may begin mid-episode)."""
    g = torch.Generator().manual_seed(seed)
    starts = torch.rand(rows, horizon, generator=g) < 0.12
    starts[0, 5] = starts[1, 1] = True
    return starts


CORES = {
    "lru": lambda: LRU(5, 6, size=4, layers=2),
    "ffm": lambda: FFM(5, 6, size=3, context=2),
}


@pytest.mark.parametrize("kind", sorted(CORES))
def test_the_parallel_pass_equals_the_step_by_step_one_outputs_and_gradients(kind):
    torch.manual_seed(0)
    core = CORES[kind]().double()
    x = torch.randn(2, 47, 5, dtype=torch.double)
    starts = episodes_on_a_tape(2, 47, 1)
    state = torch.randn(core.num_layers, 2, core.state_size, dtype=torch.double)
    weights = torch.randn(2, 47, 6, dtype=torch.double)

    grads = []
    for run in (lambda xi: core(xi, state, starts), lambda xi: stepped(core, xi, state, starts)):
        xi = x.clone().requires_grad_()
        out, final = run(xi)
        core.zero_grad()
        ((out * weights).sum() + final.sum()).backward()
        grads.append((out.detach(), final.detach(), xi.grad, [p.grad.clone() for p in core.parameters()]))
    (out_a, final_a, gx_a, gp_a), (out_b, final_b, gx_b, gp_b) = grads
    torch.testing.assert_close(out_a, out_b, rtol=1e-10, atol=1e-10)
    torch.testing.assert_close(final_a, final_b, rtol=1e-10, atol=1e-10)
    torch.testing.assert_close(gx_a, gx_b, rtol=1e-9, atol=1e-10)
    for a, b in zip(gp_a, gp_b):
        torch.testing.assert_close(a, b, rtol=1e-9, atol=1e-10)


@pytest.mark.parametrize("kind", sorted(CORES))
def test_nothing_crosses_an_episode_start(kind):
    """Changing an earlier episode's inputs (or the state it began from) changes nothing from the next start on."""
    torch.manual_seed(1)
    core = CORES[kind]().double()
    x = torch.randn(1, 60, 5, dtype=torch.double)
    starts = torch.zeros(1, 60, dtype=torch.bool)
    starts[0, [0, 17, 18, 40]] = True  # episodes of 17, 1, 22 and 20 steps
    out, _ = core(x, None, starts)
    changed = x.clone()
    changed[0, :17] += torch.randn(17, 5, dtype=torch.double)
    changed[0, 18:40] = 0.0
    state = torch.randn(core.num_layers, 1, core.state_size, dtype=torch.double)
    out_changed, _ = core(changed, state, starts)
    assert not torch.allclose(out[0, :17], out_changed[0, :17])
    assert torch.equal(out[0, 17], out_changed[0, 17])
    assert torch.equal(out[0, 40:], out_changed[0, 40:])


def test_the_scan_is_exact_over_thousands_of_steps_in_float32():
    """Episodes of 6,000 steps, decays near 1 and far from it: float32 stays within rounding of float64."""
    torch.manual_seed(2)
    decay = torch.polar(torch.cat([torch.full((4,), 0.9999), torch.full((4,), 0.3)]), torch.rand(8))
    inputs = torch.randn(2, 6000, 8, dtype=torch.cfloat)
    starts = torch.zeros(2, 6000, dtype=torch.bool)
    starts[1, 3000] = True
    fast = linear_scan(decay, inputs, None, starts)
    reference, h = [], torch.zeros(2, 8, dtype=torch.cdouble)
    a, b = decay.to(torch.cdouble), inputs.to(torch.cdouble)
    for t in range(6000):
        h = torch.where(starts[:, t : t + 1], 0, a * h) + b[:, t]
        reference.append(h)
    reference = torch.stack(reference, 1)
    assert torch.isfinite(fast).all()
    scale = reference.abs().amax(1, keepdim=True)
    assert ((fast.to(torch.cdouble) - reference).abs() / scale).max() < 1e-4


@pytest.mark.parametrize("kind", sorted(CORES))
def test_acting_step_by_step_gives_the_learners_features(kind):
    """The acting module over an episode's steps (state carried as a collector carries it, reset at
    is_init) gives the outputs and the stored states the learner's one pass gives."""
    torch.manual_seed(3)
    core = CORES[kind]()
    act = MemoryStep(core, "embed", "features")
    x = torch.randn(2, 25, 5)  # two environments side by side
    is_init = torch.zeros(2, 25, dtype=torch.bool)
    is_init[:, 0] = True
    is_init[0, 11] = True  # the first environment starts a new episode at step 11
    learnt, _ = run_memory(core, x, None, is_init)
    state, features, stored = torch.randn(2, *act.make_tensordict_primer().primers["recurrent_state"].shape), [], []
    for t in range(25):
        td = TensorDict({"embed": x[:, t], "is_init": is_init[:, t, None], "recurrent_state": state}, [2])
        act(td)
        stored.append(torch.where(is_init[:, t, None, None], 0.0, td["recurrent_state"]))
        features.append(td["features"])
        state = td["next", "recurrent_state"]
    torch.testing.assert_close(torch.stack(features, 1), learnt, rtol=1e-5, atol=1e-5)
    # the state stored with step t is the state before it: zeros at an episode's start,
    # else what the learner's pass over the steps before it ends with
    torch.testing.assert_close(stored[11][0], torch.zeros_like(stored[11][0]))
    _, (after_10,) = run_memory(core, x[:1, :10])
    torch.testing.assert_close(stored[10][0], after_10[:, 0], rtol=1e-5, atol=1e-5)


def test_the_scans_gradient_is_autograds():
    """The scan's written-out gradient (a scan backwards) against torch's numerical one, complex, float64."""
    torch.manual_seed(4)
    a = torch.polar(torch.rand(2, 23, 3, dtype=torch.double), torch.rand(2, 23, 3, dtype=torch.double) * 6)
    a = (a * (torch.rand(2, 23, 1) > 0.15)).requires_grad_()  # zeros: restarts
    b = torch.randn(2, 23, 3, dtype=torch.cdouble, requires_grad=True)
    state = torch.randn(2, 3, dtype=torch.cdouble, requires_grad=True)
    assert torch.autograd.gradcheck(Scan.apply, (a, b, state))


@pytest.mark.parametrize("kind", ["lstm", "gru", "lru", "ffm"])
def test_every_core_is_what_its_own_learning_rate_applies_to(kind):
    """``algo.rnn_lr``'s parameter group: exactly the core's parameters, whichever the core."""
    from trajrl.algos.memory import Memory
    from trajrl.algos.networks import recurrent_parameters
    from trajrl.algos.r2d2.networks import RecurrentQNet

    net = RecurrentQNet(2, 2, [8], 8, Memory(kind, size=4))
    assert recurrent_parameters(net) == {id(p) for p in net.rnn.parameters()}
    assert not recurrent_parameters(net) & {id(p) for p in [*net.encoder.parameters(), *net.head.parameters()]}


@pytest.mark.parametrize("kind", ["lstm", "gru"])
def test_a_forget_bias_makes_a_new_core_keep_what_it_holds(kind):
    """``algo.forget_bias=b``: the keeping gate of every cell (an LSTM's forget gate, a GRU's update gate) opens at
    sigmoid(b) on a zero input and state, and the other gates keep torch's initialisation (the same seed, none set)."""
    from trajrl.algos.memory import Memory, recurrent_core

    torch.manual_seed(0)
    plain = recurrent_core(Memory(kind), 3, 4)
    torch.manual_seed(0)
    biased = recurrent_core(Memory(kind, forget_bias=2.0), 3, 4)
    keeping = slice(4, 8)  # the second gate's rows: (i, f, g, o) and (r, z, n)
    total = biased.bias_ih_l0 + biased.bias_hh_l0
    assert torch.equal(torch.sigmoid(total[keeping]), torch.sigmoid(torch.full((4,), 2.0)))
    others = torch.ones_like(total, dtype=torch.bool)
    others[keeping] = False
    assert torch.equal(total[others], (plain.bias_ih_l0 + plain.bias_hh_l0)[others])
    assert torch.equal(biased.weight_hh_l0, plain.weight_hh_l0)
    # what it keeps: an LSTM's cell state c' = f c + i g; with every weight and the other biases zero,
    # a GRU's h' = (1 - z) n + z h with n = 0: each keeps sigmoid(2) of its state a step
    with torch.no_grad():
        for name, p in biased.named_parameters():
            if name != "bias_ih_l0":
                p.zero_()
        biased.bias_ih_l0[others] = 0.0
        biased.bias_ih_l0[:4] = -30.0 if kind == "lstm" else 0.0  # an LSTM's input gate shut
    state = torch.ones(1, 1, 4)
    x = torch.zeros(1, 1, 3)
    if kind == "lstm":
        _, (_, c) = biased(x, (torch.zeros(1, 1, 4), state))
        kept = c
    else:
        _, kept = biased(x, state)
    assert torch.allclose(kept, torch.full((1, 1, 4), torch.sigmoid(torch.tensor(2.0)).item()), atol=1e-6)


def test_chrono_initialisation_spreads_the_forget_gates_over_the_horizon():
    """``algo.chrono_horizon=T``: each cell's forget-gate bias is log u with u in [1, T - 1] and its input gate's
    -log u (Tallec & Ollivier, 2018), over the cells a spread of time scales; the other gates keep torch's."""
    from trajrl.algos.memory import Memory, recurrent_core

    torch.manual_seed(0)
    plain = recurrent_core(Memory("lstm"), 3, 64)
    torch.manual_seed(0)
    core = recurrent_core(Memory("lstm", chrono_horizon=40), 3, 64)
    total = core.bias_ih_l0 + core.bias_hh_l0
    forget, inputs = total[64:128], total[:64]
    assert forget.min() >= 0 and forget.max() <= math.log(39) + 1e-6
    assert forget.max() - forget.min() > 2  # a spread, not one value
    torch.testing.assert_close(inputs, -forget)
    torch.testing.assert_close(total[128:], (plain.bias_ih_l0 + plain.bias_hh_l0)[128:])


def test_chrono_spread_log_draws_the_forget_biases_uniform_in_log_time():
    """``algo.chrono_spread=log``: the forget biases log u are uniform in [0, log(T - 1)], so about as many cells
    start below a bias of 1 (keeping under 0.73 a step) as a uniform draw of log u over that range gives: a quarter
    at T = 40, where chrono's uniform u gives under 5 %."""
    from trajrl.algos.memory import Memory, recurrent_core

    torch.manual_seed(0)
    log_spread = recurrent_core(Memory("lstm", chrono_horizon=40, chrono_spread="log"), 3, 2000)
    torch.manual_seed(0)
    uniform = recurrent_core(Memory("lstm", chrono_horizon=40), 3, 2000)

    def forget(core):
        return (core.bias_ih_l0 + core.bias_hh_l0)[2000:4000]

    assert forget(log_spread).min() >= 0 and forget(log_spread).max() <= math.log(39) + 1e-6
    assert (forget(log_spread) < 1).float().mean().item() == pytest.approx(1 / math.log(39), abs=0.03)
    assert (forget(uniform) < 1).float().mean().item() < 0.06
    torch.testing.assert_close((log_spread.bias_ih_l0 + log_spread.bias_hh_l0)[:2000], -forget(log_spread))
