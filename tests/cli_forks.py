"""``python -m trajrl`` for the tests' commands (``helpers.CliForks`` starts it): this process
imports the CLI, torch, TorchRL and what trajrl trains and reports with once, then runs each
command it reads on stdin (a JSON line: ``id``, ``args``, ``cwd``, ``timeout``, ``env``) in a child
forked for it, in a session of its own, as the interpreter runs ``python -m trajrl``: the
environment it was given, ``cwd`` then ``PYTHONPATH`` first on ``sys.path``, ``trajrl.__main__``
as the main module, ``trajrl.__main__.cli()`` (which ends the process with its exit code). It
answers a JSON line: ``id``, ``code``, ``out``, ``err`` and ``left``, the processes of the child's group
at the moment it exited. A command costs about 3.5 s of CPU less than a fresh interpreter's,
which imports torch and TorchRL anew each time (a training run, ``evaluate``, ``export``) or
Hydra, trajrl and gymnasium (a refusal)."""

import json
import os
import signal
import sys
import tempfile
import time
import traceback

from process_groups import processes_now

from trajrl.base.processes import workers_from_a_fork_server

workers_from_a_fork_server()  # as the CLI does, before TorchRL's import sets ``spawn``

import gymnasium  # noqa: E402, F401

import trajrl.__main__ as cli  # noqa: E402
import trajrl.report.export  # noqa: E402, F401
import trajrl.report.plot  # noqa: E402, F401
import trajrl.training.run  # noqa: E402, F401

#: ``sys.path`` less the script's directory and this server's own ``PYTHONPATH``.
BASE_PATH = [p for p in sys.path[1:] if p not in os.environ.get("PYTHONPATH", "").split(os.pathsep)]


def run_in_child(args: list[str], cwd: str, env: dict[str, str], out: int, err: int) -> None:
    """In the forked child: ``python -m trajrl *args`` in ``cwd`` with environment ``env``; never returns."""
    os.setsid()
    os.chdir(cwd)
    os.environ.clear()
    os.environ.update(env)
    sys.path[:] = [cwd, *(p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p), *BASE_PATH]
    sys.modules["__main__"] = cli  # multiprocessing's spawned and new-interpreter processes import it
    sys.argv = [cli.__file__, *args]
    os.dup2(os.open(os.devnull, os.O_RDONLY), 0)  # the server's pipes, at 0 and 1, are replaced
    os.dup2(out, 1)
    os.dup2(err, 2)
    os.close(out)
    os.close(err)
    try:
        cli.cli()
    except BaseException:  # what the interpreter does with an exception nothing caught
        traceback.print_exc()
        sys.stderr.flush()
    os._exit(1)


def run(args: list[str], cwd: str, timeout: float, env: dict[str, str]) -> dict:
    """One command in a forked child: its exit code (None if it ran past ``timeout`` s and
    was killed), its stdout and stderr, and what was left of its group when it exited."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        pid = os.fork()
        if pid == 0:
            run_in_child(args, cwd, env, os.dup(out.fileno()), os.dup(err.fileno()))
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
        done = run(asked["args"], asked["cwd"], asked["timeout"], asked["env"])
        print(json.dumps({"id": asked["id"], **done}), flush=True)
