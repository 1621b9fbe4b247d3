"""Print trajrl's requirements (its dependencies and the test extras, pyproject.toml) less
torchrl and tensordict, one a line: ``make test-next`` installs them beside the nightlies
(``torchrl-nightly``, ``tensordict-nightly``: other distribution names, which pip would not
count as torchrl and tensordict). Python 3.11 or later (``tomllib``)."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import tomllib

NIGHTLY = {"torchrl", "tensordict"}


def requirements(pyproject: Path, extras: tuple[str, ...] = ("test",)) -> list[str]:
    """The project's dependencies and those of ``extras`` (its own extras expanded), less ``NIGHTLY``."""
    project = tomllib.loads(pyproject.read_text())["project"]
    optional = project.get("optional-dependencies", {})
    out: list[str] = []
    pending, seen = list(extras), set()
    reqs = list(project.get("dependencies", []))
    while pending:
        extra = pending.pop()
        if extra in seen:
            continue
        seen.add(extra)
        for req in optional.get(extra, []):
            own = re.fullmatch(r"trajrl\[([\w,\s-]+)\]", req.strip())
            if own:
                pending.extend(name.strip() for name in own.group(1).split(","))
            else:
                reqs.append(req)
    for req in reqs:
        name = re.match(r"[A-Za-z0-9_.-]+", req).group(0).lower()
        if name not in NIGHTLY and req not in out:
            out.append(req)
    return out


if __name__ == "__main__":
    root = Path(__file__).resolve().parent.parent
    print("\n".join(requirements(root / "pyproject.toml", tuple(sys.argv[1:]) or ("test",))))
