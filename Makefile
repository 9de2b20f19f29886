# Batch Gateway. `make demo` runs the main job; `make test` runs the tests.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml client/pyproject.toml | sha1sum | cut -c1-12)
TEST_DATABASE_URL ?= postgres://postgres@127.0.0.1:5432/gateway
TEST_REDIS_URL ?= redis://127.0.0.1:6379/0
# the suite waits on real processes (workers, servers) far more than it computes: two pytest processes
# overlap those waits on 2 cores. PYTEST_WORKERS=0 runs it in one process.
PYTEST_WORKERS ?= 2
# this machine's pip config names local mirrors that may not exist; pip warns once per package. And
# setuptools prints a multi-line "Editable installation" banner for `pip install -e`: both dropped.
PIP_QUIET := awk '/BuildBackendWarning: Editable installation/ {skip = 1} \
	!skip && !/is neither a file nor a directory/ {print} /with strategy, WheelFile/ {skip = 0}'

.PHONY: demo test up down lint venv services migrate clean

$(STAMP): pyproject.toml client/pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	@echo "==> installing into $(VENV) (pyproject.toml changed)"
	@$(PY) -m pip install --quiet --upgrade pip 2>&1 | $(PIP_QUIET); test $${PIPESTATUS[0]} -eq 0
	@$(PY) -m pip install --quiet -e '.[dev,bench]' -e './client[langchain]' 2>&1 | $(PIP_QUIET); test $${PIPESTATUS[0]} -eq 0
	@rm -f $(VENV)/.installed-*
	@touch $(STAMP)

venv: $(STAMP)

services:
	@bash scripts/ensure_services.sh

demo: venv
	@bash scripts/demo.sh

test: venv services
	@bash scripts/ensure_chromium.sh || true
	@bash scripts/ensure_prometheus.sh || true
	DATABASE_URL=$${DATABASE_URL:-$$(cat var/test-database-url 2>/dev/null || echo $(TEST_DATABASE_URL))} \
		REDIS_URL=$${REDIS_URL:-$(TEST_REDIS_URL)} $(PY) -m pytest -n $(PYTEST_WORKERS) --dist loadfile $(PYTEST_ARGS)

up: venv services
	@bash scripts/up.sh

down:
	@bash scripts/up.sh stop

lint: venv
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(PY) -m mypy

clean:
	rm -rf var db.sqlite3
