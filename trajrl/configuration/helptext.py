"""The groups and settings parts of ``python -m trajrl [group=option ...] --help``: the groups' options,
then the settings of the run those groups compose (name = value | range or choices: description), the
value the run gets (what ``--cfg job`` prints), the range and description from the dataclasses of
``trajrl.configuration.settings``. ``--help`` lists the settings a user sets (declared with ``main=``),
``--help-all`` (``TRAJRL_HELP=all``) every one, its description wrapped at 120 characters; neither lists
a setting the chosen algorithm does not read. ``configs/config.yaml`` asks for them as ``${trajrl_groups:}``
and ``${trajrl_settings:}``, resolvers ``trajrl.configuration.compose`` registers; OmegaConf hands them
the composed config (``_root_``)."""

from __future__ import annotations

import json
import os
import textwrap
from dataclasses import MISSING, Field, fields
from typing import Any

from omegaconf import DictConfig, OmegaConf

from trajrl.algos.registry import learns_on_policy
from trajrl.configuration.settings import (
    CONFIG_DIR,
    GROUPS,
    OFF_POLICY_ONLY,
    RunSettings,
    brought_by,
    option_schema,
)

WIDTH = 120  # no line of --help is longer


def every_setting() -> bool:
    """``--help-all`` (the CLI sets ``TRAJRL_HELP=all``): every setting, not only the main ones."""
    return os.environ.get("TRAJRL_HELP") == "all"


def describe_groups(*, _root_: DictConfig) -> str:
    """Each group of ``configs/config.yaml``'s defaults list and its options (files under ``configs/``
    and options registered in code), wrapped at ``WIDTH``."""
    lines = []
    for group in defaults_groups():
        files = {path.stem for path in (CONFIG_DIR / group).glob("*.yaml")}
        registered = set(GROUPS[group][1]) if group in GROUPS and GROUPS[group][0] else set()
        lines += textwrap.wrap(
            f"{group}: {', '.join(sorted(files | registered))}", WIDTH, subsequent_indent="    ", break_on_hyphens=False
        )
    return "\n".join(lines)


def defaults_groups() -> list[str]:
    """The groups of ``configs/config.yaml``'s defaults list, in its order (later ones set keys of earlier ones)."""
    order = OmegaConf.to_container(OmegaConf.load(CONFIG_DIR / "config.yaml").defaults)
    return [next(iter(entry)) for entry in order if isinstance(entry, dict)]


def describe_settings(*, _root_: DictConfig) -> str:
    """The settings of the composed run ``_root_`` (``--help``: the main ones; ``--help-all``: every
    one): the top level, then each group's chosen option (naming the group's other options)."""
    values = OmegaConf.to_container(_root_, resolve=False)
    sources = set_by(OmegaConf.select(_root_, "hydra.runtime.choices") or {})
    unread = not_read(str(_root_.algo.name))
    lines = ["top level:", *setting_lines("", RunSettings, values, sources, unread=unread)]
    for group, (selector, options) in GROUPS.items():
        schema, section = option_schema(group, _root_[group]), values[group]
        shown = setting_lines(f"{group}.", schema, section, sources, skip=selector, unread=unread)
        if not shown and not selector:
            continue
        if selector:
            others = ", ".join(name for name in options if name != section[selector])
            lines += textwrap.wrap(f"{group} ({selector}={section[selector]}; the others: {others}):", WIDTH)
        else:
            lines.append(f"{group}:")
        lines += shown
    return "\n".join(lines)


def not_read(algo: str) -> tuple[str, ...]:
    """The settings (or prefixes) the algorithm ``algo`` does not read: an on-policy one keeps no replay
    buffer (the off-policy loop's settings, hindsight relabelling)."""
    return (*OFF_POLICY_ONLY, "sampler.her_") if learns_on_policy(algo) else ()


def set_by(choices: dict) -> dict[str, tuple[str, Any]]:
    """``{dotted key: (group=option, value)}`` for every setting a chosen option brings (its
    ``brought`` values) or its file under ``configs/`` sets (``choices``: Hydra's ``runtime.choices``),
    the last in the defaults list (``configs/config.yaml``) winning, as composition does."""
    sources: dict[str, tuple[str, Any]] = {}
    for group in defaults_groups():
        option = choices.get(group)
        if option is None:
            continue
        for key, value in brought_by(group, option).items():
            sources[key] = (f"{group}={option}", value)
        path = CONFIG_DIR / group / f"{option}.yaml"
        if not path.exists():  # an option registered in code (an algorithm, a sampler): its brought values alone
            continue
        text = path.read_text()
        package = "" if "# @package _global_" in text else f"{group}."
        settings = OmegaConf.to_container(OmegaConf.load(path), resolve=False)
        for key, value in flat(settings, package):
            sources[key] = (f"{group}={option}", value)
    return sources


def flat(tree: dict, prefix: str = "") -> list[tuple[str, Any]]:
    """``(dotted key, value)`` of every leaf of ``tree`` (its ``defaults`` list left out)."""
    leaves = []
    for key, value in tree.items():
        if key == "defaults":
            continue
        if isinstance(value, dict) and value:
            leaves += flat(value, f"{prefix}{key}.")
        else:
            leaves.append((f"{prefix}{key}", value))
    return leaves


def setting_lines(
    prefix: str,
    schema: type,
    values: dict,
    sources: dict | None = None,
    skip: str | None = None,
    unread: tuple[str, ...] = (),
) -> list[str]:
    """The lines of each listed setting of ``schema`` (not its groups, nor the field ``skip``, nor
    one ``unread`` names): with its value in ``values`` and, where that is not its declaration's,
    where it comes from (``sources``: ``set_by``); ``--help``: the main ones with their short
    description, one line each; ``--help-all``: every one, its description wrapped at ``WIDTH``."""
    every, lines = every_setting(), []
    for f in fields(schema):
        key = prefix + f.name
        if f.name == skip or f.name in GROUPS or not f.metadata.get("shown", True) or key.startswith(unread):
            continue
        description = f.metadata.get("help") if every else f.metadata.get("main")
        if description is None:
            continue
        line = f"  {key} = {shown(values.get(f.name))}{origin(f, prefix, values, sources or {})}{allowed(f)}: "
        lines += textwrap.wrap(line + description, WIDTH, subsequent_indent="      ", break_on_hyphens=False)
    return lines


def origin(f: Field, prefix: str, values: dict, sources: dict) -> str:
    """`` (algo=rsac; declared 60000)`` where the run's value is not the declaration's: the option
    whose file sets it, or the command line or a preset; "" where it is the declaration's."""
    if f.default is MISSING and f.default_factory is MISSING:
        return ""
    declared = f.default if f.default is not MISSING else f.default_factory()
    value = values.get(f.name)
    if same(value, declared):
        return ""
    source = sources.get(prefix + f.name)
    where = source[0] if source is not None and same(source[1], value) else "the command line"
    return f" ({where}; declared {shown(declared)})"


def same(a: Any, b: Any) -> bool:
    """Equal as settings (a tuple and a list alike, 60 and 60.0 alike)."""
    numbers = all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in (a, b))
    return float(a) == float(b) if numbers else json.dumps(a, default=str) == json.dumps(b, default=str)


def shown(value: Any) -> str:
    """A value as YAML reads it back (null, true, 0.001, [64, 64], {}, ???, ${...})."""
    return value if isinstance(value, str) else json.dumps(value)


def allowed(f: Field) -> str:
    span, choices = f.metadata.get("range"), f.metadata.get("choices")
    if span is not None:
        return f" | {span}"
    return f" | {', '.join(choices)}" if choices else ""
