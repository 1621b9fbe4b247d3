"""What keeps a value that is not finite out of the learner's weights and its checkpoints: a
step whose loss or gradient is not finite is not taken (``clipped_step``), a checkpoint of
weights that are not finite is not written, an evaluation that is not finite is never the best,
and the environment checks name a reward beyond float32's range (it would be stored as an
infinity). The runs that end on each: tests/cli/test_bad_steps.py."""

import math

import pytest
import torch
from torch import nn

from trajrl.algos.networks import adam, clipped_step
from trajrl.base.errors import LearnerFailed, NonFiniteUpdate
from trajrl.checkpoint import Checkpointer, LoopState, checkpoint_path, non_finite_entry
from trajrl.envs.env_check import reward_problem
from trajrl.training.evaluator import Evaluations


@pytest.mark.parametrize("bad", [float("nan"), float("inf")])
def test_a_step_whose_loss_is_not_finite_is_not_taken(bad):
    torch.manual_seed(0)
    net = nn.Linear(3, 2)
    optimizer = adam(net, 1e-2)
    before = {k: v.clone() for k, v in net.state_dict().items()}
    loss = net(torch.ones(4, 3)).sum() * bad
    loss.backward()
    with pytest.raises(NonFiniteUpdate, match=r"the test loss is -?(nan|inf) and its gradient.s norm (nan|inf)"):
        clipped_step(optimizer, list(net.parameters()), 1.0, loss, "test loss")
    assert all(torch.equal(before[k], v) for k, v in net.state_dict().items())
    assert not optimizer.state  # Adam's moments untouched too


def test_a_finite_step_is_taken_with_its_gradient_clipped_as_before():
    torch.manual_seed(0)
    net, twin = nn.Linear(3, 2), nn.Linear(3, 2)
    twin.load_state_dict(net.state_dict())
    for module, step in ((net, "ours"), (twin, "torch")):
        optimizer = adam(module, 1e-2)
        loss = (module(torch.ones(4, 3)) * 100).sum()
        loss.backward()
        if step == "ours":
            norm = clipped_step(optimizer, list(module.parameters()), 1.0, loss, "loss")
        else:
            expected = nn.utils.clip_grad_norm_(module.parameters(), 1.0)
            optimizer.step()
    assert torch.equal(norm, expected)
    assert all(torch.equal(a, b) for a, b in zip(net.parameters(), twin.parameters()))


def test_no_checkpoint_holds_a_weight_that_is_not_finite(tmp_path):
    net = nn.Linear(3, 2)
    save = Checkpointer(tmp_path, "test", net, {})
    save(LoopState(frames=100))
    saved = checkpoint_path(tmp_path).read_bytes()
    with torch.no_grad():
        net.bias[1] = float("nan")
    with pytest.raises(LearnerFailed, match="the learner's algo/bias holds a value that is not finite"):
        save(LoopState(frames=200))
    with pytest.raises(LearnerFailed):
        save.best(LoopState(frames=200))
    assert checkpoint_path(tmp_path).read_bytes() == saved  # the one before stays
    assert not checkpoint_path(tmp_path, "best").exists()


def test_non_finite_entry_names_the_first_in_nested_state():
    state = {"a": [torch.ones(2), {"b": torch.tensor([1.0, float("-inf")])}], "c": torch.zeros(1, dtype=torch.long)}
    assert non_finite_entry(state) == "a/1/b"
    assert non_finite_entry({"a": torch.ones(3)}) is None


def test_an_evaluation_that_is_not_finite_is_reported_and_never_the_best():
    returns = iter([10.0, float("nan"), 5.0])
    evaluations = Evaluations(lambda: {"return": next(returns)}, stop_at_return=8.0)
    first = evaluations.run(1000, closing=True)
    second = evaluations.run(2000)
    assert "eval/return_not_finite" not in first
    assert second["eval/return_not_finite"] == 1.0 and math.isnan(second["eval/return"])
    assert not evaluations.improved and evaluations.best == 10.0 and evaluations.solved is None
    evaluations.run(3000)
    assert evaluations.best == 10.0


def test_a_reward_beyond_float32s_range_is_named():
    assert reward_problem(3e38) == ""
    assert "beyond float32's range" in reward_problem(1e300)
    assert reward_problem(float("nan")) == "a reward of nan"
