# Two commands set everything up on a fresh machine (Python 3.10+ with venv):
#   make run    install, then train the default agent
#   make test   install with the test extras, then run the test suite
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
# torch first and pinned: an unpinned torch pulls a multi-GB CUDA build.
TORCH  ?= torch==2.13.0

.PHONY: run test test-unit test-slow test-next lint install install-test clean

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip

$(VENV)/.installed: pyproject.toml | $(PY)
	$(PY) -m pip install --quiet $(TORCH)
	$(PY) -m pip install --quiet -e .
	touch $@

$(VENV)/.installed-test: $(VENV)/.installed
	$(PY) -m pip install --quiet -e ".[test]"
	touch $@

# The slow tests also cover the optional extras (Ray, submitit, Optuna); one at a time
# (-n 0): two Ray tests at once would each see the other's Ray processes.
$(VENV)/.installed-extras: $(VENV)/.installed-test
	$(PY) -m pip install --quiet -e ".[test,ray,sweep]"
	touch $@

install: $(VENV)/.installed
install-test: $(VENV)/.installed-test

run: install
	$(PY) -m trajrl $(ARGS)

# The rules a machine checks (pyproject.toml: [tool.ruff], [tool.importlinter]; no private name of
# a dependency read outside trajrl/base/internals.py: scripts/check_private.py), then the tests.
lint: install-test
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/lint-imports
	$(PY) scripts/check_private.py

# Two test processes (pytest-xdist), an idle one taking tests queued for the other (worksteal);
# the CLI runs several tests read are run once per session (tests/conftest.py); no cache written
# into the checkout; the 20 slowest tests listed. trajrl's and the tests' modules are compiled first:
# where PYTHONDONTWRITEBYTECODE is set, each of the suite's hundreds of processes would compile them
# again (about 0.2 s of CPU each; pip compiles what it installs, not an editable checkout).
PYTEST_FLAGS ?= -n 2 --dist worksteal -p no:cacheprovider --durations=20

test: lint
	$(PY) -m compileall -q trajrl tests
	$(PY) -m pytest $(PYTEST_FLAGS) $(ARGS)

# The inner loop: tests/unit alone, one process, no worker started, nothing trained (< 30 s);
# plain pytest works too (pytest tests/unit/test_ppo.py, pytest --lf).
test-unit: install-test
	$(PY) -m pytest tests/unit $(ARGS)

test-slow: $(VENV)/.installed-extras
	$(PY) -m pytest -m slow -n 0 -p no:cacheprovider --durations=20 $(ARGS)

# The suite against the next TorchRL (not part of .ci/run): a virtualenv of its own with the
# newest torchrl-nightly and tensordict-nightly from PyPI over the same pinned torch. They are
# other distributions than torchrl and tensordict, so trajrl goes in without its dependencies
# (pip would add torchrl 0.14 over the nightly) and they come from scripts/next_requirements.py:
# pyproject.toml's, less torchrl and tensordict. docs/development.md: what it found.
NEXT_VENV ?= .venv-next
NEXT_PY   := $(NEXT_VENV)/bin/python

$(NEXT_VENV)/.installed: pyproject.toml scripts/next_requirements.py
	$(PYTHON) -m venv $(NEXT_VENV)
	$(NEXT_PY) -m pip install --quiet --upgrade pip
	$(NEXT_PY) -m pip install --quiet $(TORCH)
	$(NEXT_PY) -m pip install --quiet --upgrade --pre torchrl-nightly tensordict-nightly
	$(NEXT_PY) scripts/next_requirements.py > $(NEXT_VENV)/requirements.txt
	$(NEXT_PY) -m pip install --quiet -r $(NEXT_VENV)/requirements.txt
	$(NEXT_PY) -m pip install --quiet --no-deps -e .
	$(NEXT_PY) -m pip list 2>/dev/null | grep -Ei '^(torch|torchrl|tensordict)' | tee $(NEXT_VENV)/versions.txt
	touch $@

test-next: $(NEXT_VENV)/.installed
	$(NEXT_PY) -m pytest $(PYTEST_FLAGS) $(ARGS)

clean:
	rm -rf $(VENV) $(NEXT_VENV)
