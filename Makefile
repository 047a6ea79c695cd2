# Two entry points for a fresh machine: `make demo` and `make test`.
# Each creates the virtual environment in .venv when it is missing.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
OUT ?= out

.PHONY: venv demo test lint bench clean

$(BIN)/sia: pyproject.toml
	test -d $(VENV) || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $(BIN)/sia

venv: $(BIN)/sia

demo: venv  ## the main job on the Philly trace shipped in the package
	$(BIN)/sia demo --out $(OUT)/demo

test: venv
	$(BIN)/ruff check .
	$(BIN)/python -m pytest -n 2 -q

lint: venv
	$(BIN)/ruff check .

bench: venv
	for b in benchmarks/bench_*.py; do $(BIN)/python $$b || exit 1; done

clean:
	rm -rf $(OUT) .pytest_cache .ruff_cache
