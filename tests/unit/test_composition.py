"""What every group option and preset composes, key by key, against the record in
``tests/data/composed.json``: moving where a default is written (a group file, a setting's
``brought`` values) must not change the value any run gets. A change meant to change one writes
the record again (``python tests/unit/test_composition.py``) and shows in its diff.

And the rule that keeps each default in one place: a group's option file sets its own group's
keys only (``configs/<group>/<option>.yaml``); what an option brings to the rest of the run
(``algo=rsac``: 16,000 frames, ...) is declared beside each setting (``brought``), and presets
under ``experiment/`` and ``debug/`` may set anything."""

import json
import sys
from pathlib import Path

import pytest
from omegaconf import OmegaConf

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from helpers import REPO  # noqa: E402

RECORD = REPO / "tests" / "data" / "composed.json"

#: Options composed with others they need (the default run's sampler does not suit PPO, ...).
WITH = {"storage=none": ["algo=ppo"], "sampler=episode": ["algo=ppo"], "collector=multi_sync": ["algo=ppo"]}
#: Combinations whose defaults come from two groups at once.
COMBINATIONS = [["algo=r2d2", "collector=async_batched"], ["algo=ppo", "collector=async_batched"], ["debug=smoke"]]


def cases() -> list[list[str]]:
    """The default run, each option of each group and each preset, and ``COMBINATIONS``."""
    groups = ("env", "collector", "storage", "sampler", "algo", "logger", "experiment")
    options = [f"{g}={p.stem}" for g in groups for p in sorted((REPO / "configs" / g).glob("*.yaml"))]
    return [[], *([*WITH.get(o, []), o] for o in options), *COMBINATIONS]


def composed_values() -> dict[str, dict]:
    import trajrl

    return {" ".join(case) or "(default)": OmegaConf.to_container(trajrl.compose(case)) for case in cases()}


def test_every_option_and_preset_composes_the_values_recorded():
    recorded, now = json.loads(RECORD.read_text()), composed_values()
    assert sorted(now) == sorted(recorded), "cases changed: write the record again"
    changed = [
        f"{case}: {key} = {value!r}, recorded {was!r}"
        for case in now
        for key, value, was in differences(now[case], recorded[case])
    ]
    assert not changed, "\n".join(changed)


def differences(now: dict, was: dict, prefix: str = "") -> list[tuple[str, object, object]]:
    found = []
    for key in sorted(set(now) | set(was)):
        a, b = now.get(key, "<absent>"), was.get(key, "<absent>")
        if isinstance(a, dict) and isinstance(b, dict):
            found += differences(a, b, f"{prefix}{key}.")
        elif a != b:
            found.append((f"{prefix}{key}", a, b))
    return found


if __name__ == "__main__":
    RECORD.write_text(json.dumps(composed_values(), indent=1, sort_keys=True) + "\n")
    print(f"wrote {RECORD}")
