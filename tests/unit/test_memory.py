"""The linear memory cores: one parallel pass over a sequence equals stepping it, resets included."""

from __future__ import annotations

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
