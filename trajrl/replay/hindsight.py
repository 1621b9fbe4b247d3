"""Hindsight Experience Replay (Andrychowicz et al., 2017) on stored complete episodes,
for recurrent learners: a sampled slice (or whole episode) is given, at every one of its
steps, a goal its own episode achieved, and each step's reward is recomputed for it.

A goal environment (gymnasium's convention) observes a ``Dict`` of ``observation``,
``achieved_goal`` and ``desired_goal``, which trajrl flattens into one ``observation``
(``trajrl.envs.spaces.GoalLayout`` says where each goal lies in it), and gives
``compute_reward(achieved_goal, desired_goal, info)`` for batches of goals.

Two halves, in the order data flows:

- ``HindsightGoals.draw``, called by the slice and episode samplers inside their
  ``sample`` (under the buffer's locks, from the episode index they already keep: no
  rescan of the storage): which slices are relabelled (``her_ratio`` of them), and
  with what goal: the goal achieved after a step drawn from the slice's episode, at or
  after the slice's last step (``future``), at the episode's last step (``final``), or
  anywhere in it (``episode``). It returns, per sampled step, the goal and a flag.
- ``HindsightGoals.relabel``, on the ``[N, T]`` batch: the goal written into the
  desired-goal stretch of ``observation`` and ``("next", "observation")`` at every step
  of a relabelled row (at its episode's first step only, for an environment that shows
  its goal only there), ``("next", "reward")`` recomputed from the achieved goal after
  each step, and the row's stored recurrent state replaced: the state the acting
  policy stored was computed from observations that showed the old goal, so it is not
  the state a policy pursuing the new goal would have had. With ``her_state=recompute``
  the row starts from the state the learner's online network has over its episode's
  earlier steps with the new goal shown (drawn with the sample, ``_initial_states``);
  with ``her_state=zero`` from a zero state, warmed over the slice's burn-in steps
  (``sampler.burn_in``). Episodes end where they ended: relabelling changes rewards,
  never ``done`` (goal environments end episodes by a time limit).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch
from tensordict import TensorDictBase
from torchrl.data.replay_buffers.storages import Storage

from trajrl.base.keys import GOAL_KEY, RELABELLED_KEY, STATE_KEY
from trajrl.base.kinds import HER_STRATEGIES
from trajrl.envs.spaces import GoalLayout
from trajrl.replay.episodes import run_steps


class HindsightGoals:
    """Draws substituted goals for sampled slices, and relabels the batch with them."""

    def __init__(
        self,
        layout: GoalLayout,
        ratio: float,
        strategy: str,
        compute_reward: Callable[[np.ndarray, np.ndarray, dict], np.ndarray],
        state_keys: list[str] = (),
        first_step_only: bool = False,
        prefix_states: Callable[..., tuple[torch.Tensor, ...]] | None = None,
    ):
        """``prefix_states``: recomputes a relabelled slice's initial state under its new
        goal (``trajrl.algos.networks.PrefixStates`` of the learner's online network;
        None: a zero state)."""
        if strategy not in HER_STRATEGIES:
            raise ValueError(f"her_strategy={strategy!r}: use one of {', '.join(HER_STRATEGIES)}")
        self.layout, self.ratio, self.strategy = layout, ratio, strategy
        self.compute_reward, self.state_keys, self.first_step_only = compute_reward, list(state_keys), first_step_only
        self.prefix_states = prefix_states

    def __getstate__(self) -> dict:
        return {**self.__dict__, "prefix_states": None}  # worker processes write, never sample: not the network

    # ------------------------------------------------------------ in the sampler, under the buffer's locks
    def draw(
        self,
        storage: Storage,
        run_start: torch.Tensor,
        run_len: torch.Tensor,
        first: torch.Tensor,
        length: torch.Tensor,
        rng: torch.Generator | None = None,
    ) -> dict:
        """For slices of ``length`` steps starting ``first`` steps into episodes stored at
        ``run_start`` (``run_len`` steps, positions modulo the storage's length): each
        sampled step's goal and flag (``GOAL_KEY``, ``RELABELLED_KEY``). Nothing (and no
        random number drawn) when ``ratio`` is 0."""
        if self.ratio == 0:
            return {}
        n = run_start.numel()
        relabel = torch.rand(n, generator=rng) < self.ratio
        low = {"future": first + length - 1, "final": run_len - 1, "episode": torch.zeros_like(run_len)}[self.strategy]
        step = low + (torch.rand(n, generator=rng) * (run_len - low)).long().clamp_max(run_len - low - 1)
        position = (run_start + step) % len(storage)
        goal = storage[position].get(("next", "observation"))[..., self.layout.achieved]
        info = {
            GOAL_KEY: torch.repeat_interleave(goal, length, 0),
            RELABELLED_KEY: torch.repeat_interleave(relabel, length).unsqueeze(-1),
        }
        if self.prefix_states is not None:
            states = self._initial_states(storage, run_start, first, relabel, goal)
            info.update(
                {
                    STATE_KEY + (key,): torch.repeat_interleave(state, length, 0)
                    for key, state in zip(self.state_keys, states)
                }
            )
        return info

    def _initial_states(
        self, storage: Storage, run_start: torch.Tensor, first: torch.Tensor, relabel: torch.Tensor, goal: torch.Tensor
    ) -> tuple[torch.Tensor, ...]:
        """Each slice's initial state under its new goal: the network run from a zero state
        over its episode's stored steps before it, the goal shown as the slice will show
        it (zero for a slice that starts its stored episode, or is not relabelled)."""
        todo = (relabel & (first > 0)).nonzero().squeeze(-1)
        todo = todo[first[todo].argsort(descending=True)]  # longest prefix first (states_along)
        lengths = first[todo] + 1  # the prefix and the slice's first step: the state before it
        run, offset, position = run_steps(run_start[todo], lengths, len(storage))
        steps = storage[position]
        obs = steps.get("observation").clone()
        shown = (
            (steps.get("step_count").reshape(-1) == 0)
            if self.first_step_only
            else torch.ones_like(run, dtype=torch.bool)
        )
        obs[..., self.layout.desired] = torch.where(
            shown.unsqueeze(-1), goal[todo][run].to(obs.dtype), obs[..., self.layout.desired]
        )
        before = self.prefix_states(obs, run, offset, lengths)  # each [steps, layers, H]
        last = torch.cumsum(lengths, 0) - 1  # each run's last step: the slice's first
        states = []
        for state in before:
            out = state.new_zeros(first.numel(), *state.shape[1:])
            out[todo] = state[last]
            states.append(out)
        return tuple(states)

    # ------------------------------------------------------------ on the [N, T] batch
    def relabel(self, batch: TensorDictBase) -> TensorDictBase:
        """``batch`` with its flagged rows relabelled (see the module's docstring)."""
        if RELABELLED_KEY not in batch.keys(include_nested=True):
            return batch
        rows = batch.get(RELABELLED_KEY).reshape(batch.shape)[:, 0]  # one flag per row
        if not bool(rows.any()):
            return batch
        goal = batch.get(GOAL_KEY)
        desired = self.layout.desired
        shown = rows.unsqueeze(-1).expand(batch.shape)
        if self.first_step_only:
            shown = shown & (batch.get("step_count").reshape(batch.shape) == 0)
            shown_next = torch.zeros_like(shown)  # the step after is never an episode's first
        else:
            shown_next = shown
        for key, where in (("observation", shown), (("next", "observation"), shown_next)):
            obs = batch.get(key).clone()
            obs[..., desired] = torch.where(where.unsqueeze(-1), goal.to(obs.dtype), obs[..., desired])
            batch.set(key, obs)
        achieved = batch.get(("next", "observation"))[rows][..., self.layout.achieved]  # [n, T, g]
        reward = batch.get(("next", "reward")).clone()
        recomputed = self.compute_reward(
            achieved.reshape(-1, achieved.shape[-1]).numpy(), goal[rows].reshape(-1, goal.shape[-1]).numpy(), {}
        )
        reward[rows] = torch.as_tensor(np.asarray(recomputed), dtype=reward.dtype).reshape(reward[rows].shape)
        batch.set(("next", "reward"), reward)
        for key in self.state_keys:  # computed under the old goal: recomputed under the new one, or zero
            state = batch.get(key).clone()
            state[rows] = batch.get(STATE_KEY + (key,))[rows] if self.prefix_states is not None else 0
            batch.set(key, state)
        return batch
