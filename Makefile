# The two commands of the README:  `make demo` (the main job on embedded defaults)
# and `make test` (installs everything the tests need, then runs the whole suite).
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin

.PHONY: install demo test test-duckdb1 lint perf chaos clean gym system

$(BIN)/activate:
	$(PYTHON) -m venv $(VENV) || (apt-get update -q && apt-get install -y -q python3-venv && $(PYTHON) -m venv $(VENV))

# tests/constraints.txt pins the tools the suite tests against (inspect_ai, lm-eval, MLflow, W&B, harlequin).
$(VENV)/.installed: pyproject.toml tests/constraints.txt | $(BIN)/activate
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -c tests/constraints.txt -e '.[all,test]' 'duckdb>=2,<3'  # every extra (ray too); DuckDB 1.x: see test-duckdb1
	touch $@

install: $(VENV)/.installed

# NeMo Gym's own resources servers, for the interoperability tests: its package needs Python 3.13 (pyenv's
# here). Without a 3.13 interpreter, or when the install fails, those tests say so and skip.
PYTHON313 ?= $(firstword $(wildcard $(HOME)/.pyenv/versions/3.13*/bin/python3.13) $(shell command -v python3.13))
GYM_VENV  ?= .venv-gym

$(GYM_VENV)/.installed:
	@if [ -z "$(PYTHON313)" ]; then echo "gym: no Python 3.13 found: the NeMo Gym interoperability tests will skip"; \
	else ($(PYTHON313) -m venv $(GYM_VENV) && $(GYM_VENV)/bin/python -m pip install -q --disable-pip-version-check \
	      --ignore-requires-python nemo-gym==0.7.0 math-verify && touch $@) \
	  || echo "gym: WARNING: installing nemo-gym into $(GYM_VENV) failed: the interoperability tests will skip"; fi

gym: $(GYM_VENV)/.installed

demo: install
	$(BIN)/nel demo

# mypy checks [tool.mypy]'s files, then one by one the conftest.py files it leaves out (each is module `conftest`).
lint: install
	$(BIN)/ruff check workbench tests
	$(BIN)/lint-imports
	$(BIN)/mypy
	$(BIN)/mypy tests/functional/conftest.py
	$(BIN)/mypy tests/tui/conftest.py
	$(BIN)/mypy tests/notebooks/*.py

# Debian packages the suite runs for real: tmux (the TUI smoke test), the Docker engine and debootstrap (the
# images are built from a local base, never pulled), docker-compose, SLURM with munge (a one-node cluster
# the SLURM tests bring up and tear down themselves), bubblewrap (the local sandbox's isolation) and Chromium
# with its driver (the notebooks in a JupyterLab with the network blocked). Only what is missing is installed.
SYSTEM_TOOLS := tmux:tmux dockerd:docker.io debootstrap:debootstrap docker-compose:docker-compose \
                sbatch:slurm-wlm slurmctld:slurm-wlm munged:munge bwrap:bubblewrap \
                chromium:chromium chromedriver:chromium-driver
system:
	@missing="$$(for pair in $(SYSTEM_TOOLS); do command -v $${pair%%:*} >/dev/null || echo $${pair#*:}; done | sort -u)"; \
	if [ -n "$$missing" ]; then echo "installing:" $$missing; apt-get update -q && \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $$missing; fi

# pytest-xdist workers (0: one process); tests/conftest.py puts the tests sharing a resource in one worker.
TEST_WORKERS ?= 2
test: install lint gym system
	$(BIN)/pytest -q -p no:cacheprovider -n $(TEST_WORKERS)
	@$(MAKE) --no-print-directory test-duckdb1

# DuckDB: .venv has the current major, 2.x (what `pip install` and harlequin bring; lint and mypy see its API).
# The tests that write, read or query a store (store, engine, analysis, CLI, TUI, widgets) run again on the
# newest 1.x: only duckdb is installed for it, into $(DUCKDB1), put ahead of .venv on PYTHONPATH (seconds, not a
# second venv; every process a test starts inherits it).
DUCKDB1       ?= $(VENV)/duckdb1
DUCKDB1_TESTS ?= tests/unit tests/functional/test_store_concurrency.py tests/functional/test_store_kills.py \
    tests/functional/test_concurrent_writers.py tests/functional/test_reverify.py tests/functional/test_sql_output.py \
    tests/functional/test_cli_stats.py tests/functional/test_cli_export.py tests/functional/test_diagnosis_sources.py \
    tests/tui/test_sql.py tests/tui/test_snapshots.py tests/tui/test_app_runs.py tests/tui/test_live.py \
    tests/notebooks/test_widgets_on_a_store.py

$(DUCKDB1)/.installed: $(VENV)/.installed
	@echo "duckdb 1.x: installing the newest DuckDB 1.x into $(DUCKDB1)"
	rm -rf $(DUCKDB1)
	$(BIN)/python -m pip install -q --disable-pip-version-check --target $(DUCKDB1) 'duckdb>=1.4,<2'
	touch $@

test-duckdb1: $(DUCKDB1)/.installed
	@echo "duckdb 1.x: the store-facing tests again, on DuckDB" \
	  "$$(PYTHONPATH=$(abspath $(DUCKDB1)) $(BIN)/python -c 'import duckdb; print(duckdb.__version__)')"
	PYTHONPATH=$(abspath $(DUCKDB1)) $(BIN)/pytest -q -p no:cacheprovider -n $(TEST_WORKERS) $(DUCKDB1_TESTS)

perf: install
	$(BIN)/python tests/perf/bench_mock.py
	$(BIN)/python tests/perf/bench_client.py
	$(BIN)/python tests/perf/bench_engine.py
	$(BIN)/python tests/perf/bench_export.py
	$(BIN)/python tests/perf/bench_export_targets.py
	$(BIN)/python tests/perf/bench_stats.py
	$(BIN)/python tests/perf/bench_compare.py
	$(BIN)/python tests/perf/bench_tui.py
	$(BIN)/python tests/perf/bench_diagnose.py
	$(BIN)/python tests/perf/bench_widgets.py
	$(BIN)/python tests/perf/bench_serve.py
	$(BIN)/python tests/perf/bench_shards.py
	$(BIN)/python tests/perf/bench_sandbox.py
	$(BIN)/python tests/perf/bench_service_start.py
	$(BIN)/python tests/perf/bench_serve_hostile.py

# The store's promises under kill -9 and concurrent writers (a few minutes; not part of make test).
chaos: install
	$(BIN)/python tests/chaos/chaos_store.py

clean:
	rm -rf $(VENV) $(GYM_VENV) nel-results nel-demo .pytest_cache .mypy_cache .ruff_cache
