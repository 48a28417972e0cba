# gpufinops: the two commands are `make run` and `make test` (README "Quick start"). Both create a virtual
# environment in .venv and install the project into it when needed (no .venv yet, or pyproject.toml newer than
# the last install), so a fresh clone needs nothing but Python 3.11. `make ... USE_VENV=0` uses the current
# interpreter as it is instead. The README lists the plain commands for machines without make.

BOOTSTRAP_PYTHON ?= $(shell command -v python3.11 || command -v python3 || command -v python)
VENV ?= .venv
USE_VENV ?= 1
HOST ?= 127.0.0.1
PORT ?= 8000
URL := http://$(HOST):$(PORT)/

ifeq ($(USE_VENV),1)
PYTHON := $(VENV)/bin/python
BIN := $(VENV)/bin/
STAMP := $(VENV)/.gpufinops-installed
else
PYTHON ?= python
BIN :=
STAMP :=
endif

.PHONY: run demo schema test test-fast lint check bench migrate static check-deploy install help deploy-render deploy-validate rules-test

help:
	@echo "make run    - install into .venv if needed, migrate (SQLite under var/ unless DATABASE_URL is set),"
	@echo "              seed the simulated demo cluster: serve $(URL) once its newest hours are in, then the rest"
	@echo "make schema - write devtools/sqlite_schema.sql again (the migrated SQLite schema make run starts from)"
	@echo "make test   - install into .venv if needed, run the test suite on $(TEST_WORKERS) pytest-xdist workers"
	@echo "              (python -m pytest -q -n 3 --dist loadgroup)"
	@echo "make test-fast - the inner loop: the tests marked neither services nor slow, on SQLite, two workers"
	@echo "              (no PostgreSQL, Redis, Prometheus, Celery worker or browser; CONTRIBUTING.md)"
	@echo "make lint   - ruff check ."
	@echo "make check  - ruff, the import contracts (lint-imports) and mypy: the static checks CI runs"
	@echo "make bench  - the benchmarks in bench/"
	@echo "make deploy-render deploy-validate rules-test - render and validate deploy/ (docs/deploy.md)"

# ---- The environment: created and (re)installed only when needed ----
$(VENV)/bin/python:
	$(BOOTSTRAP_PYTHON) -m venv $(VENV)

$(VENV)/.gpufinops-installed: pyproject.toml | $(VENV)/bin/python
	$(VENV)/bin/python -m pip install --quiet -e '.[dev]'
	@touch $@

install: $(STAMP)

migrate: $(STAMP)
	$(PYTHON) manage.py migrate --noinput

# Static files need no build step: js/plotly.min.js is served from the installed plotly package by
# apps.dashboard.staticfiles.PlotlyFinder; `collectstatic` copies everything into STATIC_ROOT for production.
static: $(STAMP)
	$(PYTHON) manage.py collectstatic --noinput --verbosity 0

# A new SQLite database starts from the migrated schema (devtools/.../migrate_cached.py: this machine's cached copy or
# the committed devtools/sqlite_schema.sql). The demo collects its newest hours, serves $(URL) (runserver, its child)
# and prints how to sign in, then collects the older hours while serving, and serves on until Ctrl-C (--serve).
run: $(STAMP)
	GPUFINOPS_DEVTOOLS=1 $(PYTHON) manage.py migrate_cached
	GPUFINOPS_DEVTOOLS=1 GPUFINOPS_BASE_URL="$${GPUFINOPS_BASE_URL:-$(URL)}" $(PYTHON) manage.py demo \
		--serve $(HOST):$(PORT) $$([ -n "$$DISPLAY" ] && echo --open)

# After a migration changes: the committed schema a fresh clone's `make run` starts from (a test names this target
# when it is stale).
schema: $(STAMP)
	GPUFINOPS_DEVTOOLS=1 $(PYTHON) manage.py migrate_cached --write-schema

demo: run

# The tests drive the development tools (demo, simulate): installed whatever DEBUG the shell has. Three workers on
# two cores: the suite is CPU-bound, and a fourth worker cost more CPU than its overlapped waits saved (2026-12-01,
# back to back on a quiet 2-core machine: 1,574 passed in 544 s with three, 663 s with four); each test module runs on one worker (its shared worlds built once there), the long modules first
# (tests/conftest.py), and a simulated history is made once for all workers (tests/harness/prometheus.py).
TEST_WORKERS ?= 3
test: $(STAMP)
	env -u PYTHONDONTWRITEBYTECODE GPUFINOPS_DEVTOOLS=1 $(PYTHON) -m pytest -q -n $(TEST_WORKERS) --dist loadgroup

# The contributor's inner loop (CONTRIBUTING.md): no services, so on SQLite whatever DATABASE_URL the shell has, and
# not the few `slow` ones (schemathesis fuzzing, the 10,000-GPU scenario, a day of demo: `make test` runs them), on
# two pytest-xdist workers, each test module on one worker (a shared world's tests together on one, built once).
# Bytecode is written even where the shell sets PYTHONDONTWRITEBYTECODE: otherwise each worker, and each Django
# subprocess a test starts, compiles every module and pytest rewrites every test module's asserts again (half of
# a worker's collection CPU; bench/README.md).
TEST_FAST_WORKERS ?= 2
test-fast: $(STAMP)
	env -u DATABASE_URL -u PYTHONDONTWRITEBYTECODE GPUFINOPS_DEVTOOLS=1 $(PYTHON) -m pytest -q \
		-m "not services and not slow" -n $(TEST_FAST_WORKERS) --dist loadgroup

lint: $(STAMP)
	$(PYTHON) -m ruff check .

# The static checks .ci/run runs before the tests: lint, the import contracts in pyproject.toml, mypy.
check: $(STAMP)
	$(PYTHON) -m ruff check .
	$(BIN)lint-imports --no-cache
	$(PYTHON) -m mypy

bench: $(STAMP)
	@for script in bench/*.py; do echo "== $$script"; $(PYTHON) $$script || exit 1; done

check-deploy: $(STAMP)
	$(PYTHON) manage.py check --deploy --fail-level WARNING

# ---- Kubernetes manifests and alert rules (docs/deploy.md, docs/operations.md) ----
deploy-render: $(STAMP)
	$(PYTHON) deploy/render.py --all --out var/deploy

deploy-validate: deploy-render
	$(PYTHON) deploy/validate.py var/deploy/*.yaml

rules-test:
	promtool check rules deploy/monitoring/gpufinops-rules.yaml
	cd deploy/monitoring && promtool test rules gpufinops-rules.test.yaml
