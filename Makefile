# The two commands of the README:  `make demo` (the main job on embedded defaults)
# and `make test` (installs everything the tests need, then runs the whole suite).
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin

.PHONY: install demo test lint perf clean

$(BIN)/activate:
	$(PYTHON) -m venv $(VENV) || (apt-get update -q && apt-get install -y -q python3-venv && $(PYTHON) -m venv $(VENV))

$(VENV)/.installed: pyproject.toml | $(BIN)/activate
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[test]'
	touch $@

install: $(VENV)/.installed

demo: install
	$(BIN)/nel demo

lint: install
	$(BIN)/ruff check workbench tests
	$(BIN)/lint-imports
	$(BIN)/mypy

test: install lint
	command -v tmux >/dev/null || (apt-get update -q && apt-get install -y -q tmux)  # the TUI smoke test drives tmux
	$(BIN)/pytest -q -p no:cacheprovider

perf: install
	$(BIN)/python tests/perf/bench_mock.py
	$(BIN)/python tests/perf/bench_client.py
	$(BIN)/python tests/perf/bench_engine.py
	$(BIN)/python tests/perf/bench_export.py
	$(BIN)/python tests/perf/bench_stats.py
	$(BIN)/python tests/perf/bench_compare.py
	$(BIN)/python tests/perf/bench_tui.py
	$(BIN)/python tests/perf/bench_diagnose.py
	$(BIN)/python tests/perf/bench_widgets.py

clean:
	rm -rf $(VENV) nel-results nel-demo .pytest_cache .mypy_cache .ruff_cache
