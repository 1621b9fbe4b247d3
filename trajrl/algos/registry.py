"""The algorithms trajrl trains: each one package (``trajrl.algos.<name>``) that registers itself here
with an ``AlgoSpec``, which says all the rest of trajrl asks of it: its settings, how it is built, the
loop it runs, the actions it takes and the values it brings to other groups' settings.

The configuration (choices of ``algo=``, ``--help``, the checks), the factory, the loop's choice
and export read this registry and never an algorithm's name. An algorithm from outside registers
the same way from a module of its own (``env.import_module=<module>`` on the command line imports
it before anything is composed): ``docs/development.md``, "A new algorithm". Nothing here imports torch.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from trajrl.base.kinds import DISCRETE


@dataclass(frozen=True)
class AlgoSpec:
    """An algorithm, as trajrl uses it.

    ``settings``: the dataclass of ``algo.*`` (``name: str = option("<name>", checkpointed=True)`` first, each
    other field a ``trajrl.base.declare.setting``). ``build(needs)``: its networks, policies and learner,
    an ``trajrl.algos.agent.Agent``, from what the run gives (``trajrl.algos.agent.AgentNeeds``); it is
    called when a run is built, so its module may import torch where this one does not.
    ``on_policy``: it learns from each batch of complete episodes once, as the collector hands them over
    (no replay buffer; the episodic loop); else off-policy from a replay buffer (the off-policy loop).
    ``actions``: the kinds of actions it acts with; ``why_not``: a reason, for a kind it does not take, that
    the refusal gives; ``bounded``: its continuous actions need finite bounds.
    ``brings``: the value a run gets for another group's setting where it picks this algorithm
    (``{"loop.warmup_frames": 1_000}``; the command line and a preset still set them); ``picks``: the
    option of another group it picks (``{"storage": "none"}``). ``slices_per_batch``: what
    ``sampler.slices_per_batch=auto`` stands for with it. ``check(settings, spaces)``: a rule between its
    settings and the environment's spaces (``trajrl.envs.gym_envs.EnvSpaces``), raising
    ``trajrl.base.errors.ConfigError``. ``acts(spaces)``: what it makes of those actions, in words
    (``trajrl check-env`` prints it)."""

    name: str
    settings: type
    build: Callable[[Any], Any]
    on_policy: bool = False
    actions: tuple[str, ...] = (DISCRETE,)
    why_not: dict[str, str] = field(default_factory=dict)
    bounded: bool = False
    brings: dict[str, Any] = field(default_factory=dict)
    picks: dict[str, str] = field(default_factory=dict)
    slices_per_batch: int = 16
    check: Callable[[Any, Any], None] | None = None
    acts: Callable[[Any], str] | None = None


#: Every registered algorithm's settings dataclass by name: ``algo=<name>``'s choices.
ALGOS: dict[str, type] = {}
#: Every registered algorithm by name.
SPECS: dict[str, AlgoSpec] = {}


def register_algo(spec: AlgoSpec) -> None:
    """Add the algorithm ``algo=<spec.name>``: its settings become the ``algo`` group's option of that name
    (in Hydra's ConfigStore, with what it brings and picks). Registering the same spec again does nothing;
    another under a taken name is an error."""
    if SPECS.get(spec.name) == spec:
        return
    if spec.name in SPECS:
        raise ValueError(f"algo={spec.name} is registered already ({SPECS[spec.name].settings.__name__})")
    from trajrl.base.declare import option_name

    if option_name(spec.settings) != spec.name:
        raise ValueError(f"{spec.settings.__name__}'s first field must be name: str = option({spec.name!r})")
    SPECS[spec.name], ALGOS[spec.name] = spec, spec.settings
    store_option(spec)


def store_option(spec: AlgoSpec) -> None:
    """``algo=<name>`` in Hydra's ConfigStore, at the top level (``@package _global_``): its settings under
    ``algo``, the values it brings and the options it picks."""
    from hydra.core.config_store import ConfigStore
    from omegaconf import OmegaConf

    store = ConfigStore.instance()
    brought = OmegaConf.create()
    for key, value in spec.brings.items():
        OmegaConf.update(brought, key, value, force_add=True)
    store.store(name=f"trajrl_brought_algo_{spec.name}", node=brought)
    store.store(name=f"trajrl_algo_{spec.settings.__name__}", node=spec.settings)
    defaults: list[Any] = [f"/trajrl_algo_{spec.settings.__name__}@algo", f"/trajrl_brought_algo_{spec.name}"]
    defaults += [{f"override /{group}": option} for group, option in spec.picks.items()]
    store.store(group="algo", name=spec.name, node={"defaults": [*defaults, "_self_"]}, package="_global_")


def algo_spec(name: str) -> AlgoSpec:
    """The registered algorithm ``name`` (a checked config's ``algo.name``)."""
    return SPECS[name]


def learns_on_policy(name: str) -> bool:
    """Whether ``algo=<name>`` learns from each batch of complete episodes (no replay buffer)."""
    return SPECS[name].on_policy


def takes_actions(kind: str) -> list[str]:
    """The registered algorithms that act with actions of ``kind``."""
    return [name for name, spec in SPECS.items() if kind in spec.actions]
