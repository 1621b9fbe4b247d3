"""Padded ``[N, T]`` episode batches into a flat replay buffer: ``rb.extend(padded)`` just works.

A collector with ``trajs_per_batch`` and ``traj_format="padded"`` (or
``split_trajectories``) yields episodes zero-padded along time with
``("collector", "mask")``. Stored as they are, the padding would be sampled as
steps. ``PaddedToFlat`` is a replay-buffer transform whose inverse (run on every
write) keeps exactly the valid steps, row after row, so each episode is stored
contiguous; flat (1-D) writes pass through untouched.
"""

from __future__ import annotations

import torch
from tensordict import TensorDictBase
from torchrl.envs.transforms import Transform

from trajrl.errors import MalformedMask
from trajrl.keys import MASK_KEY


def check_mask(batch: TensorDictBase) -> torch.Tensor:
    """The boolean ``[N, T]`` mask of a padded batch, or ``MalformedMask`` saying what is wrong."""
    mask = batch.get(MASK_KEY, None)
    if mask is None:
        raise MalformedMask(
            f"a [N, T] batch of shape {tuple(batch.shape)} without ('collector', 'mask') cannot be told apart "
            "from padding: write flat episodes, add the mask, or use storage.ndim=2 for fixed-frame batches"
        )
    if mask.shape != batch.shape:
        raise MalformedMask(f"('collector', 'mask') has shape {tuple(mask.shape)}, the batch {tuple(batch.shape)}")
    mask = mask.bool()
    empty = (~mask.any(-1)).nonzero().reshape(-1)
    if empty.numel():
        raise MalformedMask(f"rows {empty.tolist()[:10]} of the mask have no valid step (an empty episode)")
    not_prefix = (mask[:, 1:] & ~mask[:, :-1]).any(-1).nonzero().reshape(-1)
    if not_prefix.numel():
        raise MalformedMask(
            f"rows {not_prefix.tolist()[:10]} of the mask are not a prefix of valid steps followed by padding"
        )
    return mask


class PaddedToFlat(Transform):
    """On write: ``[N, T]`` + mask -> the valid steps, flat, each episode contiguous
    (the buffer's ``EpisodeWriter`` then gives each episode a fresh id)."""

    def _inv_call(self, tensordict: TensorDictBase) -> TensorDictBase:
        if tensordict.batch_dims < 2:
            return tensordict
        if tensordict.batch_dims > 2:
            raise MalformedMask(f"expected flat [T] or padded [N, T] episodes, got shape {tuple(tensordict.shape)}")
        return tensordict[check_mask(tensordict)]
