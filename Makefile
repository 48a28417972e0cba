# gpufinops: the two commands are `make run` and `make test` (README "Quick start").
# Each target is a thin wrapper around Python; the README lists the plain commands for machines without make.

PYTHON ?= python
HOST ?= 127.0.0.1
PORT ?= 8000
URL := http://$(HOST):$(PORT)/

.PHONY: run demo test lint bench migrate static check-deploy install help

help:
	@echo "make run    - migrate (SQLite under var/ unless DATABASE_URL is set), seed the demo cluster, serve $(URL)"
	@echo "make demo   - same as make run"
	@echo "make test   - the test suite (python -m pytest -q)"
	@echo "make lint   - ruff check ."
	@echo "make bench  - the benchmarks in bench/"

install:
	$(PYTHON) -m pip install -e '.[dev]'

migrate:
	$(PYTHON) manage.py migrate --noinput

# Static files need no build step: js/plotly.min.js is served from the installed plotly package by
# apps.dashboard.staticfiles.PlotlyFinder; `collectstatic` copies everything into STATIC_ROOT for production.
static:
	$(PYTHON) manage.py collectstatic --noinput --verbosity 0

run: migrate
	@if ls apps/*/management/commands/demo.py >/dev/null 2>&1; then $(PYTHON) manage.py demo; fi
	@if [ -n "$$DISPLAY" ]; then (sleep 2; $(PYTHON) -m webbrowser -t $(URL) >/dev/null 2>&1) & fi
	$(PYTHON) manage.py runserver $(HOST):$(PORT)

demo: run

test:
	$(PYTHON) -m pytest -q

lint:
	ruff check .

bench:
	@for script in bench/*.py; do echo "== $$script"; $(PYTHON) $$script || exit 1; done

check-deploy:
	$(PYTHON) manage.py check --deploy --fail-level WARNING
