"""The processes of a process group, from /proc: what a command left behind as it exited
(standard library only: ``cli_forks.py`` imports it before anything of its own)."""

from pathlib import Path


def processes_now(pgid: int) -> list[str]:
    """Every process of group ``pgid`` at this moment, zombies included: ``pid state command``."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            state, _, group = stat.read_text().rsplit(")", 1)[1].split()[:3]
            command = (stat.parent / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except (OSError, ValueError):  # gone meanwhile
            continue
        if int(group) == pgid:
            found.append(f"{stat.parent.name} {state} {command[:160]}")
    return found
