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

.PHONY: setup demo test test-all lint bench clean report-screenshot docs notebook

setup:
	@if ! command -v uv >/dev/null 2>&1 && ! $(PYTHON) -m uv --version >/dev/null 2>&1; then \
		echo "uv not found: installing it with pip --user"; \
		$(PYTHON) -m pip install --user --quiet uv || $(PYTHON) -m pip install --quiet uv; \
	fi
	@$(UV) sync --frozen --quiet
	@# Our own modules are installed editable (not compiled by uv): compile them in place.
	@$(UV) run --frozen --no-sync python -m compileall -q -j 0 $(LAYERS) >/dev/null

demo: setup
	$(UV) run --frozen centsync demo

test: setup
	$(UV) run --frozen pytest -n 2 -q

test-all: setup
	RUN_SLOW=1 $(UV) run --frozen pytest -n 2 -q

lint: setup
	$(UV) run --frozen ruff check $(LAYERS) tests bench notebooks
	$(UV) run --frozen ruff format --check $(LAYERS) tests bench notebooks
	@# mypy cannot follow setuptools' editable import hook: give it the centsync.<layer> names
	@# through a tree of links (build/typecheck/centsync/<layer> -> <layer>).
	@mkdir -p build/typecheck/centsync && for l in $(LAYERS); do ln -sfn ../../../$$l build/typecheck/centsync/$$l; done
	MYPYPATH=build/typecheck $(UV) run --frozen mypy

# The README's picture of the report, taken by the report's browser test.
report-screenshot: setup
	CENTSYNC_REPORT_SCREENSHOT=$(CURDIR)/docs/report.png $(UV) run --frozen pytest -q -p no:xdist \
		tests/pipelines/test_report_browser.py -k demo_report

# The data dictionary, generated from the comments of a freshly migrated warehouse.
docs: setup
	$(UV) run --frozen centsync docs

# An analyst notebook on the project's warehouse: `make notebook NAME=spending`.
notebook: setup
	$(UV) run --frozen centsync notebook $(NAME)

bench: setup
	$(UV) run --frozen python bench/sandbox_throughput.py

clean:
	rm -rf .venv data .dagster_home .pytest_cache build
