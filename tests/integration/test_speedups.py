"""The learner's speed-ups change no result: each algorithm's updates with them and
without them (the plain per-parameter Adam step and Polyak loop torch and the
textbook write) give the same losses, gradients and weights, on batches of a real
pipeline (real environments, collector, buffer and sampler). The collector's workers
yield the learner its core (``collector.worker_niceness``): a priority, which changes no
frame or update."""

import copy
import os

import pytest
import torch
from torch import nn

import trajrl
from trajrl.algos.networks import soft_update

PRESETS = {
    "r2d2": "experiment=r2d2_cartpole_novel",
    "rsac": "experiment=rsac_pendulum_novel",
    "ppo": "experiment=rppo_cartpole_novel",
}


def test_soft_update_is_polyak_averaging_parameter_by_parameter():
    torch.manual_seed(0)
    source, target = nn.LSTM(3, 5), nn.LSTM(3, 5)
    expected = [t + 0.3 * (s - t) for t, s in zip(target.parameters(), source.parameters())]
    soft_update(list(target.parameters()), list(source.parameters()), 0.3)
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
    cfg = trajrl.compose(
        [
            PRESETS[algo_name],
            "debug=smoke",
            "collector=sync",
            "env.num_envs=4",
            "collector.frames_per_batch=400",
            *(["trajs_per_batch=8"] if algo_name == "ppo" else []),
        ]
    )
    pipe = trajrl.build(cfg)
    for batch in pipe.collector:
        if pipe.on_policy:
            return pipe, batch
        if pipe.buffer.write_count >= 600:
            return pipe, pipe.sequences.sample()


def parameters(algo) -> list[nn.Parameter]:
    return [p for m in vars(algo).values() if isinstance(m, nn.Module) for p in m.parameters()]


def assert_same_up_to_rounding(got: torch.Tensor, want: torch.Tensor) -> None:
    """Equal up to float32 rounding, measured on the whole tensor: the distance is at most
    5e-4 of the expected tensor's norm. Reordered float32 sums (fused kernels, another CPU's
    vector width) put 2-5e-6 there after three updates; a learning rate off by 1% puts 1e-2."""
    assert got.shape == want.shape
    assert (got - want).norm() <= 5e-4 * want.norm() + 1e-9, f"{(got - want).norm()} against {want.norm()}"


@pytest.mark.parametrize("algo_name", ["r2d2", "rsac", "ppo"])
def test_each_learner_updates_as_it_would_with_the_plain_optimizer(algo_name):
    pipe, batch = a_batch(algo_name)
    with pipe:
        fast = pipe.algo
        assert optimizers(fast) and all(getattr(fast, name).defaults["fused"] for name in optimizers(fast))
        slow = plain(fast)
        before = [p.detach().clone() for p in parameters(fast)]
        results = []
        for algo in (fast, slow):
            torch.manual_seed(1)  # rsac's reparameterised actions draw from it
            stats = [algo.update(batch.clone()) for _ in range(3)]
            steps = [p.detach() - p0 for p, p0 in zip(parameters(algo), before)]
            grads = [p.grad.clone() for p in parameters(algo) if p.grad is not None]
            results.append((stats, steps, grads))
        (stats_a, steps_a, grads_a), (stats_b, steps_b, grads_b) = results
        assert len(grads_a) == len(grads_b) > 0 and any(step.abs().max() > 0 for step in steps_b)
        for a, b in zip(stats_a, stats_b):
            assert a == pytest.approx(b, rel=1e-5, abs=1e-6)
        for a, b in zip(steps_a + grads_a, steps_b + grads_b):
            assert_same_up_to_rounding(a, b)


@pytest.mark.parametrize("niceness", [10, 0])
def test_collector_workers_run_at_the_niceness_asked_and_the_learner_at_its_own(niceness):
    from helpers import processes_below, session_processes, wait_for_frames

    learner = os.getpriority(os.PRIO_PROCESS, 0)
    before = processes_below()
    cfg = trajrl.compose(["debug=smoke", "collector=multi_async", f"collector.worker_niceness={niceness}"])
    with trajrl.build(cfg) as pipe:
        pipe.collector.start()
        try:
            wait_for_frames(pipe, 200)
            workers = processes_below() - before - session_processes()
            assert len(workers) == cfg.collector.num_workers == 2
            assert {os.getpriority(os.PRIO_PROCESS, pid) for pid in workers} == {min(learner + niceness, 19)}
            assert os.getpriority(os.PRIO_PROCESS, 0) == learner
        finally:
            pipe.collector.async_shutdown()
