"""Observation and action spaces: every gymnasium observation reaches the networks as one
flat vector (gymnasium's own ``flatten``: ``Box`` flattened, ``Discrete``/``MultiDiscrete``
one-hot, ``MultiBinary`` as bits, ``Dict``/``Tuple`` joined part after part), and
``parts_of`` says what each stretch of that vector is, so that the encoder can standardise
the numbers, leave one-hot codes and bits alone, and run images through a convolution.

One flat ``observation`` keeps the rest of the pipeline (collectors, storage, slices,
the recurrent state) unchanged for every space; a ``uint8`` image alone stays ``uint8``
in the buffer (four times smaller than floats).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import gymnasium as gym
import numpy as np

from trajrl.base.kinds import CONTINUOUS, DISCRETE, MULTI_BINARY, MULTI_DISCRETE

#: What each kind of part is, as the encoder treats it.
NUMBERS, CODES, IMAGE = "numbers", "codes", "image"


@dataclass(frozen=True)
class Part:
    """A stretch ``[start, start + size)`` of the flat observation."""

    kind: str  # NUMBERS (standardised), CODES (one-hot or bits: as they are), IMAGE
    start: int
    size: int
    image_shape: tuple[int, ...] = ()  # (channels, height, width) of an IMAGE part
    channels_last: bool = True  # an IMAGE part stored height x width x channels


def is_image(space: gym.Space) -> bool:
    """A 3-D ``uint8`` Box with its channels (1, 3 or 4) first or last."""
    return (
        isinstance(space, gym.spaces.Box)
        and space.dtype == np.uint8
        and len(space.shape) == 3
        and (space.shape[-1] in (1, 3, 4) or space.shape[0] in (1, 3, 4))
    )


def parts_of(space: gym.Space, start: int = 0) -> tuple[Part, ...]:
    """The parts of ``space``'s flat form, in the order gymnasium's ``flatten`` joins them;
    ``ValueError`` naming a space that has no fixed-size flat form."""
    if isinstance(space, gym.spaces.Dict):
        return _joined(space.spaces.values(), start)
    if isinstance(space, gym.spaces.Tuple):
        return _joined(space.spaces, start)
    if isinstance(space, (gym.spaces.Discrete, gym.spaces.MultiDiscrete, gym.spaces.MultiBinary)):
        return (Part(CODES, start, gym.spaces.flatdim(space)),)
    if is_image(space):
        last = space.shape[-1] in (1, 3, 4)
        h, w, c = space.shape if last else (space.shape[1], space.shape[2], space.shape[0])
        return (Part(IMAGE, start, int(np.prod(space.shape)), (c, h, w), last),)
    if isinstance(space, gym.spaces.Box):
        return (Part(NUMBERS, start, int(np.prod(space.shape))),)
    raise ValueError(
        f"{space} has no fixed-size flat form (trajrl takes Box, Discrete, MultiDiscrete, "
        "MultiBinary, and Dict or Tuple of these)"
    )


def _joined(spaces, start: int) -> tuple[Part, ...]:
    parts: list[Part] = []
    for space in spaces:
        parts += parts_of(space, start)
        start = parts[-1].start + parts[-1].size
    return tuple(parts)


#: The keys of a goal environment's ``Dict`` observation (gymnasium's goal convention).
GOAL_KEYS = ("observation", "achieved_goal", "desired_goal")


@dataclass(frozen=True)
class GoalLayout:
    """Where a goal environment's achieved and desired goals lie in its flat observation."""

    achieved: slice
    desired: slice


def goal_layout(space: gym.Space) -> GoalLayout | None:
    """The goals' stretches of ``space``'s flat form (gymnasium's ``flatten`` joins a ``Dict``'s
    parts in its key order); None unless it is a ``Dict`` with every key of ``GOAL_KEYS``."""
    if not isinstance(space, gym.spaces.Dict) or not set(GOAL_KEYS) <= set(space.spaces):
        return None
    stretches, start = {}, 0
    for key, part in space.spaces.items():
        size = gym.spaces.flatdim(part)
        stretches[key], start = slice(start, start + size), start + size
    return GoalLayout(stretches["achieved_goal"], stretches["desired_goal"])


def is_flat(space: gym.Space) -> bool:
    """Already one flat float vector: reaches the networks as it is."""
    return isinstance(space, gym.spaces.Box) and len(space.shape) == 1 and space.dtype == np.float32


def flat_observations(env: gym.Env) -> gym.Env:
    """``env`` observing one flat vector: ``float32``, or ``uint8`` when it is one image."""
    space = env.observation_space
    if is_flat(space):
        return env
    parts_of(space)  # refuses a space with no flat form
    if not isinstance(space, gym.spaces.Box) or len(space.shape) != 1:
        env = gym.wrappers.FlattenObservation(env)
    keep = np.uint8 if is_image(space) else np.float32
    if env.observation_space.dtype != keep:
        with warnings.catch_warnings():  # float64 bounds cast to float32: what is asked for
            warnings.simplefilter("ignore", UserWarning)
            env = gym.wrappers.DtypeObservation(env, keep)
    return env


def action_kind(space: gym.Space) -> str | None:
    """DISCRETE (``Discrete``), CONTINUOUS (a 1-D ``Box`` of floats), MULTI_DISCRETE (a 1-D
    ``MultiDiscrete``), MULTI_BINARY (a 1-D ``MultiBinary``), or None (any other space)."""
    if isinstance(space, gym.spaces.Discrete):
        return DISCRETE
    if isinstance(space, gym.spaces.Box) and len(space.shape) == 1 and np.issubdtype(space.dtype, np.floating):
        return CONTINUOUS
    if isinstance(space, gym.spaces.MultiDiscrete) and len(space.shape) == 1:
        return MULTI_DISCRETE
    if isinstance(space, gym.spaces.MultiBinary) and len(space.shape) == 1:
        return MULTI_BINARY
    return None


def action_size(space: gym.Space) -> int:
    """What a policy's head gives for ``space``: the number of ``Discrete`` actions, the size of
    a continuous or ``MultiBinary`` action, the categories of a ``MultiDiscrete`` one altogether."""
    if isinstance(space, gym.spaces.Discrete):
        return int(space.n)
    if isinstance(space, gym.spaces.MultiDiscrete):
        return int(space.nvec.sum())
    return int(space.shape[0])


def action_parts(space: gym.Space) -> tuple[int, ...]:
    """The categories of each part of a ``MultiDiscrete`` action (empty for any other space)."""
    return tuple(int(n) for n in space.nvec) if isinstance(space, gym.spaces.MultiDiscrete) else ()
