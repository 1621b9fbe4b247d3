"""How a setting is declared: a dataclass field with its description and its range (numbers) or
choices (names), for every option of every group (``trajrl.configuration.settings``) and every
algorithm (``trajrl.algos.<name>.settings``). Nothing here imports torch."""

from __future__ import annotations

import math
from dataclasses import MISSING, Field, dataclass, field, fields
from typing import Any


@dataclass(frozen=True)
class Range:
    """The numbers a setting admits (always finite): ``low``/``high`` bounds, open or closed."""

    low: float | None = None
    high: float | None = None
    low_open: bool = False
    high_open: bool = False

    def admits(self, value: float) -> bool:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            return False
        if self.low is not None and (value <= self.low if self.low_open else value < self.low):
            return False
        return self.high is None or (value < self.high if self.high_open else value <= self.high)

    def __str__(self) -> str:
        low = None if self.low is None else f"{'>' if self.low_open else '>='} {self.low:g}"
        high = None if self.high is None else f"{'<' if self.high_open else '<='} {self.high:g}"
        if low and high and self.low_open == self.high_open:
            return f"{'strictly ' if self.low_open else ''}between {self.low:g} and {self.high:g}"
        if low and high:
            return f"{low} and {high}"
        return low or high or "a finite number"


def at_least(low: float) -> Range:
    return Range(low)


def above(low: float) -> Range:
    return Range(low, low_open=True)


def between(low: float, high: float, low_open: bool = False, high_open: bool = False) -> Range:
    return Range(low, high, low_open, high_open)


ANY_NUMBER = Range()
FRACTION = between(0, 1)


def setting(
    default: Any,
    help: str,
    *,
    range: Range | None = None,
    choices: tuple[str, ...] | None = None,
    auto: bool = False,
    null: bool = True,
    checkpointed: bool = False,
    brought: dict[str, Any] | None = None,
    main: str | None = None,
    shown: bool = True,
) -> Any:
    """A dataclass field with its description and its range (numbers) or choices (names);
    ``brought``: the value a run gets where it picks a group's option (``{"algo=rsac": 16_000}``:
    ``python -m trajrl algo=rsac`` runs 16,000 frames), the later group in ``configs/config.yaml``'s
    defaults list winning where two chosen options bring one (``brought_by``);
    ``auto``: the value "auto" is admitted too (trajrl derives it from other settings);
    ``null=False``: a field typed ``Any`` (a number or auto) refuses null, which its type cannot;
    ``checkpointed``: what a checkpoint holds was made with it (the networks' shapes, the
    environment's spaces), so a resume keeps it (``trajrl.configuration.checks.check_resume``);
    ``main``: a setting a user sets, listed by ``--help`` with this short description (``--help-all``
    lists every setting, with ``help``); ``shown=False``: in neither (a key kept only so that a preset
    may set it whichever option is chosen). A list default is copied for each instance."""
    metadata = {
        "help": help,
        "range": range,
        "choices": choices,
        "auto": auto,
        "null": null,
        "checkpointed": checkpointed,
        "brought": dict(brought or {}),
        "main": main,
        "shown": shown,
    }
    if isinstance(default, (list, dict)):
        return field(default_factory=lambda: type(default)(default), metadata=metadata)
    return field(default=default, metadata=metadata)


def option(name: str, checkpointed: bool = False) -> Any:
    """The field that names a group's option (``kind`` or ``name``); the registry sets its choices.
    ``checkpointed``: a resume keeps the option (``setting``)."""
    metadata = {"help": "the option of this group", "range": None, "choices": None, "checkpointed": checkpointed}
    return field(default=name, metadata=metadata)


def default_of(f: Field) -> Any:
    """The default a field declares (a fresh copy of a list); ``MISSING`` where it is required."""
    return f.default_factory() if f.default_factory is not MISSING else f.default


def option_name(schema: type) -> str | None:
    """The option an option's dataclass declares (its ``name`` or ``kind`` field's default)."""
    for f in fields(schema):
        if f.name in ("name", "kind"):
            return f.default
    return None
