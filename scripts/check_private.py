"""Fail on a private name of a dependency read anywhere in ``trajrl/`` but ``trajrl/base/internals.py``
(``make lint`` runs it): ``python scripts/check_private.py [root]``.

What it flags, by reading the source (AST), never importing it:

- ``x._name``, where ``x`` is not ``self`` or ``cls`` (``super()._name`` is allowed only in a
  method of that name: an override that calls the one it overrides);
- ``getattr(x, "_name")`` (and ``setattr``, ``hasattr``, ``delattr``), where ``x`` is not ``self``;
- ``from package import _name``, ``from package._private import ...``, ``import package._private``,
  where the package is not trajrl;

unless ``_name`` is trajrl's own: defined in ``trajrl/`` (a function, class, module or class
attribute, or ``self._name = ...``) and nowhere in the sources of torchrl, tensordict or
multiprocessing (a name they also use may be theirs: ``_step``, ``_empty``, ``_lock``).
Dunder names (``__name__``) and the documented ``os._exit`` and named tuples'
``_replace``/``_asdict``/``_fields``/``_make`` are allowed. What it cannot see: a private
name reached through ``self`` in a subclass of a dependency's class, or built at run time.
"""

from __future__ import annotations

import ast
import importlib.util
import re
import sys
from collections.abc import Iterator
from pathlib import Path

#: The one module allowed to read a dependency's private names.
INTERNALS = Path("trajrl/base/internals.py")
#: The dependencies whose private names trajrl must not share by accident.
DEPENDENCIES = ("torchrl", "tensordict", "multiprocessing")
#: Documented public names that begin with one underscore.
PUBLIC = {"_exit", "_replace", "_asdict", "_fields", "_make", "_field_defaults"}
ATTRIBUTE_CALLS = {"getattr", "setattr", "hasattr", "delattr"}


def is_private(name: str) -> bool:
    """``_name``, not a dunder, not one of ``PUBLIC``."""
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__")) and name not in PUBLIC


def dependency_names(packages: tuple[str, ...] = DEPENDENCIES) -> set[str]:
    """Every ``_identifier`` in the sources of ``packages`` (as installed)."""
    names: set[str] = set()
    for package in packages:
        spec = importlib.util.find_spec(package)
        roots = list(spec.submodule_search_locations or []) if spec else []
        for root in roots:
            for path in Path(root).rglob("*.py"):
                names.update(re.findall(r"\b_[A-Za-z]\w*", path.read_text(errors="ignore")))
    return names


def own_names(trees: dict[Path, ast.Module]) -> set[str]:
    """The private names trajrl defines (see the module)."""
    names: set[str] = set()
    for tree in trees.values():
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names.add(node.name)
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                names.add(node.id)
            elif (
                isinstance(node, ast.Attribute)
                and isinstance(node.ctx, ast.Store)
                and isinstance(node.value, ast.Name)
                and node.value.id in ("self", "cls")
            ):
                names.add(node.attr)
    return {name for name in names if is_private(name)}


def is_self(node: ast.AST) -> bool:
    return isinstance(node, ast.Name) and node.id in ("self", "cls")


def is_super(node: ast.AST) -> bool:
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "super"


def findings(path: Path, tree: ast.Module, own: set[str]) -> Iterator[str]:
    """``path:line: what`` for each private name of a dependency read in ``tree``."""
    methods: dict[ast.AST, str] = {}  # each node inside a function: the function's name
    for function in ast.walk(tree):
        if isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for node in ast.walk(function):
                methods[node] = function.name  # the innermost function wins (walked last)
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and is_private(node.attr) and node.attr not in own:
            if is_self(node.value) or (is_super(node.value) and methods.get(node) == node.attr):
                continue
            yield f"{path}:{node.lineno}: {ast.unparse(node)}"
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ATTRIBUTE_CALLS:
            if len(node.args) < 2 or is_self(node.args[0]):
                continue
            name = node.args[1]
            if isinstance(name, ast.Constant) and isinstance(name.value, str):
                if is_private(name.value) and name.value not in own:
                    yield f"{path}:{node.lineno}: {ast.unparse(node)}"
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module.split(".")[0] == "trajrl":
                continue
            if any(is_private(part) for part in node.module.split(".")):
                yield f"{path}:{node.lineno}: from {node.module} import ..."
            for alias in node.names:
                if is_private(alias.name):
                    yield f"{path}:{node.lineno}: from {node.module} import {alias.name}"
        elif isinstance(node, ast.Import):
            for alias in node.names:
                parts = alias.name.split(".")
                if parts[0] != "trajrl" and any(is_private(part) for part in parts):
                    yield f"{path}:{node.lineno}: import {alias.name}"


def main(root: Path) -> int:
    """Print each finding under ``root/trajrl``; 1 if there is one."""
    paths = sorted(path for path in (root / "trajrl").rglob("*.py") if path.relative_to(root) != INTERNALS)
    trees = {path.relative_to(root): ast.parse(path.read_text(), str(path)) for path in paths}
    own = own_names(trees) - dependency_names()
    found = sorted(
        {line for path, tree in trees.items() for line in findings(path, tree, own)},
        key=lambda line: (line.split(":")[0], int(line.split(":")[1])),
    )
    for line in found:
        print(line)
    if found:
        print(
            f"\n{len(found)} private name(s) of a dependency read outside {INTERNALS}: read each through a "
            f"function of {INTERNALS} (with why trajrl needs it) and test it in tests/unit/test_internals.py"
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parent.parent))
