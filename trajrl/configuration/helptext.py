"""The settings part of ``python -m trajrl [group=option ...] --help``: every setting of the run
those groups compose, one line each (name = value | range or choices: description), the value
the run gets (what ``--cfg job`` prints), the range and description from the dataclasses of
``trajrl.configuration.settings``. ``configs/config.yaml`` asks for it as ``${trajrl_settings:}``, a resolver
``trajrl.configuration.compose`` registers; OmegaConf hands it the composed config (``_root_``)."""

from __future__ import annotations

import json
from dataclasses import MISSING, Field, fields
from typing import Any

from omegaconf import DictConfig, OmegaConf

from trajrl.configuration.settings import CONFIG_DIR, GROUPS, RunSettings, brought_by, option_schema


def describe_settings(*, _root_: DictConfig) -> str:
    """Every setting of the composed run ``_root_``, one line each: the top level, then each
    group's chosen option (naming the group's other options)."""
    values = OmegaConf.to_container(_root_, resolve=False)
    sources = set_by(OmegaConf.select(_root_, "hydra.runtime.choices") or {})
    lines = ["top level:", *setting_lines("", RunSettings, values, sources)]
    for group, (selector, options) in GROUPS.items():
        schema, section = option_schema(group, _root_[group]), values[group]
        if selector:
            others = ", ".join(name for name in options if name != section[selector])
            lines.append(f"{group} ({selector}={section[selector]}; the others: {others}):")
        else:
            lines.append(f"{group}:")
        lines += setting_lines(f"{group}.", schema, section, sources, skip=selector)
    return "\n".join(lines)


def set_by(choices: dict) -> dict[str, tuple[str, Any]]:
    """``{dotted key: (group=option, value)}`` for every setting a chosen option brings (its
    ``brought`` values) or its file under ``configs/`` sets (``choices``: Hydra's ``runtime.choices``),
    the last in the defaults list (``configs/config.yaml``) winning, as composition does."""
    order = OmegaConf.to_container(OmegaConf.load(CONFIG_DIR / "config.yaml").defaults)
    groups = [next(iter(entry)) for entry in order if isinstance(entry, dict)]
    sources: dict[str, tuple[str, Any]] = {}
    for group in groups:
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
    prefix: str, schema: type, values: dict, sources: dict | None = None, skip: str | None = None
) -> list[str]:
    """One line per described setting of ``schema`` (not its groups, nor the field ``skip``),
    with its value in ``values`` and, where that is not its declaration's, where it comes from
    (``sources``: ``set_by``)."""
    return [
        f"  {prefix}{f.name} = {shown(values.get(f.name))}{origin(f, prefix, values, sources or {})}"
        f"{allowed(f)}: {f.metadata['help']}"
        for f in fields(schema)
        if f.name != skip and f.name not in GROUPS and f.metadata.get("help") is not None
    ]


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
