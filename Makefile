# Two commands set everything up on a fresh machine (Python 3.10+ with venv):
#   make run    install, then train the default agent
#   make test   install with the test extras, then run the test suite
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
# torch first and pinned: an unpinned torch pulls a multi-GB CUDA build.
TORCH  ?= torch==2.13.0

.PHONY: run test test-slow lint install install-test clean

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
# a dependency read outside trajrl/internals.py: scripts/check_private.py), then the tests.
lint: install-test
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/lint-imports
	$(PY) scripts/check_private.py

# Two test processes (pytest-xdist), an idle one taking tests queued for the other (worksteal);
# the CLI runs several tests read are run once per session (tests/conftest.py); no cache written
# into the checkout; the 20 slowest tests listed.
PYTEST_FLAGS ?= -n 2 --dist worksteal -p no:cacheprovider --durations=20

test: lint
	$(PY) -m pytest $(PYTEST_FLAGS) $(ARGS)

test-slow: $(VENV)/.installed-extras
	$(PY) -m pytest -m slow -n 0 -p no:cacheprovider --durations=20 $(ARGS)

clean:
	rm -rf $(VENV)
