# Two entry points for a fresh machine: `make demo` and `make test`.
# Each creates the virtual environment in .venv when it is missing.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
OUT ?= out

.PHONY: venv demo test lint bench docs docs-serve clean

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

# The documentation site (mkdocs.yml): `--strict` fails on a broken link, a missing page or an
# API reference that does not resolve. The CLI and config reference pages are generated from
# the code at each build (tools/mkdocs_hooks.py).
$(BIN)/mkdocs: pyproject.toml | $(BIN)/sia
	$(BIN)/pip install --quiet -e '.[dev,docs]'
	touch $(BIN)/mkdocs

# The API sources' links (.cache/api) are laid out before MkDocs starts: mkdocstrings drops a
# search path that does not exist yet when it reads the config, so a first build failed.
docs: $(BIN)/mkdocs
	$(BIN)/python tools/mkdocs_hooks.py
	$(BIN)/python -m mkdocs build --strict

docs-serve: $(BIN)/mkdocs
	$(BIN)/python tools/mkdocs_hooks.py
	$(BIN)/python -m mkdocs serve --dev-addr 127.0.0.1:8000

bench: venv
	for b in benchmarks/bench_*.py; do $(BIN)/python $$b || exit 1; done

clean:
	rm -rf $(OUT) .pytest_cache .ruff_cache site .cache
