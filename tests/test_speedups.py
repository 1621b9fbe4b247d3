"""The learner's speed-ups change no result: each algorithm's updates with them and
without them (the plain per-parameter Adam step and Polyak loop torch and the
textbook write) give the same losses, gradients and weights, on batches of a real
pipeline (real environments, collector, buffer and sampler)."""
import copy

import pytest
import torch
from torch import nn

import trajrl
from trajrl.algos.networks import soft_update

PRESETS = {"r2d2": "experiment=r2d2_cartpole_novel", "rsac": "experiment=rsac_pendulum_novel",
           "ppo": "experiment=rppo_cartpole_novel"}


def test_soft_update_is_polyak_averaging_parameter_by_parameter():
    torch.manual_seed(0)
    source, target = nn.LSTM(3, 5), nn.LSTM(3, 5)
    expected = [t + 0.3 * (s - t) for t, s in zip(target.parameters(), source.parameters())]
    soft_update(target, source, 0.3)
    for got, want in zip(target.parameters(), expected):
        torch.testing.assert_close(got, want, rtol=0, atol=1e-7)


def optimizers(algo) -> list[str]:
    return [name for name, value in vars(algo).items() if isinstance(value, torch.optim.Optimizer)]


def plain(algo):
    """A copy of ``algo`` whose optimisers take torch's default, per-parameter step."""
    other = copy.deepcopy(algo)
    for name in optimizers(other):
        fused = getattr(other, name)
        params = [p for group in fused.param_groups for p in group["params"]]
        kwargs = {k: v for k, v in fused.param_groups[0].items() if k in ("lr", "eps", "betas", "weight_decay")}
        setattr(other, name, torch.optim.Adam(params, foreach=False, **kwargs))
    return other


def a_batch(algo_name: str):
    """A pipeline of the algorithm's preset (one environment process, a tiny budget) and a batch
    of what it collected: sampled from its buffer, or PPO's batch of episodes."""
    cfg = trajrl.compose([PRESETS[algo_name], "debug=smoke", "collector=sync", "env.num_envs=4",
                          "collector.frames_per_batch=400", *(["trajs_per_batch=8"] if algo_name == "ppo" else [])])
    pipe = trajrl.build(cfg)
    for batch in pipe.collector:
        if pipe.buffer is None:
            return pipe, batch
        if pipe.buffer.write_count >= 600:
            return pipe, pipe.sequences.sample()


@pytest.mark.parametrize("algo_name", ["r2d2", "rsac", "ppo"])
def test_each_learner_updates_as_it_would_with_the_plain_optimizer(algo_name):
    pipe, batch = a_batch(algo_name)
    with pipe:
        fast = pipe.algo
        assert optimizers(fast) and all(getattr(fast, name).defaults["fused"] for name in optimizers(fast))
        slow = plain(fast)
        results = []
        for algo in (fast, slow):
            torch.manual_seed(1)  # rsac's reparameterised actions draw from it
            stats = [algo.update(batch.clone()) for _ in range(3)]
            nets = [m for m in vars(algo).values() if isinstance(m, nn.Module)]
            weights = [p.detach().clone() for net in nets for p in net.parameters()]
            grads = [p.grad.clone() for net in nets for p in net.parameters() if p.grad is not None]
            results.append((stats, weights, grads))
        (stats_a, weights_a, grads_a), (stats_b, weights_b, grads_b) = results
        assert len(grads_a) == len(grads_b) > 0
        for a, b in zip(stats_a, stats_b):
            assert a == pytest.approx(b, rel=1e-5, abs=1e-6)
        for a, b in zip(weights_a + grads_a, weights_b + grads_b):
            torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)
