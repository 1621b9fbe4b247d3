"""What every sequence learner reads from a ``[B, T]`` batch with ``("collector", "mask")``."""

from __future__ import annotations

import torch
from tensordict import TensorDictBase
from torch import nn

from trajrl.keys import MASK_KEY


def observations_with_next(batch: TensorDictBase) -> torch.Tensor:
    """``[B, T + 1, obs]``: each row's observations, then the next observation of its
    last valid step (so one recurrent pass gives values at t and t + 1)."""
    mask = batch.get(MASK_KEY)
    rows, lengths = torch.arange(mask.shape[0], device=mask.device), mask.sum(-1)
    obs, next_obs = batch.get("observation"), batch.get(("next", "observation"))
    sequence = torch.cat([obs, next_obs[:, -1:]], 1)
    sequence[rows, lengths] = next_obs[rows, lengths - 1]
    return sequence


def stored_state(batch: TensorDictBase, keys: list[str], zero: bool = False) -> tuple[torch.Tensor, ...]:
    """The recurrent state the acting policy stored at each row's first step, as
    ``[layers, B, H]`` tensors (zeros of that shape when ``zero``)."""
    states = [batch.get(key)[:, 0].transpose(0, 1).contiguous() for key in keys]
    return tuple(torch.zeros_like(s) for s in states) if zero else tuple(states)


def without_padding_columns(batch: TensorDictBase) -> TensorDictBase:
    """``batch[:, :T']`` where ``T'`` is the longest row: columns that are padding in
    every row change no result (padding follows the valid steps), only the cost."""
    longest = int(batch.get(MASK_KEY).sum(-1).max())
    return batch if longest == batch.shape[1] else batch[:, :longest]


def learned_steps(batch: TensorDictBase, burn_in: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``(learn, starts_episode)``: the ``[B, T]`` cells a loss learns from (valid, and past
    the first ``burn_in`` steps unless the row starts its episode, where nothing
    precedes to warm the state on), and which rows start their episode."""
    mask = batch.get(MASK_KEY)
    n_seq, horizon = mask.shape
    starts_episode = batch.get("step_count")[:, 0].reshape(n_seq) == 0
    steps = torch.arange(horizon, device=mask.device).expand(n_seq, horizon)
    return mask & ((steps >= burn_in) | starts_episode.unsqueeze(-1)), starts_episode


def n_step_return(
    reward: torch.Tensor, terminated: torch.Tensor, bootstrap: torch.Tensor, lengths: torch.Tensor, gamma: float, n: int
) -> torch.Tensor:
    """Per ``[B, T]`` step ``t``: ``sum_{k<m} gamma^k r[t+k] + gamma^m (1 - terminated[t+m-1]) bootstrap[t+m-1]``
    with ``m = min(n, steps left in its row)``; ``bootstrap[t]`` is the value of the observation
    after step ``t``. A row holds one episode's steps, so only its last valid step can end it."""
    horizon = reward.shape[-1]
    steps = torch.arange(horizon, device=reward.device).unsqueeze(0)
    m = (lengths.unsqueeze(-1) - steps).clamp(1, n)  # valid steps from t to the row's end, at most n
    padded = nn.functional.pad(reward, (0, n))
    ret = torch.zeros_like(reward)
    for k in range(n):
        ret += (gamma**k) * padded[:, k : k + horizon] * (k < m)
    last = (steps + m - 1).clamp_max(horizon - 1)
    return ret + (gamma**m) * (1.0 - terminated.gather(-1, last)) * bootstrap.gather(-1, last)
