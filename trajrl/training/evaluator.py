"""Deterministic evaluation over a vector of environments (one policy call per step for all),
and a loop's record of its evaluations (``Evaluations``)."""

from __future__ import annotations

import contextlib
import logging
import math
import time
from collections.abc import Callable

import torch
from torchrl.envs import EnvBase
from torchrl.envs.utils import ExplorationType, set_exploration_type

from trajrl.algos.networks import CpuCopies
from trajrl.envs.gym_envs import stepping

log = logging.getLogger("trajrl")


class Evaluator:
    """Runs ``episodes`` environments side by side with the greedy policy; returns mean return
    (and, where the environment reports ``is_success``, the share that ended at their goal).

    ``make_env(num_envs=n)``: the environment as a vector of ``n`` (``env_factory(...,
    stepping="lean")``: one gymnasium step and one policy call a step for all of them).
    Environment ``i`` is seeded ``seed * episodes + i``: another seed, other episodes. The
    vector is built at the first evaluation, where its environments' failures are reported
    as evaluation's (TorchRL steps a vector once as it wraps it)."""

    def __init__(
        self,
        make_env: Callable[..., EnvBase],
        policy,
        episodes: int,
        seed: int,
        max_steps: int,
        env_id: str,
        step_timeout_s: float | None = None,
        same_episodes: bool = False,
    ):
        """``same_episodes``: every evaluation plays the same episodes (its environments seeded
        anew each time; ``deterministic=true``, whose resumed run evaluates as the uninterrupted one)."""
        self.make_env, self.seed, self.same_episodes = make_env, seed, same_episodes
        self.env: EnvBase | None = None
        self.env_id, self.step_timeout_s = env_id, step_timeout_s
        self.policy = policy
        self.episodes = episodes
        self.max_steps = max_steps

    def built(self) -> EnvBase:
        """The vector of environments, seeded (built by the first call)."""
        if self.env is None:
            self.env = self.make_env(num_envs=self.episodes)
            self.env.set_seed(self.seed * self.episodes)  # a vector seeds its environments seed, seed + 1, ...
        return self.env

    @torch.no_grad()
    def __call__(self) -> dict[str, float]:
        returns = torch.zeros(self.episodes)
        success = torch.zeros(self.episodes)  # at each episode's last step (goal environments say)
        lengths = torch.zeros(self.episodes, dtype=torch.long)
        finished = torch.zeros(self.episodes, dtype=torch.bool)
        with set_exploration_type(ExplorationType.DETERMINISTIC):
            with stepping(self.env_id, "trajrl evaluated the policy", self.step_timeout_s):
                fresh = self.env is None
                env = self.built()
                if self.same_episodes and not fresh:
                    env.set_seed(self.seed * self.episodes)
                td = env.reset()
            for _ in range(self.max_steps):
                td = self.policy(td)
                with stepping(
                    self.env_id, "trajrl evaluated the policy", self.step_timeout_s
                ):  # not the policy's errors
                    td, next_td = env.step_and_maybe_reset(td)
                running = ~finished
                returns += td.get(("next", "reward")).reshape(-1) * running
                lengths += running.long()
                done = td.get(("next", "done")).reshape(-1)
                if ("next", "is_success") in td.keys(True):
                    success = torch.where(running & done, td.get(("next", "is_success")).reshape(-1).float(), success)
                finished |= done
                if finished.all():
                    break
                td = next_td
        return {
            "return": returns.mean().item(),
            "return_std": returns.std().item() if self.episodes > 1 else 0.0,
            "length": lengths.float().mean().item(),
            "unfinished": int((~finished).sum()),
            **(
                {"success": success.mean().item()} if "is_success" in env.full_observation_spec.keys(True, True) else {}
            ),
        }

    def close(self) -> None:
        if self.env is not None and not self.env.is_closed:
            self.env.close()


class Evaluations:
    """A loop's evaluations: ``run()`` makes one with ``evaluate()`` (an ``Evaluator``, say),
    the learner's weights pulled into its networks (``evaluated``) first, and keeps the best
    mean return so far (``improved``: the last one was a new best), the first evaluation that
    reached ``stop_at_return`` (``solved``) and the time spent evaluating (``seconds``)."""

    def __init__(
        self,
        evaluate: Callable[[], dict] | None,
        evaluated: CpuCopies | None = None,
        stop_at_return: float | None = None,
        best: float = -math.inf,
    ):
        self.evaluate, self.evaluated, self.stop_at_return = evaluate, evaluated, stop_at_return
        self.best = best
        self.improved = False
        self.solved: dict[str, float] | None = None  # its results, with the frames it was made at
        self.seconds = 0.0

    def saved(self) -> tuple[float, float | None]:
        """``(best return, the return that solved the run or None)``, as a checkpoint keeps them."""
        return self.best, self.solved["eval/return"] if self.solved is not None else None

    def run(self, frames: int, pause: contextlib.AbstractContextManager | None = None, closing: bool = False) -> dict:
        """One evaluation at ``frames`` (``eval/...``; empty without ``evaluate``), inside
        ``pause`` (collection waits meanwhile: it would compete for the cores). The
        ``closing`` one, made once training is over, solves nothing."""
        if self.evaluate is None:
            return {}
        t0 = time.monotonic()
        if self.evaluated is not None:
            self.evaluated.pull()  # the learner's weights as they are now
        with pause if pause is not None else contextlib.nullcontext(), torch.random.fork_rng(devices=[]):
            stats = {f"eval/{k}": v for k, v in self.evaluate().items()}  # training's random numbers untouched
        self.seconds += time.monotonic() - t0
        if not math.isfinite(stats["eval/return"]):  # a reward that is not finite: reported, never the best
            log.warning(
                "the evaluation at %d frames returned %s: an episode's reward was not finite; it is not kept "
                "as the best agent (metrics.csv: eval/return_not_finite=1)",
                frames,
                stats["eval/return"],
            )
            stats["eval/return_not_finite"] = 1.0
        self.improved = stats["eval/return"] > self.best
        self.best = max(self.best, stats["eval/return"])
        stop_at = self.stop_at_return
        if not closing and stop_at is not None and stats["eval/return"] >= stop_at and self.solved is None:
            self.solved = {**stats, "run/solved_at_frames": float(frames)}
        return stats
