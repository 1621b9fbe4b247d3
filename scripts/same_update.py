"""Whether two checkouts' learners make the same update: the default run's learner (or the run
the overrides make) built in checkout A, its state and a few sampled batches saved, then that
state updated on those batches by A's code and by B's, each in a process of its own with the
checkout first on ``PYTHONPATH``. Prints each update's losses side by side and whether the weights
after them are equal to the bit.

    python scripts/same_update.py <checkout A> <checkout B> [overrides ...]
    python scripts/same_update.py /tmp/old . --b-overrides algo.n_step=3   # an override for B alone

A change that leaves the update the same to the bit leaves a learning row where it was, but for
the timing of updates against the collection (docs/results.md, "The same update, measured three times").
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

UPDATES = 5


def child(mode: str, path: str, overrides: list[str]) -> None:
    """In a checkout's process: ``make`` the state and batches, or ``update`` from them."""
    import torch
    from tensordict import TensorDict

    import trajrl

    torch.set_num_threads(1)
    cfg = trajrl.compose(
        ["debug=smoke", "collector=sync", "env.num_envs=4", "collector.frames_per_batch=400", *overrides]
    )
    with trajrl.build(cfg) as pipe:
        algo = pipe.algo
        if mode == "make":
            for _ in pipe.collector:
                if pipe.buffer.write_count >= 600:
                    break
            batches = [pipe.sequences.sample().to_dict() for _ in range(UPDATES)]
            torch.save({"state": algo.state_dict(), "batches": batches}, path)
            return
        saved = torch.load(path, weights_only=False)
        algo.load_state_dict(saved["state"])
        torch.manual_seed(1)  # continuous actions are sampled from it
        stats = [algo.update(TensorDict(b, batch_size=b["collector"]["mask"].shape)) for b in saved["batches"]]
        weights = [
            p.detach().clone() for m in vars(algo).values() if isinstance(m, torch.nn.Module) for p in m.parameters()
        ]
        torch.save({"stats": stats, "weights": weights}, f"{path}.{mode}")


def main() -> None:
    if len(sys.argv) > 2 and sys.argv[1] == "--child":
        child(sys.argv[2], sys.argv[3], sys.argv[4:])
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("a", type=Path, help="checkout A (its state and batches are made there)")
    parser.add_argument("b", type=Path, help="checkout B")
    parser.add_argument("overrides", nargs="*", help="the run's overrides in both (default: the default run)")
    parser.add_argument("--b-overrides", nargs="*", default=[], help="overrides for B's update alone")
    args = parser.parse_args()
    for checkout in (args.a, args.b):  # else the installed trajrl would answer for it, equal to itself
        if not (checkout / "trajrl" / "__init__.py").is_file():
            parser.error(f"{checkout} is not a checkout of trajrl (no trajrl/__init__.py there)")
    import torch

    with tempfile.TemporaryDirectory() as tmp:
        path = str(Path(tmp) / "state.pt")
        for mode, checkout, extra in (("make", args.a, []), ("a", args.a, []), ("b", args.b, args.b_overrides)):
            env = {**os.environ, "PYTHONPATH": str(checkout.resolve()), "RL_LOGGING_LEVEL": "WARNING"}
            command = [sys.executable, __file__, "--child", mode, path, *args.overrides, *extra]
            subprocess.run(command, env=env, cwd=tmp, check=True, stdout=subprocess.DEVNULL)
        a, b = (torch.load(f"{path}.{mode}", weights_only=False) for mode in ("a", "b"))
    for i, (x, y) in enumerate(zip(a["stats"], b["stats"]), 1):
        print(
            f"update {i}: " + ", ".join(f"{k} {x[k]:.7g} | {y[k]:.7g}" for k in ("critic_loss", "actor_loss") if k in x)
        )
    same = len(a["weights"]) == len(b["weights"]) and all(torch.equal(p, q) for p, q in zip(a["weights"], b["weights"]))
    print(f"weights after {UPDATES} updates: {'equal to the bit' if same else 'different'} ({args.a} | {args.b})")
    sys.exit(0 if same else 1)


if __name__ == "__main__":
    main()
