"""Time a step of an exported agent (``trajrl export``) against trajrl's own greedy policy.

    python scripts/bench_export.py                      # the default agent (recurrent SAC-discrete, LSTM)
    python scripts/bench_export.py algo=ppo algo.recurrent=true --batches 1 64 256

The agent of the overrides is built untrained (a step costs the same whatever the weights) and
written as both formats in a temporary folder; then, for each batch size, one step for a batch of
that many environments is timed (the median of ``--repeats`` rounds of ``--steps`` steps, the state
carried from step to step) for: trajrl's greedy policy (TensorDict modules, as ``trajrl evaluate``
acts; the baseline), the same step in plain torch (``GreedyStep``, eager), the ``.pt2`` program
(torch alone) and the ``.onnx`` file (onnxruntime alone). Prints microseconds a step and each one's
speed over the baseline. One torch thread unless ``--threads``; onnxruntime gets the same number.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
from tensordict import TensorDict
from torchrl.envs.utils import ExplorationType, set_exploration_type

import trajrl
from trajrl.configuration.compose import validate
from trajrl.envs.gym_envs import env_spaces
from trajrl.factory.agent import build_agent
from trajrl.report.export import (
    SIDECAR,
    Exported,
    describe,
    example_inputs,
    exported_program,
    greedy_step,
    quiet_exporters,
    write_onnx,
)


def median_step_us(step, steps: int, repeats: int) -> float:
    """The median over ``repeats`` rounds of a step's time in microseconds (``step()`` runs one)."""
    step()  # warm-up
    rounds = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(steps):
            step()
        rounds.append((time.perf_counter() - t0) / steps * 1e6)
    return statistics.median(rounds)


def trajrl_policy(agent, observation_size: int, batch: int):
    """One greedy step of trajrl's policy for ``batch`` environments, the state carried."""
    shapes = agent.state_shapes()
    td = TensorDict(
        {
            "observation": torch.randn(batch, observation_size),
            "is_init": torch.zeros(batch, 1, dtype=torch.bool),
            **{key: torch.zeros(batch, *shape) for key, shape in shapes.items()},
        },
        [batch],
    )

    def step():
        nonlocal td
        with set_exploration_type(ExplorationType.DETERMINISTIC), torch.no_grad():
            out = agent.greedy_policy(td)
        td = td.update({key: out.get(("next", key)) for key in shapes})

    return step


def file_policy(agent: Exported, inputs: list[np.ndarray]):
    """One step of an exported file (its runtime) for a batch, the state carried."""

    def step():
        inputs[1] = agent(*inputs)[1]

    return step


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("overrides", nargs="*", help="the agent's overrides (default: the default agent)")
    parser.add_argument("--batches", type=int, nargs="+", default=[1, 64])
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)

    cfg = validate(trajrl.compose([*args.overrides, "debug=smoke"]))
    spaces = env_spaces(cfg.env)  # what trajrl's policy reads: the previous action and reward too
    agent = build_agent(cfg, spaces)
    step = greedy_step(cfg, agent)
    folder = Path(tempfile.mkdtemp(prefix="bench_export_"))
    files = {}
    for fmt, suffix in (("torch", ".pt2"), ("onnx", ".onnx")):
        spec = describe(cfg, step, "latest", fmt)
        example = example_inputs(step, spec["observation_size"])
        with quiet_exporters():
            program = exported_program(step, example)
            files[fmt] = folder / f"agent{suffix}"
            if fmt == "torch":
                torch.export.save(program, files[fmt], extra_files={SIDECAR: json.dumps(spec)})
            else:
                write_onnx(program, example, spec, files[fmt])
    onnx = Exported(files["onnx"])
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = options.inter_op_num_threads = args.threads
    onnx.session = onnxruntime.InferenceSession(str(files["onnx"]), options, providers=["CPUExecutionProvider"])
    players = {"torch (.pt2)": Exported(files["torch"]), "onnxruntime (.onnx)": onnx}
    players["GreedyStep, eager torch"] = Exported.of(step, onnx.spec)
    size = onnx.spec["observation_size"]

    overrides = " ".join(args.overrides) or "the default agent"
    print(f"{overrides}: state {onnx.spec['state_size']} numbers; {args.threads} thread(s); median of "
          f"{args.repeats} x {args.steps} steps; files {files['onnx'].stat().st_size / 1024:.0f} kB (.onnx), "
          f"{files['torch'].stat().st_size / 1024:.0f} kB (.pt2)")  # fmt: skip
    print()
    print(
        "| batch | trajrl's greedy policy (baseline), us/step | "
        + " | ".join(f"{name}, us/step (x)" for name in players)
        + " |"
    )
    print("|---" * (2 + len(players)) + "|")
    for batch in args.batches:
        base = median_step_us(trajrl_policy(agent, spaces.observations, batch), args.steps, args.repeats)
        cells = []
        for player in players.values():
            inputs = [
                np.random.randn(batch, size).astype(np.float32),
                player.initial_state(batch),
                np.zeros(batch, bool),
            ]
            inputs += [np.zeros(batch, np.float32)] if player.spec["previous_reward"] else []
            us = median_step_us(file_policy(player, inputs), args.steps, args.repeats)
            cells.append(f"{us:,.0f} ({base / us:.2f}x)")
        print(f"| {batch} | {base:,.0f} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
