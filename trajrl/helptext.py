"""The settings part of ``python -m trajrl [group=option ...] --help``: every setting of the run
those groups compose, one line each (name = value | range or choices: description), the value
the run gets (what ``--cfg job`` prints), the range and description from the dataclasses of
``trajrl.settings``. ``configs/config.yaml`` asks for it as ``${trajrl_settings:}``, a resolver
``trajrl.config`` registers; OmegaConf hands it the composed config (``_root_``)."""

from __future__ import annotations

import json
from dataclasses import Field, fields
from typing import Any

from omegaconf import DictConfig, OmegaConf

from trajrl.settings import GROUPS, RunSettings, option_schema


def describe_settings(*, _root_: DictConfig) -> str:
    """Every setting of the composed run ``_root_``, one line each: the top level, then each
    group's chosen option (naming the group's other options)."""
    values = OmegaConf.to_container(_root_, resolve=False)
    lines = ["top level:", *setting_lines("", RunSettings, values)]
    for group, (selector, options) in GROUPS.items():
        schema, section = option_schema(group, _root_[group]), values[group]
        if selector:
            others = ", ".join(name for name in options if name != section[selector])
            lines.append(f"{group} ({selector}={section[selector]}; the others: {others}):")
        else:
            lines.append(f"{group}:")
        lines += setting_lines(f"{group}.", schema, section, skip=selector)
    return "\n".join(lines)


def setting_lines(prefix: str, schema: type, values: dict, skip: str | None = None) -> list[str]:
    """One line per described setting of ``schema`` (not its groups, nor the field ``skip``),
    with its value in ``values``."""
    return [
        f"  {prefix}{f.name} = {shown(values.get(f.name))}{allowed(f)}: {f.metadata['help']}"
        for f in fields(schema)
        if f.name != skip and f.name not in GROUPS and f.metadata.get("help") is not None
    ]


def shown(value: Any) -> str:
    """A value as YAML reads it back (null, true, 0.001, [64, 64], {}, ???, ${...})."""
    return value if isinstance(value, str) else json.dumps(value)


def allowed(f: Field) -> str:
    span, choices = f.metadata.get("range"), f.metadata.get("choices")
    if span is not None:
        return f" | {span}"
    return f" | {', '.join(choices)}" if choices else ""
