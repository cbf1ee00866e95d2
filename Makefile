# The two commands of the README: `make demo` and `make test`. Both set everything up first.
SHELL := /bin/bash
PYTHON ?= python3
# Recursively expanded, so a uv that `setup` just installed is found by the recipes after it.
UV = $(shell command -v uv 2>/dev/null || echo "$(PYTHON) -m uv")
export UV_LINK_MODE := copy
# Trust the system certificate store (machines behind a TLS-inspecting proxy).
export UV_SYSTEM_CERTS := 1
# Compile every installed module once at setup: this environment sets PYTHONDONTWRITEBYTECODE=1,
# so without it each `centsync` start recompiles Dagster's modules (half a household refresh).
export UV_COMPILE_BYTECODE := 1
# The layers, each a top-level folder installed as centsync.<layer> (docs/architecture.md).
LAYERS := extract transform warehouse pipelines sandbox

.PHONY: setup setup-dev uv demo test test-all test-slow lint bench bench-sandbox clean report-screenshot docs notebook compile

uv:
	@if ! command -v uv >/dev/null 2>&1 && ! $(PYTHON) -m uv --version >/dev/null 2>&1; then \
		echo "setup: uv not found: installing it with pip --user"; \
		$(PYTHON) -m pip install --user --quiet uv || $(PYTHON) -m pip install --quiet uv; \
	fi

# What runs, only: `make demo`. --inexact keeps the test tools if `make test` installed them.
setup: uv
	@echo "setup: installing centsync and what it runs on into .venv (pinned by uv.lock; the first time takes a minute or two)..."
	@$(UV) sync --frozen --no-dev --inexact --quiet
	@$(MAKE) --no-print-directory compile

# What runs plus the test and lint tools: `make test`, `make lint`.
setup-dev: uv
	@echo "setup: installing centsync, what it runs on and the test tools into .venv (pinned by uv.lock; the first time takes a few minutes)..."
	@$(UV) sync --frozen --quiet
	@$(MAKE) --no-print-directory compile

compile:
	@echo "setup: compiling centsync's own modules..."
	@# Our own modules are installed editable (not compiled by uv): compile them in place.
	@$(UV) run --frozen --no-sync python -m compileall -q -j 0 $(LAYERS) >/dev/null
	@echo "setup: done."

demo: setup
	$(UV) run --frozen --no-sync centsync demo

test: setup-dev
	$(UV) run --frozen pytest -n 2 -q

test-all: setup-dev
	RUN_SLOW=1 $(UV) run --frozen pytest -n 2 -q

# Only the suites marked slow (real rate-limit windows, a daemon's minute, kill-at-any-point
# loops, the docs' console examples): CI runs them after `make test` (.ci/run).
test-slow: setup-dev
	RUN_SLOW=1 $(UV) run --frozen pytest -n 2 -q -m slow

lint: setup-dev
	$(UV) run --frozen ruff check $(LAYERS) tests bench notebooks
	$(UV) run --frozen ruff format --check $(LAYERS) tests bench notebooks
	@# mypy cannot follow setuptools' editable import hook: give it the centsync.<layer> names
	@# through a tree of links (build/typecheck/centsync/<layer> -> <layer>).
	@mkdir -p build/typecheck/centsync && for l in $(LAYERS); do ln -sfn ../../../$$l build/typecheck/centsync/$$l; done
	MYPYPATH=build/typecheck $(UV) run --frozen mypy

# The README's picture of the report, taken by the report's browser test.
report-screenshot: setup-dev
	CENTSYNC_REPORT_SCREENSHOT=$(CURDIR)/docs/report.png $(UV) run --frozen pytest -q -p no:xdist \
		tests/pipelines/test_report_browser.py -k demo_report

# The data dictionary, generated from the comments of a freshly migrated warehouse.
docs: setup
	$(UV) run --frozen --no-sync centsync docs

# An analyst notebook on the project's warehouse: `make notebook NAME=spending`.
notebook: setup
	$(UV) run --frozen --no-sync centsync notebook $(NAME)

# Issue 46's side by side (docs/benchmarks.md): centsync, dlt's rest_api and the plain script on
# one sandbox, in turns (a household's no-change refresh, a 1,000,000-row first sync), the floor
# under any refresh, and the fleet's daily refresh per owner. About 25 minutes on 2 cores;
# BENCH_REPS=1 for a quicker look. `make bench-sandbox`: the sandbox's own throughput.
BENCH_REPS ?= 3
bench: setup-dev
	$(UV) run --frozen python bench/compare.py --sizes 1000000 --tools centsync dlt plain --reps $(BENCH_REPS)
	$(UV) run --frozen python bench/fixed_cost.py
	$(UV) run --frozen python bench/owners.py --owners 200

bench-sandbox: setup-dev
	$(UV) run --frozen python bench/sandbox_throughput.py

clean:
	rm -rf .venv data .dagster_home .pytest_cache build
