"""The settings part of ``python -m trajrl --help``: every setting of every option, one line
each (name = default | range or choices: description), read from the dataclasses of
``trajrl.settings``. ``configs/config.yaml`` asks for it as ``${trajrl_settings:}``, a
resolver ``trajrl.config`` registers."""

from __future__ import annotations

from dataclasses import MISSING, Field, fields

from trajrl.settings import GROUPS, RunSettings, default_of


def describe_settings() -> str:
    """Every setting of every option, one line each: the top level first, then each group."""
    lines = ["top level:", *setting_lines("", RunSettings)]
    for group, (selector, options) in GROUPS.items():
        for schema in dict.fromkeys(options.values()):  # each dataclass once, in the registry's order
            same = [name for name, cls in options.items() if cls is schema]
            lines.append(group + (f" ({selector}={', '.join(same)})" if selector else "") + ":")
            lines += setting_lines(f"{group}.", schema, skip=selector)
    return "\n".join(lines)


def setting_lines(prefix: str, schema: type, skip: str | None = None) -> list[str]:
    """One line per described setting of ``schema`` (not its groups, nor the field ``skip``)."""
    return [
        f"  {prefix}{f.name} = {shown_default(f)}{allowed(f)}: {f.metadata['help']}"
        for f in fields(schema)
        if f.name != skip and f.name not in GROUPS and f.metadata.get("help") is not None
    ]


def shown_default(f: Field) -> object:
    default = default_of(f)
    return "(required)" if default is MISSING else default


def allowed(f: Field) -> str:
    span, choices = f.metadata.get("range"), f.metadata.get("choices")
    if span is not None:
        return f" | {span}"
    return f" | {', '.join(choices)}" if choices else ""
