"""``scripts/bench_learning.py``'s own wiring (its learning figures are measured, not tested): a default run on a
user's environment, whose id the user's module registers."""

import subprocess
import sys

from helpers import REPO, TESTS


def test_the_random_policys_return_on_a_users_environment_imports_its_module():
    """The baseline each row is read against (``random_policy``) makes the run's environment in the script's own
    process: it must import ``env.import_module`` first, as the run does (a fresh process has none registered)."""
    code = (
        "import bench_learning as b\n"
        "target = b.default_target(['env=gym', 'env.id=UnboundedLine-v0', 'env.import_module=misbehaving_envs'], 0.0)\n"
        "print(target.import_module, b.random_policy(target, episodes=2))\n"
    )
    env = {"PYTHONPATH": f"{REPO / 'scripts'}:{TESTS}:{REPO}", "PATH": ""}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    module, value = proc.stdout.split()
    assert module == "misbehaving_envs"
    assert float(value) < 0  # minus the squared distance, every step of 50
