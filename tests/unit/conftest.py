"""tests/unit starts no process and trains nothing (``make test-unit``: the inner loop, well under
30 s): a test that starts a worker, a collector process or the CLI fails here, and belongs in
tests/integration or tests/cli."""

import multiprocessing.process
import subprocess

import pytest


@pytest.fixture(autouse=True)
def no_process_started(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("tests/unit starts no process: move this test to tests/integration or tests/cli")

    monkeypatch.setattr(multiprocessing.process.BaseProcess, "start", refuse)
    monkeypatch.setattr(subprocess.Popen, "__init__", refuse)
