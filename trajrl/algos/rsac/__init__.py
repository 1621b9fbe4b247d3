"""Recurrent SAC (``algo=rsac``): an LSTM/GRU actor (a squashed Gaussian; categorical for Discrete
actions, SAC-discrete; one categorical per dimension for MultiDiscrete and MultiBinary ones, with the critics
decomposed per dimension) and twin recurrent critics trained on stored slices of episodes, target
critics and a learnt temperature. The default run's agent.

``settings``: its settings; ``networks``: the actor, the critics and the acting policy; ``learner``:
one update on a batch; ``build``: all of them for a run. Registered here, as any algorithm is
(``trajrl.algos.registry``); nothing here imports torch."""

from __future__ import annotations

from typing import Any

from trajrl.algos.registry import AlgoSpec, register_algo
from trajrl.algos.rsac.settings import RSACSettings
from trajrl.base.errors import ConfigError
from trajrl.base.kinds import CONTINUOUS, DISCRETE, MULTI_BINARY, MULTI_DISCRETE


def build(needs: Any) -> Any:
    from trajrl.algos.rsac.build import build_rsac

    return build_rsac(needs)


def check(settings: RSACSettings, spaces: Any, env_id: str) -> None:
    """``algo.target_entropy_fraction`` is for discrete actions (``Discrete``, ``MultiDiscrete``,
    ``MultiBinary``), instead of ``algo.target_entropy``."""
    fraction = settings.target_entropy_fraction
    if fraction is None:
        return
    if spaces.action_kind == CONTINUOUS:
        raise ConfigError(
            "algo.target_entropy_fraction",
            fraction,
            f"sets SAC-discrete's target entropy, and {env_id} has continuous actions: set "
            f"algo.target_entropy (e.g. -{spaces.actions}, minus the action size: the default), "
            "or algo.target_entropy_fraction=null",
        )
    if settings.target_entropy is not None:
        raise ConfigError(
            "algo.target_entropy_fraction",
            fraction,
            f"and algo.target_entropy={settings.target_entropy:g} both set the target entropy: "
            "keep one, the other null",
        )


def factored_categories(spaces: Any) -> tuple[int, ...]:
    """The categories of each dimension of a factored action: a ``MultiDiscrete``'s own, 2 for each bit of a
    ``MultiBinary``; empty for a ``Discrete`` or continuous action."""
    if spaces.action_kind == MULTI_DISCRETE:
        return tuple(spaces.action_parts)
    if spaces.action_kind == MULTI_BINARY:
        return (2,) * spaces.actions
    return ()


def acts(spaces: Any) -> str:
    """The policy and critics it builds for ``spaces``' actions, in words (``trajrl check-env``)."""
    kind, greedy = spaces.action_kind, "in evaluate and export"
    if kind == CONTINUOUS:
        return f"a squashed Gaussian within the action's bounds, its mean {greedy}"
    if kind == DISCRETE:
        return (
            f"SAC-discrete: one categorical over {spaces.actions} actions, critics giving each one's value, "
            f"the most likely action {greedy}"
        )
    categories = factored_categories(spaces)
    each = "2 categories each" if kind == MULTI_BINARY else f"{', '.join(map(str, categories))} categories"
    return (
        f"SAC-discrete per dimension: one categorical for each of the {len(categories)} dimensions ({each}), "
        "critics decomposed per dimension (Q the mean of the dimensions' values), each dimension's most likely "
        f"category {greedy}"
    )


register_algo(
    AlgoSpec(
        name="rsac",
        settings=RSACSettings,
        build=build,
        actions=(DISCRETE, CONTINUOUS, MULTI_DISCRETE, MULTI_BINARY),
        bounded=True,
        # the loop and inputs it learns well with: one update per stored frame from 1,000 frames on, each
        # episode written as soon as it ends, the previous action observed (Ni et al., 2022), the time since
        # the episode began observed where episodes end by a clock, an evaluation every 2,000 frames
        brings={
            "env.previous_action": True,
            "env.observe_time": "auto",
            "loop.warmup_frames": 1_000,
            "loop.updates_per_frame": 1.0,
            "loop.eval_every_frames": 2_000,
            "total_frames": 16_000,
            "trajs_per_batch": 1,
        },
        slices_per_batch=4,
        check=check,
        acts=acts,
    )
)
