"""What the walk-throughs of docs/development.md ("Adding things") promise: an algorithm, a memory core
and a sampler are added from a module of their own, with no edit to trajrl. ``register_algo`` makes
``algo=<name>`` an option that composes with what it brings, trains, resumes and exports through the CLI;
``register_core`` makes ``algo.rnn=<name>`` a choice that every check, algorithm and sampler takes;
``register_sampler`` makes ``sampler=<kind>`` an option that composes, is checked by what its batches are,
and feeds every off-policy learner; a run trains with each (``tests/toy_algo.py``, ``tests/toy_core.py``,
``tests/toy_sampler.py``; through the CLI, the core and the sampler in one run: ``tests/toy_parts.py``)."""

import csv
from dataclasses import replace

import pytest
import torch
from helpers import run_cli
from toy_core import DecayingSum, decaying_sum

import trajrl
from trajrl.algos.memory import BUILDERS, Memory, recurrent_core, register_core
from trajrl.base.errors import ConfigError


def test_a_registered_core_follows_the_calling_convention_of_the_linear_cores():
    core = recurrent_core(Memory("decaying_sum", size=3), 2, 4)
    x = torch.randn(2, 5, 2)
    out, state = core(x)
    assert out.shape == (2, 5, 4) and state.shape == (1, 2, 3)
    starts = torch.zeros(2, 5, dtype=torch.bool)
    starts[:, 3] = True  # a restart before step 3: the steps from there as a sequence of their own
    restarted, _ = core(x, None, starts)
    alone, _ = core(x[:, 3:])
    torch.testing.assert_close(restarted[:, 3:], alone)
    stepped, after = core(x[:, :1])  # one step (acting) from zero, then the next from its state
    second, _ = core(x[:, 1:2], after)
    torch.testing.assert_close(torch.cat([stepped, second], 1), out[:, :2])


def test_registering_another_core_under_a_taken_name_is_refused():
    register_core("decaying_sum", decaying_sum)  # the same builder again (a re-import): nothing
    with pytest.raises(ValueError, match="registered already"):
        register_core("decaying_sum", lambda i, h, m: DecayingSum(i, h, m.size))
    assert BUILDERS["decaying_sum"] is decaying_sum


def test_its_name_is_a_choice_of_algo_rnn_that_the_checks_take_and_a_tape_needs():
    from trajrl.configuration.compose import validate

    cfg = validate(trajrl.compose(["debug=smoke", "collector=sync", "sampler=tape", "algo.rnn=decaying_sum"]))
    assert cfg.algo.rnn == "decaying_sum"
    with pytest.raises(ConfigError) as refused:
        validate(trajrl.compose(["debug=smoke", "algo.rnn=decaying_summ"]))
    assert refused.value.setting == "algo.rnn" and "decaying_sum" in str(refused.value)


@pytest.mark.parametrize(
    "overrides",
    [
        pytest.param(["algo=rsac"], id="rsac-slices"),
        pytest.param(["algo=r2d2", "sampler=tape"], id="r2d2-tape"),
        pytest.param(["algo=ppo", "algo.recurrent=true", "trajs_per_batch=4"], id="ppo"),
    ],
)
def test_a_run_trains_with_a_registered_core(overrides, tmp_path):
    """A smoke run (a thread collector: the toy core lives in this test module) with each learner."""
    cfg = trajrl.compose(["debug=smoke", "collector=sync", "algo.rnn=decaying_sum", "algo.memory_size=8", *overrides])
    metrics = trajrl.train(cfg, run_dir=tmp_path)
    assert metrics["frames"] >= cfg.total_frames
    saved = torch.load(tmp_path / "checkpoints" / "latest.pt", weights_only=False)
    assert any(key.endswith("rnn.logit") for key in leaves(saved["algo"])), "the learner's core is not the toy's"


@pytest.mark.parametrize("algo", ["rsac", pytest.param("r2d2", marks=pytest.mark.slow)])
def test_the_cli_trains_with_a_core_and_a_sampler_its_module_registers(algo, tmp_path):
    """``env.import_module=toy_parts`` registers ``algo.rnn=decaying_sum`` and ``sampler=torchrl_slices``: imported
    before composition and the checks, and in each worker process (the default collector); the sampler's slices
    never cross an episode (the audit) and both off-policy learners take them."""
    done = run_cli(
        tmp_path,
        "debug=smoke",
        f"algo={algo}",
        "env.import_module=toy_parts",
        "algo.rnn=decaying_sum",
        "algo.memory_size=8",
        "sampler=torchrl_slices",
        "audit=true",
    )
    assert done.returncode == 0, done.stderr[-2000:]
    said = done.stderr + done.stdout
    assert "collector multi_async" in said and "sampler torchrl_slices" in said, said[-2000:]
    run_dir = next(tmp_path.glob("outputs/*/*/"))
    saved = torch.load(run_dir / "checkpoints" / "latest.pt", weights_only=False)
    assert any(key.endswith("rnn.logit") for key in leaves(saved["algo"])), "the learner's core is not the toy's"
    with (run_dir / "metrics.csv").open() as f:
        audited = [row for row in csv.DictReader(f) if row.get("audit/batches_checked")]
    assert float(audited[-1]["audit/batches_checked"]) > 0
    assert float(audited[-1]["audit/violations"]) == 0, audited[-1]


@pytest.fixture
def registries():
    """The samplers' registries as they were, again after the test (a registration stays in its process)."""
    from trajrl.configuration.settings import SAMPLERS
    from trajrl.factory.replay import SAMPLER_BUILDERS

    kept = dict(SAMPLERS), dict(SAMPLER_BUILDERS)
    yield
    for registry, was in zip((SAMPLERS, SAMPLER_BUILDERS), kept):
        registry.clear()
        registry.update(was)


def test_a_sampler_is_refused_under_a_taken_kind_or_without_saying_what_its_batches_are(registries):
    from dataclasses import dataclass

    from trajrl.configuration.settings import EpisodeSamplerSettings, option
    from trajrl.factory.replay import SAMPLER_BUILDERS, register_sampler

    with pytest.raises(ValueError, match="registered already"):
        register_sampler(EpisodeSamplerSettings, lambda s, capacity: None)
    register_sampler(EpisodeSamplerSettings, SAMPLER_BUILDERS["episode"])  # the same pair: nothing

    @dataclass
    class Unsaid:
        kind: str = option("unsaid")

    with pytest.raises(ValueError, match="batches must be one of"):
        register_sampler(Unsaid, lambda s, capacity: None)


def test_a_registered_algorithm_is_an_option_with_its_settings_and_what_it_brings():
    import toy_algo  # noqa: F401 (registers algo=toy_q)

    from trajrl.algos.registry import SPECS, register_algo
    from trajrl.configuration.compose import validate

    cfg = validate(trajrl.compose(["algo=toy_q", "collector=sync"]))
    assert cfg.algo.name == "toy_q" and cfg.algo.epsilon == 0.2 and cfg.loop.warmup_frames == 300
    assert cfg.sampler.slices_per_batch == 8  # sampler.slices_per_batch=auto: what the algorithm says
    register_algo(SPECS["toy_q"])  # the same spec again (a re-import): nothing
    with pytest.raises(ValueError, match="registered already"):
        register_algo(replace(SPECS["toy_q"], slices_per_batch=4))
    with pytest.raises(ConfigError) as refused:  # its settings are checked as any algorithm's
        validate(trajrl.compose(["algo=toy_q", "algo.epsilon=2"]))
    assert refused.value.setting == "algo.epsilon"


def test_the_cli_trains_resumes_and_exports_an_algorithm_its_module_registers(tmp_path):
    """``env.import_module=toy_algo algo=toy_q``: a smoke run with the default collector (worker processes),
    its ``--help-all``, a resume that finds the module in the run's own overrides, and an ONNX file that acts as
    trajrl's greedy agent does."""
    shown = run_cli(tmp_path, "env.import_module=toy_algo", "algo=toy_q", "--help-all")
    assert shown.returncode == 0 and "epsilon = 0.2" in shown.stdout, shown.stdout[-2000:]
    done = run_cli(tmp_path, "debug=smoke", "algo=toy_q", "env.import_module=toy_algo")
    assert done.returncode == 0, done.stderr[-2000:]
    run_dir = next(tmp_path.glob("outputs/*/*/"))
    first = [row for row in csv.DictReader((run_dir / "metrics.csv").open()) if row.get("train/loss")]
    assert first and float(first[-1]["train/loss"]) >= 0
    again = run_cli(tmp_path, f"resume={run_dir}", "total_frames=1200")
    assert again.returncode == 0, again.stderr[-2000:]
    assert f"resumed from {run_dir}" in again.stderr + again.stdout
    out = tmp_path / "toy.onnx"
    exported = run_cli(tmp_path, "export", str(run_dir), "--format", "onnx", "--out", str(out), "--check-episodes", "2")
    assert exported.returncode == 0, exported.stderr[-2000:]
    assert "checked: the same actions as trajrl's greedy agent over 2 episodes" in exported.stdout


def leaves(tree: dict, prefix: str = "") -> list[str]:
    keys = []
    for key, value in tree.items():
        keys += leaves(value, f"{prefix}{key}.") if isinstance(value, dict) else [f"{prefix}{key}"]
    return keys
