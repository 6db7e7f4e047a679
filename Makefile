# The inner loop's commands (CONTRIBUTING.md). Every target runs the tools of .venv; `make
# setup` makes it. `bash .ci/check` is what CI runs: the same checks on a fresh install, with
# the Node clients and podman set up first.

VENV ?= .venv
BIN := $(VENV)/bin
PYTEST := $(BIN)/python -m pytest
# make bench-core BEFORE=<commit or checkout>: that core paired with this one's in one process
BEFORE ?=

.PHONY: setup lint format types test test-all check golden bench-core

setup:  ## .venv with the package and its test extra, and the Node clients of the suite
	python3 -m venv $(VENV)
	$(BIN)/python -m pip install --quiet -e '.[test]'
	cd tests/clients && npm install --no-audit --no-fund --no-save --loglevel=error

lint:  ## formatting and lint, as CI checks them
	$(BIN)/ruff format --check .
	$(BIN)/ruff check .

format:  ## format and fix what ruff can
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

types:  ## mypy over proxy/, tests/ and bench/
	$(BIN)/mypy

test:  ## the core and shell tests: no Node, root or podman (the lanes left out)
	$(PYTEST) -q $(ARGS)

test-all:  ## every test, every lane (tests/lanes.py), as .ci/check runs them
	$(PYTEST) -q --lane all $(ARGS)

check: lint types test-all  ## all of CI's checks on this .venv

golden:  ## rewrite the golden outputs after a deliberate change; review them as a diff
	UPDATE_GOLDEN=1 $(PYTEST) -q tests/core/protocols/chat/test_golden.py
	git diff --stat -- tests/golden/

bench-core:  ## the core alone, us per event (BEFORE=REV: paired with that commit's or checkout's)
ifneq ($(BEFORE),)
	$(BIN)/python -m bench.core --checkout $(BEFORE)
else
	$(BIN)/python -m bench.core
endif
