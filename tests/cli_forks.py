"""``python -m trajrl`` for many short commands (``helpers.CliForks`` starts it): this process
imports the CLI once, then runs each command it reads on stdin (a JSON line: ``args``, ``cwd``,
``timeout``) in a child forked for it, in a session of its own, as the interpreter would run
``python -m trajrl``: ``trajrl.__main__.main(args)``, its output in files, its exit code that of
``sys.exit``. It answers a JSON line: ``code``, ``out``, ``err`` and ``left``, the processes of the
child's group at the moment it exited. A refusal costs about half the CPU time of a fresh
interpreter (which imports Hydra, trajrl and, to check an environment, gymnasium anew each time)."""

import json
import os
import signal
import sys
import tempfile
import time
import traceback

import gymnasium  # noqa: F401  (imported once here, not by each check of an environment)
from process_groups import processes_now

import trajrl.__main__ as cli


def run_in_child(args: list[str], cwd: str, out: int, err: int) -> None:
    """In the forked child: ``python -m trajrl *args`` in ``cwd``; never returns."""
    os.setsid()
    os.chdir(cwd)
    sys.path[0] = cwd  # where ``python -m`` puts it
    os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
    os.dup2(out, 1)
    os.dup2(err, 2)
    sys.argv = ["trajrl", *args]
    code = 0
    try:
        cli.main(args)
    except SystemExit as exit_:
        code = exit_.code if isinstance(exit_.code, int) else (0 if exit_.code is None else 1)
        if not isinstance(exit_.code, int | None):
            print(exit_.code, file=sys.stderr)
    except BaseException:
        traceback.print_exc()
        code = 1
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
    os._exit(code)


def run(args: list[str], cwd: str, timeout: float) -> dict:
    """One command in a forked child: its exit code (None if it ran past ``timeout`` s and
    was killed), its stdout and stderr, and what was left of its group when it exited."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        pid = os.fork()
        if pid == 0:
            run_in_child(args, cwd, out.fileno(), err.fileno())
        deadline = time.monotonic() + timeout
        while (waited := os.waitpid(pid, os.WNOHANG))[0] == 0 and time.monotonic() < deadline:
            time.sleep(0.005)
        left = processes_now(pid)
        code = os.waitstatus_to_exitcode(waited[1]) if waited[0] else None
        if code is None or left:
            os.killpg(pid, signal.SIGKILL)
            if code is None:
                os.waitpid(pid, 0)
        out.seek(0)
        err.seek(0)
        return {"code": code, "out": out.read().decode(), "err": err.read().decode(), "left": left}


if __name__ == "__main__":
    for line in sys.stdin:
        asked = json.loads(line)
        print(json.dumps(run(asked["args"], asked["cwd"], asked["timeout"])), flush=True)
