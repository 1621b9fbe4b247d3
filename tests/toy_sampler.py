"""A sampler added from outside trajrl, as a user would (docs/development.md, "A sampler"):
importing this module registers ``sampler=torchrl_slices``, TorchRL's own ``SliceSampler`` (every
stored episode equally likely to give a slice). From the CLI: ``env.import_module=toy_sampler``."""

from dataclasses import dataclass
from typing import ClassVar

from torchrl.data.replay_buffers.samplers import SliceSampler

from trajrl.base.keys import TRAJ_KEY
from trajrl.configuration.settings import at_least, option, setting
from trajrl.factory.replay import register_sampler


@dataclass
class TorchRLSlicesSettings:
    batches: ClassVar[str] = "slices"
    kind: str = option("torchrl_slices")
    slices_per_batch: int = setting(8, "slices in each [N, T] batch", range=at_least(1))
    slice_len: int = setting(20, "steps of each slice (shorter episodes come back whole, padded)", range=at_least(1))
    burn_in: int = setting(5, "first steps of a slice that only warm the recurrent state", range=at_least(0))


def torchrl_slices(settings: TorchRLSlicesSettings, capacity: int) -> tuple[SliceSampler, int]:
    sampler = SliceSampler(slice_len=settings.slice_len, traj_key=TRAJ_KEY, strict_length=False)
    return sampler, settings.slices_per_batch * settings.slice_len


register_sampler(TorchRLSlicesSettings, torchrl_slices)
