"""What every group option and preset composes, key by key, against the record in
``tests/data/composed.json``: moving where a default is written (a group file, a setting's
``brought`` values) must not change the value any run gets. A change meant to change one writes
the record again (``python tests/unit/test_composition.py``) and shows in its diff.

And the rule that keeps each default in one place: a group's option file sets its own group's
keys only (``configs/<group>/<option>.yaml``); what an option brings to the rest of the run
(``algo=rsac``: 16,000 frames, ...) is declared where the option is (an algorithm's ``AlgoSpec.brings``, else
beside each setting: ``brought``), and presets
under ``experiment/`` and ``debug/`` may set anything."""

import json
import sys
from pathlib import Path

import pytest
from omegaconf import OmegaConf

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from helpers import REPO  # noqa: E402

from trajrl.algos.registry import ALGOS  # noqa: E402
from trajrl.configuration.settings import bringing_options  # noqa: E402

RECORD = REPO / "tests" / "data" / "composed.json"

#: Options composed with others they need (the default run's sampler does not suit PPO, ...).
WITH = {"storage=none": ["algo=ppo"], "sampler=episode": ["algo=ppo"], "collector=multi_sync": ["algo=ppo"]}
#: Combinations whose defaults come from two groups at once.
COMBINATIONS = [["algo=r2d2", "collector=async_batched"], ["algo=ppo", "collector=async_batched"], ["debug=smoke"]]


def cases() -> list[list[str]]:
    """The default run, each option of each group and each preset, and ``COMBINATIONS``."""
    groups = ("env", "collector", "storage", "sampler", "algo", "logger", "experiment")
    options = [f"{g}={name}" for g in groups for name in option_names(g)]
    return [[], *([*WITH.get(o, []), o] for o in options), *COMBINATIONS]


def option_names(group: str) -> list[str]:
    """A group's options: its files under ``configs/``; the algorithms trajrl registers (not one a test
    module registered in this process: ``tests/toy_algo.py``)."""
    if group == "algo":
        return sorted(name for name, settings in ALGOS.items() if settings.__module__.startswith("trajrl."))
    return [p.stem for p in sorted((REPO / "configs" / group).glob("*.yaml"))]


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


#: Groups whose option files are presets: they may set any key.
PRESETS = ("experiment", "debug")


def group_files() -> list[Path]:
    """Every option file of a group that is not a preset (Hydra's own groups, under hydra/, left out)."""
    groups = [p for p in sorted((REPO / "configs").iterdir()) if p.is_dir() and p.name not in (*PRESETS, "hydra")]
    return [f for g in groups for f in sorted(g.glob("*.yaml"))]


@pytest.mark.parametrize("path", group_files(), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_a_group_option_file_sets_its_own_groups_keys_only(path):
    """Its keys are its group's (the file's package, or under the group's key at the top level;
    hparams_search's: Hydra's sweeper); what it brings to the rest of the run comes from the
    declarations (``/trajrl_brought_<group>_<option>``), and it may pick other groups' options."""
    import yaml

    group, text = path.parent.name, path.read_text()
    body = yaml.safe_load(text) or {}
    entries = body.pop("defaults", [])
    if "# @package _global_" in text:
        others = set(body) - {group, "hydra"}
        assert not others, (
            f"{path.relative_to(REPO)} sets {sorted(others)}: declare them brought (trajrl/configuration/settings.py)"
        )
    for entry in entries:
        if not isinstance(entry, str) or "@" not in entry:
            continue  # the option's schema, _self_, or a pick of another group's option
        name, package = entry.lstrip("/").split("@")
        assert package == group or name == f"trajrl_brought_{group}_{path.stem}", (path, entry)


@pytest.mark.parametrize("group, option", [*bringing_options(), *(("algo", name) for name in sorted(ALGOS))])
def test_what_an_option_brings_is_what_a_run_that_picks_it_gets(group, option):
    """Every ``brought`` value declared for ``group=option`` is in the config that picks it."""
    import trajrl
    from trajrl.configuration.settings import brought_by

    cfg = trajrl.compose([*WITH.get(f"{group}={option}", []), f"{group}={option}"])
    for key, value in brought_by(group, option).items():
        assert OmegaConf.select(cfg, key) == value, (group, option, key)


if __name__ == "__main__":
    RECORD.write_text(json.dumps(composed_values(), indent=1, sort_keys=True) + "\n")
    print(f"wrote {RECORD}")
