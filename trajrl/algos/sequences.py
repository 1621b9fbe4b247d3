"""What every sequence learner reads from a ``[B, T]`` batch with ``("collector", "mask")``: rows of
slices or whole episodes, or one tape of whole episodes laid end to end (``trajrl.replay.tapes``)."""

from __future__ import annotations

import torch
from tensordict import TensorDictBase
from torch import nn

from trajrl.base.keys import CLOSING_KEY, MASK_KEY


def observations_with_next(batch: TensorDictBase) -> torch.Tensor:
    """``[B, T + 1, obs]``: each row's observations, then the next observation of its
    last valid step (so one recurrent pass gives values at t and t + 1)."""
    mask = batch.get(MASK_KEY)
    rows, lengths = torch.arange(mask.shape[0], device=mask.device), mask.sum(-1)
    obs, next_obs = batch.get("observation"), batch.get(("next", "observation"))
    sequence = torch.cat([obs, next_obs[:, -1:]], 1)
    sequence[rows, lengths] = next_obs[rows, lengths - 1]
    return sequence


def is_tape(batch: TensorDictBase) -> bool:
    """Whether ``batch`` is one tape of whole episodes laid end to end, which marks itself: its
    closing cells (``trajrl.replay.tapes``), rather than rows of slices or episodes. No learner
    needs to know which sampler made a batch."""
    return batch.get(CLOSING_KEY, None) is not None


def sequence_of(batch: TensorDictBase) -> tuple[torch.Tensor, torch.Tensor | None]:
    """``(observations [B, T + 1, obs], starts)``: what a core runs over, one observation past
    each valid step. Rows of slices: ``observations_with_next``, no starts (a row begins from its
    state). A tape (``is_tape``): its own observations (each episode's closing cell holds the observation
    after its last step; ``trajrl.replay.tapes``) and one cell more, with ``is_init`` flagging
    each episode's first step, where a linear core restarts."""
    if not is_tape(batch):
        return observations_with_next(batch), None
    obs = batch.get("observation")
    starts = batch.get("is_init").reshape(obs.shape[:2])
    return torch.cat([obs, obs[:, -1:]], 1), nn.functional.pad(starts, (0, 1))


def stored_state(batch: TensorDictBase, keys: list[str], zero: bool = False) -> tuple[torch.Tensor, ...]:
    """The recurrent state the acting policy stored at each row's first step, as
    ``[layers, B, H]`` tensors (zeros of that shape when ``zero``)."""
    states = [batch.get(key)[:, 0].transpose(0, 1).contiguous() for key in keys]
    return tuple(torch.zeros_like(s) for s in states) if zero else tuple(states)


def without_padding_columns(batch: TensorDictBase) -> TensorDictBase:
    """``batch[:, :T']`` where ``T'`` is the longest row: columns that are padding in
    every row change no result (padding follows the valid steps), only the cost. A tape as it is
    (its masked cells are its episodes' closing cells)."""
    if is_tape(batch):
        return batch
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


def steps_left(mask: torch.Tensor) -> torch.Tensor:
    """Per ``[B, T]`` cell: the valid cells from it up to the next invalid one (0 on an invalid
    cell). A row of slices holds one episode's steps then padding; a tape (``trajrl.replay.tapes``)
    closes every episode with an invalid cell: either way, the steps left in the cell's episode."""
    horizon = mask.shape[-1]
    steps = torch.arange(horizon, device=mask.device).expand_as(mask)
    invalid_at = torch.where(mask, horizon, steps)
    next_invalid = invalid_at.flip(-1).cummin(-1).values.flip(-1)
    return next_invalid - steps


def n_step_return(
    reward: torch.Tensor, terminated: torch.Tensor, bootstrap: torch.Tensor, mask: torch.Tensor, gamma: float, n: int
) -> torch.Tensor:
    """Per ``[B, T]`` step ``t``: ``sum_{k<m} gamma^k r[t+k] + gamma^m (1 - terminated[t+m-1]) bootstrap[t+m-1]``
    with ``m = min(n, steps left in its episode)`` (``steps_left``: never past the episode's last
    step); ``bootstrap[t]`` is the value of the observation after step ``t``."""
    horizon = reward.shape[-1]
    steps = torch.arange(horizon, device=reward.device).unsqueeze(0)
    m = steps_left(mask).clamp(1, n)  # valid steps from t to its episode's end, at most n
    padded = nn.functional.pad(reward, (0, n))
    ret = torch.zeros_like(reward)
    for k in range(n):
        ret += (gamma**k) * padded[:, k : k + horizon] * (k < m)
    last = (steps + m - 1).clamp_max(horizon - 1)
    return ret + (gamma**m) * (1.0 - terminated.gather(-1, last)) * bootstrap.gather(-1, last)
