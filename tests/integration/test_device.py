"""``device``: the learner trains there; the collectors and evaluation act on CPU copies of
its networks, which the loop refreshes on each weight push (and before each evaluation).
``device=cuda`` on a machine without CUDA is refused (tests/cli/test_refusals.py); the tests
marked ``cuda`` run only where torch sees a CUDA device."""

import math

import pytest
import torch
from helpers import run_cli
from torch import nn

import trajrl

CUDA = torch.cuda.is_available()
cuda = pytest.mark.skipif(not CUDA, reason="torch sees no CUDA device on this machine")

PRESETS = {
    "r2d2": ["experiment=r2d2_cartpole_novel"],
    "rsac": ["experiment=rsac_pendulum_novel"],
    "ppo": ["experiment=rppo_cartpole_novel", "trajs_per_batch=8"],
}


def learner_nets(algo) -> list[nn.Module]:
    return [m for m in vars(algo).values() if isinstance(m, nn.Module)]


def test_auto_puts_the_learner_where_there_is_cuda_and_the_policies_on_cpu():
    cfg = trajrl.compose(["debug=smoke", "collector=sync", "device=auto"])
    with trajrl.build(cfg) as pipe:
        assert pipe.algo.device.type == ("cuda" if CUDA else "cpu")
        assert all(p.device.type == "cpu" for p in pipe.policy.parameters())
        assert all(p.device.type == "cpu" for p in pipe.greedy_policy.parameters())


def batch_of(pipe):
    for batch in pipe.collector:
        if pipe.on_policy:
            return batch
        if pipe.buffer.write_count >= 600:
            return pipe.sequences.sample()


@cuda
@pytest.mark.parametrize("algo_name", ["r2d2", "rsac", "ppo"])
def test_an_update_on_cuda_is_the_update_on_cpu_and_its_weights_reach_the_cpu_policy(algo_name):
    """The same batch, learnt from on cpu and on cuda: the same statistics and weights up to
    rounding (rsac: finite, its reparameterised actions come from the device's generator)."""
    results = []
    for device in ("cpu", "cuda"):
        cfg = trajrl.compose(
            [
                *PRESETS[algo_name],
                "debug=smoke",
                "collector=sync",
                "env.num_envs=4",
                "collector.frames_per_batch=400",
                f"device={device}",
            ]
        )
        with trajrl.build(cfg) as pipe:
            batch = batch_of(pipe) if not results else results[0][0]
            torch.manual_seed(1)
            stats = pipe.algo.update(batch.clone())
            assert all(p.device.type == device for net in learner_nets(pipe.algo) for p in net.parameters())
            pipe.acting.pull()
            learner = [p.detach().cpu() for net in learner_nets(pipe.algo) for p in net.parameters()]
            acting = list(pipe.policy.parameters())
            assert all(p.device.type == "cpu" for p in acting)
            assert all(any(torch.equal(p.detach(), w) for w in learner) for p in acting)
            results.append((batch, stats, learner))
    (_, cpu_stats, cpu_weights), (_, cuda_stats, cuda_weights) = results
    assert all(math.isfinite(v) for v in cuda_stats.values()), cuda_stats
    if algo_name == "rsac":  # its actions are drawn on the device: another generator than the CPU's
        return
    for key in cpu_stats:
        assert cuda_stats[key] == pytest.approx(cpu_stats[key], rel=1e-3, abs=1e-4), key
    for a, b in zip(cuda_weights, cpu_weights):
        assert (a - b).norm() <= 1e-3 * b.norm() + 1e-6


@cuda
@pytest.mark.parametrize(
    "overrides",
    [
        ["algo=r2d2", "collector=multi_async"],
        ["experiment=rsac_pendulum_novel"],
        ["algo=ppo", "algo.recurrent=true", "collector=multi_sync"],
        ["env=bit_flipping", "sampler.her_ratio=0.5", "sampler.her_state=recompute"],
        ["algo=r2d2", "algo.rnn=lru", "sampler=tape", "sampler.tape_frames=200"],
        ["algo=rsac", "algo.rnn=ffm", "sampler=tape", "sampler.tape_frames=200"],
        ["algo=ppo", "algo.recurrent=true", "algo.rnn=lru"],
    ],
)
def test_a_run_on_cuda_trains_and_evaluates_end_to_end(overrides, tmp_path):
    result = run_cli(tmp_path, *overrides, "debug=smoke", "device=cuda", "audit=true")
    assert result.returncode == 0, result.stderr[-3000:]
    assert "0 violations" in result.stdout


@cuda
@pytest.mark.parametrize("kind", ["lru", "ffm"])
def test_a_linear_core_on_cuda_is_the_core_on_cpu_restarts_and_gradients_included(kind):
    """One pass over a tape of episodes (the chunked scan and its written-out gradient) on cuda
    against the same pass on cpu, float64."""
    from trajrl.algos.memory import FFM, LRU

    torch.manual_seed(0)
    core = (LRU(5, 6, size=8, layers=2) if kind == "lru" else FFM(5, 6, size=8, context=2)).double()
    x = torch.randn(2, 300, 5, dtype=torch.double)
    starts = torch.rand(2, 300) < 0.05
    results = []
    for device in ("cpu", "cuda"):
        core.to(device)
        xi = x.to(device).detach().requires_grad_()
        out, final = core(xi, None, starts.to(device))
        core.zero_grad()
        (out.square().sum() + final.sum()).backward()
        results.append([t.detach().cpu() for t in (out, final, xi.grad, *(p.grad for p in core.parameters()))])
    for a, b in zip(*results):
        torch.testing.assert_close(a, b, rtol=1e-9, atol=1e-9)
