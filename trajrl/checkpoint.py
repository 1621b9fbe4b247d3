"""Checkpoints of a run in its directory (``checkpoints/latest.pt``, and ``best.pt``:
the agent of the best evaluation, without the buffer): the learner
(networks, target networks, optimisers, counters), the behaviour policy's epsilon
and weight version, the loop's counters, the RNG state and the replay buffer with
its sampler state, everything ``resume=<run dir>`` needs to continue.

Written atomically (to a temporary file, then renamed), so a run stopped at any
moment leaves the previous checkpoint whole. Read with ``weights_only=True``:
loading never unpickles arbitrary objects, and a truncated or foreign file is
refused with a clear error.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch

from trajrl.base import internals
from trajrl.base.errors import CheckpointError, LearnerFailed
from trajrl.base.files import replaced_whole
from trajrl.base.signals import critical
from trajrl.replay.episodes import buffer_locked

FORMAT = "trajrl-checkpoint/2"


#: The checkpoints a run keeps: the last one saved, and the agent of its best evaluation.
WHICH = ("latest", "best")


def checkpoint_path(run_dir: str | Path, which: str = "latest") -> Path:
    return Path(run_dir) / "checkpoints" / f"{which}.pt"


def save_checkpoint(path: str | Path, state: dict[str, Any]) -> Path:
    """``state`` (tensors, numbers, strings and containers of them), tagged with the format."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        with replaced_whole(path) as tmp:  # the checkpoint before is replaced only by a whole one
            torch.save({"format": FORMAT, **state}, tmp)
    except (OSError, RuntimeError) as err:  # a full disk: torch reports it as either
        kept = f"; {path.name} still holds the checkpoint before" if path.exists() else ""
        reason = (
            err.strerror
            if isinstance(err, OSError) and err.strerror
            else "not written whole (a full disk, or a file size limit)"
        )
        raise OSError(
            getattr(err, "errno", None), f"{reason}, while the checkpoint was written{kept}", str(path)
        ) from None
    return path


@dataclass
class LoopState:
    """The loop's own counters, as a checkpoint saves them (gradient updates are the learner's)."""

    frames: int = 0  # frames stored (off-policy) or learnt from (PPO)
    episodes: int = 0  # episodes stored (PPO: learnt from)
    best_eval: float = -math.inf  # the best evaluation return so far
    solved_return: float | None = None  # the evaluation that reached loop.stop_at_return (the run stopped there)
    total_frames: int | None = None  # the budget of the run that saved it
    frames_stepped: int | None = None  # frames the environments stepped (stored, in flight, lost); None: not counted
    episodes_begun: int | None = None  # episodes they began


class Checkpointer:
    """Saves what a run needs to continue: ``save(loop_state)``.

    The replay buffer is saved under its own locks, so a collector thread writing
    into it waits meanwhile (worker processes are paused by the loop)."""

    def __init__(self, run_dir: str | Path, algo_name: str, algo, policy_state: dict, buffer=None):
        self.path, self.algo_name, self.algo = checkpoint_path(run_dir), algo_name, algo
        self.policy_state, self.buffer = policy_state, buffer

    def __call__(self, loop: LoopState) -> Path:
        """``checkpoints/latest.pt``: the run as it is now (collection paused or over), written
        whole before a signal is let through (``trajrl.base.signals.critical``)."""
        with critical():
            if self.buffer is None:
                return save_checkpoint(self.path, self.state(loop))
            with buffer_locked(self.buffer):
                return save_checkpoint(self.path, {**self.state(loop), "buffer": self.buffer.state_dict()})

    def best(self, loop: LoopState) -> Path:
        """``checkpoints/best.pt``: the agent as it is now (just evaluated at its best), without
        the buffer; written whole before a signal is let through."""
        with critical():
            return save_checkpoint(self.path.with_name("best.pt"), self.state(loop))

    def state(self, loop: LoopState) -> dict[str, Any]:
        """What a checkpoint holds; ``LearnerFailed`` where a weight (or an optimiser's statistic) is not
        finite: no checkpoint ever holds one (the one before stays)."""
        learner = {"algo": self.algo.state_dict(), "policy": {n: m.state_dict() for n, m in self.policy_state.items()}}
        bad = non_finite_entry(learner)
        if bad is not None:
            raise LearnerFailed(
                f"the learner's {bad} holds a value that is not finite: no checkpoint written; the checkpoints "
                f"in {self.path.parent} hold the last finite weights"
            )
        return {
            "algo_name": self.algo_name,
            "frames": int(loop.frames),
            **learner,
            "loop": asdict(loop),
            "rng": torch.get_rng_state(),
        }


def non_finite_entry(state: Any, key: str = "") -> str | None:
    """The key (``algo/critics/0.weight``) of the first floating-point tensor in ``state`` (nested
    dicts, lists and tuples) holding a NaN or an infinity; None where none does."""
    if isinstance(state, torch.Tensor):
        return key if state.is_floating_point() and not bool(torch.isfinite(state).all()) else None
    items = state.items() if isinstance(state, dict) else enumerate(state) if isinstance(state, (list, tuple)) else ()
    for name, value in items:
        found = non_finite_entry(value, f"{key}/{name}" if key else str(name))
        if found is not None:
            return found
    return None


def restore(payload: dict, algo, policy_state: dict, buffer=None, rng: bool = True) -> LoopState:
    """Put a checkpoint back into freshly built objects (before any collector starts),
    and torch's RNG state with ``rng``; returns the loop's counters."""
    algo.load_state_dict(payload["algo"])
    for name, module in policy_state.items():
        module.load_state_dict(payload["policy"][name])
    if buffer is not None:
        if "buffer" not in payload:
            raise CheckpointError("the checkpoint holds no replay buffer; it cannot resume an off-policy run")
        saved = next(iter(internals.saved_storage_contents(payload["buffer"]).values()), None)
        ndim = buffer.storage.ndim
        if saved is not None and saved.shape[0] != -(-buffer.storage.max_size // saved.shape[1:ndim].numel()):
            frames = saved.shape[:ndim].numel()
            raise CheckpointError(
                f"the checkpoint's buffer holds {frames:,} frames and this run's "
                f"{buffer.storage.max_size:,}; resume with storage.capacity={frames}"
            )
        buffer.load_state_dict(payload["buffer"])  # its writer numbers new episodes after the stored ones
    if rng:
        torch.set_rng_state(payload["rng"])
    loop = payload["loop"]
    return LoopState(
        int(payload["frames"]),
        int(loop.get("episodes", 0)),
        float(loop.get("best_eval", -math.inf)),
        loop.get("solved_return"),
        loop.get("total_frames"),
        loop.get("frames_stepped"),
        loop.get("episodes_begun"),
    )


def load_checkpoint(path: str | Path, algo_name: str | None = None, which: str = "latest") -> dict:
    """The checkpoint at ``path`` (a file, or a run directory: its ``which`` checkpoint);
    ``algo_name``: refuse another algorithm's."""
    path = Path(path)
    if path.is_dir():
        path = checkpoint_path(path, which)
    if not path.exists():
        hint = (
            " (best.pt is written at a run's first evaluation; use the latest checkpoint)"
            if path.name == "best.pt"
            else ""
        )
        raise CheckpointError(f"no checkpoint at {path}{hint}")
    try:
        payload = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as err:  # truncated, corrupt, or holding objects weights_only refuses
        raise CheckpointError(
            f"{path} cannot be read as a checkpoint ({type(err).__name__}: {str(err)[:200]}); "
            "it is truncated, corrupt or not a trajrl checkpoint"
        ) from None
    if not isinstance(payload, dict) or payload.get("format") != FORMAT:
        found = payload.get("format") if isinstance(payload, dict) else type(payload).__name__
        raise CheckpointError(f"{path} is not a trajrl checkpoint (format {found!r}, expected {FORMAT!r})")
    if algo_name is not None and payload["algo_name"] != algo_name:
        raise CheckpointError(f"{path} holds an algo={payload['algo_name']} learner, not algo={algo_name}")
    return payload
