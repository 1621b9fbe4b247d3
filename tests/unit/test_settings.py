"""One place per setting: every option's dataclass (trajrl/configuration/settings.py) is what Hydra
composes and what the code reads; every numeric setting declares its range, and a
value outside it is refused before anything is built (table-driven over the registry,
so that a new field without a range, or with one nobody checks, fails here)."""

import copy
import functools
import math
from dataclasses import MISSING, fields

import pytest
from hydra import compose, initialize_config_dir
from omegaconf import DictConfig, OmegaConf, open_dict
from omegaconf.errors import ReadonlyConfigError

import trajrl
from trajrl.base.errors import ConfigError
from trajrl.configuration import settings as S
from trajrl.configuration.compose import CONFIG_DIR, validate

#: How to compose a config that has each group's option (the default config has the others).
OPTION_OVERRIDES = {
    ("storage", "none"): ["algo=ppo"],
    ("sampler", "episode"): ["algo=ppo"],
    ("collector", "multi_sync"): ["algo=ppo"],
    ("collector", "async_batched"): ["collector=async_batched"],
}


@functools.cache
def with_hydra(overrides: tuple[str, ...]) -> DictConfig:
    """What these overrides compose, ``hydra`` (its ``--help``) included: each once a test run."""
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
        return compose(config_name="config", overrides=list(overrides), return_hydra_config=True)


def composed(overrides: tuple[str, ...]) -> DictConfig:
    """A fresh copy of the config these overrides compose: what ``trajrl.compose`` gives."""
    cfg = copy.deepcopy(with_hydra(overrides))
    with open_dict(cfg):
        del cfg["hydra"]
    return cfg


def settings_where(kept) -> list:
    """``(group, option, field)`` of every setting ``kept(field)`` keeps, once per option that declares it
    (and the top level's), as test parameters."""
    found = [(group, name, schema) for group, (_, options) in S.GROUPS.items() for name, schema in options.items()]
    found.append(("", "", S.RunSettings))
    return [
        pytest.param(group, option, f, id=f"{group}={option}:{f.name}" if group else f.name)
        for group, option, schema in found
        for f in fields(schema)
        if kept(f)
    ]


def numeric_settings() -> list:
    """Every numeric setting (a number; or a number, ``auto`` or ``null``: ``sampler.slices_per_batch``)."""
    return settings_where(is_numeric)


def is_numeric(f) -> bool:
    kind = str(f.type)
    declared = any(word in kind for word in ("int", "float")) and "str" not in kind and kind != "Any"
    return declared or f.metadata.get("range") is not None  # a number or auto (sampler.slices_per_batch): Any


def outside(span: S.Range) -> list[float]:
    """Values the range refuses: one past each bound it has (the bound itself where it is open), else infinity."""
    values = []
    if span.low is not None:
        values.append(span.low if span.low_open else span.low - 1)
    if span.high is not None:
        values.append(span.high if span.high_open else span.high + 1)
    return values or [math.inf]  # no bound: still finite only


def settings_with_choices() -> list:
    """Every setting that declares its choices."""
    return settings_where(lambda f: f.metadata.get("choices") is not None)


@pytest.mark.parametrize("group, option, f", settings_with_choices())
def test_every_setting_with_choices_refuses_another_value_naming_them(group, option, f):
    """``env.vectorization=threads: use one of sync, async``: in one line, for every such setting of every option."""
    selector = S.GROUPS[group][0] if group else None
    overrides = OPTION_OVERRIDES.get((group, option), [f"{group}={option}"] if selector else [])
    if group == "collector" and option == "ray":
        pytest.importorskip("ray")
    cfg = composed((*overrides, "debug=smoke"))
    key = f"{group}.{f.name}" if group else f.name
    OmegaConf.set_struct(cfg, False)
    OmegaConf.update(cfg, key, ["nope"] if "list" in str(f.type) else "nope", force_add=True)
    with pytest.raises(ConfigError) as refused:
        validate(cfg)
    assert str(refused.value) == f"{key}='nope': use one of {', '.join(f.metadata['choices'])}"


@pytest.mark.parametrize("group, option, f", numeric_settings())
def test_every_numeric_setting_declares_its_range_and_a_value_past_either_end_is_refused(group, option, f):
    """Below its low end and above its high end, each refused in one line that names the setting, the value, the
    range and the default (``algo.gamma=1.5: must be between 0 and 1; the default is 0.99 (...)``)."""
    span = f.metadata.get("range")
    assert isinstance(span, S.Range), f"{group}.{f.name} declares no range: setting(..., range=...)"
    assert f.metadata.get("help"), f"{group}.{f.name} has no description"
    selector = S.GROUPS[group][0] if group else None
    overrides = OPTION_OVERRIDES.get((group, option), [f"{group}={option}"] if selector else [])
    if group == "collector" and option == "ray":
        pytest.importorskip("ray")
    key = f"{group}.{f.name}" if group else f.name
    is_int = "int" in str(f.type)
    default = f.default_factory() if f.default_factory is not MISSING else f.default
    for value in outside(span):
        cfg = composed((*overrides, "debug=smoke"))
        if group and group != "loop":
            assert cfg[group][selector] == option if selector else True
        if is_int and math.isfinite(value):
            value = int(value)
        OmegaConf.set_struct(cfg, False)
        OmegaConf.update(cfg, key, [value] if "list" in str(f.type) else value, force_add=True)
        stored = OmegaConf.select(cfg, key)
        shown = repr(stored[0] if "list" in str(f.type) else stored)  # a list is refused by the item
        with pytest.raises(ConfigError) as refused:
            validate(cfg)
        assert refused.value.setting == key, str(refused.value)
        message = str(refused.value)
        assert message.startswith(f"{key}={shown}: must be {span}"), message
        assert f"; the default is {default} (" in message, message


def test_each_option_dataclass_is_what_hydra_composes_with_its_defaults():
    """The YAML files add no defaults of their own: a composed option's values are its
    dataclass's defaults, except the few an option file says it changes (algo=rsac, the
    default, brings its loop and the previous action as an input: ``brought`` in trajrl/configuration/settings.py)."""
    changed = {
        ("collector", "multi_async"): {"kind", "num_workers"},
        ("sampler", "prioritized_slice"): set(),
        ("algo", "rsac"): set(),
        ("storage", "lazy_tensor"): {"kind"},
        ("logger", ""): set(),
        ("env", ""): {"id", "previous_action", "observe_time"},
        ("loop", ""): {"warmup_frames", "updates_per_frame", "eval_every_frames"},
    }
    cfg = trajrl.compose([])
    for (group, _option), allowed in changed.items():
        schema = S.option_schema(group, cfg[group])
        for f in fields(schema):
            if f.default is MISSING and f.default_factory is MISSING:
                continue  # required (env.id): the option file gives it
            default = f.default if f.default is not MISSING else f.default_factory()
            if f.name not in allowed:
                assert cfg[group][f.name] == default, (group, f.name)


def test_choices_come_from_the_registries():
    """--help's options are the option files (an algorithm's: its registration, no file); each names an option
    of its group's registry."""
    from helpers import REPO

    for group, (selector, options) in S.GROUPS.items():
        if selector is None:
            continue
        files = sorted(p.stem for p in (REPO / "configs" / group).glob("*.yaml"))
        assert files == ([] if group == "algo" else sorted(options)), group
        for name in options:
            assert (
                with_hydra((f"{group}={name}",) if group != "storage" or name != "none" else ("algo=ppo",))[group][
                    selector
                ]
                == name
            )


def test_the_factory_builds_every_option_of_the_registries():
    from trajrl.algos.registry import SPECS
    from trajrl.factory.collector import BUILDERS as COLLECTORS
    from trajrl.factory.replay import SAMPLER_BUILDERS, STORAGE_BUILDERS

    assert sorted(SPECS) == sorted(S.ALGOS) and all(callable(spec.build) for spec in SPECS.values())
    assert sorted(COLLECTORS) == sorted(S.COLLECTORS)
    assert sorted(SAMPLER_BUILDERS) == sorted(S.SAMPLERS)
    assert sorted([*STORAGE_BUILDERS, "none"]) == sorted(S.STORAGES)


def test_a_config_is_checked_once():
    """validate() returns a read-only config marked as checked; build() and train() take it as it is."""
    checked = validate(trajrl.compose(["debug=smoke"]))
    assert validate(checked) is checked
    with pytest.raises(ReadonlyConfigError):
        checked.algo.lr = -1.0


def group_options() -> list:
    """``group=option`` of every option file of every group, and of every preset."""
    from helpers import REPO

    groups = [*(g for g in S.GROUPS if (REPO / "configs" / g).is_dir()), "experiment"]
    options = [f"{g}={p.stem}" for g in groups for p in sorted((REPO / "configs" / g).glob("*.yaml"))]
    return [*options, *(f"algo={name}" for name in sorted(S.ALGOS))]


@pytest.mark.parametrize("override", group_options())
def test_help_shows_the_values_the_composed_run_gets(override, monkeypatch):
    """--help-all's settings, for each group option on the command line, are that composed run's
    values (what --cfg job prints) but the ones its algorithm does not read, each setting once, and
    the header names the option chosen; --help's are some of them, on at most 60 lines of 120 characters."""
    from helpers import help_settings, job_settings

    from trajrl.configuration.helptext import not_read

    group, option = override.split("=")
    cfg = with_hydra((*OPTION_OVERRIDES.get((group, option), [override]), "debug=smoke"))
    job = OmegaConf.to_container(cfg, resolve=False)
    del job["hydra"]
    unread = (*not_read(job["algo"]["name"]), *(["storage.capacity"] if job["storage"]["kind"] == "none" else []))
    monkeypatch.setenv("TRAJRL_HELP", "all")
    text = cfg.hydra.help.template  # Hydra's --help resolves it with the composed config as its root
    expected = {key: value for key, value in job_settings(job).items() if not key.startswith(tuple(unread))}
    assert help_settings(text) == expected
    selector = S.GROUPS.get(group, (None,))[0]
    if selector:
        assert f"\n{group} ({selector}={option};" in text
    monkeypatch.delenv("TRAJRL_HELP")
    short = cfg.hydra.help.template
    main = help_settings(short)
    assert main and main.items() <= expected.items() and len(main) < len(expected)
    assert len(short.splitlines()) <= 60 and max(len(line) for line in short.splitlines()) <= 120
