"""The processes of a process group, from /proc: what a command left behind as it exited
(standard library only: ``cli_forks.py`` imports it before anything of its own)."""

from pathlib import Path


def members(pgid: int) -> list[tuple[int, str]]:
    """``(pid, state)`` of every process of group ``pgid`` at this moment (state ``Z``: a zombie)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            state, _, group = stat.read_text().rsplit(")", 1)[1].split()[:3]
        except (OSError, ValueError):  # gone meanwhile
            continue
        if int(group) == pgid:
            found.append((int(stat.parent.name), state))
    return found


def processes_now(pgid: int) -> list[str]:
    """Every process of group ``pgid`` at this moment, zombies included: ``pid state command``."""
    found = []
    for pid, state in members(pgid):
        try:
            command = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:  # gone meanwhile
            continue
        found.append(f"{pid} {state} {command[:160]}")
    return found


def processes_in_group(pgid: int) -> list[int]:
    """Live processes of group ``pgid`` (zombies left out)."""
    return [pid for pid, state in members(pgid) if state != "Z"]
