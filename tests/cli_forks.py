"""``python -m trajrl`` for the tests' commands (``helpers.CliForks`` starts it): this process
imports the CLI, torch, TorchRL and what trajrl trains and reports with once, then forks a child
for each command it is given, in a session of its own, that runs it as the interpreter runs
``python -m trajrl``: the environment it was given, ``cwd`` then ``PYTHONPATH`` first on
``sys.path``, ``trajrl.__main__`` as the main module, Python's own Ctrl-C handler,
``trajrl.__main__.cli()`` (which ends the process with its exit code), its output in files.

It reads JSON lines on stdin, each with an ``id`` its answer (a JSON line) repeats, and an ``op``:
``run`` (``args``, ``cwd``, ``env``, ``timeout``): the command to its end: ``code`` (None: killed
after ``timeout`` s), ``out``, ``err`` and ``left``, the processes of its group as it exited;
``start`` (``args``, ``cwd``, ``env``): its ``pid`` at once; ``wait`` (``pid``, ``timeout``): a
started command's ``code`` once it has exited (then ``out``, ``err``, ``left``), None if it has not
within ``timeout`` s. A command costs about 3.5 s of CPU less than a fresh interpreter's, which
imports torch and TorchRL anew each time (a training run, ``evaluate``, ``export``) or Hydra, trajrl
and gymnasium (a refusal)."""

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


#: the output files of each command started and not yet waited for to its end
OUTPUT: dict[int, tuple] = {}


def run_in_child(args: list[str], cwd: str, env: dict[str, str], out: int, err: int) -> None:
    """In the forked child: ``python -m trajrl *args`` in ``cwd`` with environment ``env``; never returns."""
    os.setsid()
    os.chdir(cwd)
    os.environ.clear()
    os.environ.update(env)
    sys.path[:] = [cwd, *(p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p), *BASE_PATH]
    sys.modules["__main__"] = cli  # multiprocessing's spawned and new-interpreter processes import it
    sys.argv = [cli.__file__, *args]
    signal.signal(signal.SIGINT, signal.default_int_handler)  # as an interpreter a shell starts has it
    for files in OUTPUT.values():  # other commands' output
        for file in files:
            file.close()
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


def start(args: list[str], cwd: str, env: dict[str, str]) -> int:
    """Fork a child that runs the command; its pid."""
    out, err = tempfile.TemporaryFile(), tempfile.TemporaryFile()
    pid = os.fork()
    if pid == 0:
        run_in_child(args, cwd, env, os.dup(out.fileno()), os.dup(err.fileno()))
    OUTPUT[pid] = out, err
    return pid


def wait(pid: int, timeout: float) -> dict:
    """A started command's exit code once it has exited within ``timeout`` s (then its output and
    what was left of its group as it exited; its files closed), else None."""
    deadline = time.monotonic() + timeout
    while (waited := os.waitpid(pid, os.WNOHANG))[0] == 0:
        if time.monotonic() >= deadline:
            return {"code": None}
        time.sleep(0.005)
    left = processes_now(pid)
    out, err = OUTPUT.pop(pid)
    said = {}
    for name, file in (("out", out), ("err", err)):
        file.seek(0)
        said[name] = file.read().decode(errors="replace")
        file.close()
    return {"code": os.waitstatus_to_exitcode(waited[1]), **said, "left": left}


def run(args: list[str], cwd: str, env: dict[str, str], timeout: float) -> dict:
    """The command to its end, or killed (with its group) after ``timeout`` s: ``wait``'s answer,
    whose code is None if it was killed; what it left is killed too."""
    pid = start(args, cwd, env)
    done = wait(pid, timeout)
    if done["code"] is None or done["left"]:
        os.killpg(pid, signal.SIGKILL)
    if done["code"] is None:
        return {**wait(pid, 60), "code": None}
    return done


if __name__ == "__main__":
    for line in sys.stdin:
        asked = json.loads(line)
        if asked["op"] == "run":
            done = run(asked["args"], asked["cwd"], asked["env"], asked["timeout"])
        elif asked["op"] == "start":
            done = {"pid": start(asked["args"], asked["cwd"], asked["env"])}
        else:
            done = wait(asked["pid"], asked["timeout"])
        print(json.dumps({"id": asked["id"], **done}), flush=True)
