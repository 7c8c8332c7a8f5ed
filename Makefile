# Everyday targets. `make test` and `make run` work on a fresh clone with only Python and pip.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: install test lint typecheck unit run bench soak synth build openapi clean

install: $(STAMP)

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev,local,infra,bench]'
	touch $(STAMP)

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: install
	$(BIN)/mypy layers/tickwork/python local functions tests bench

unit: install
	$(BIN)/pytest

test: lint typecheck unit

openapi: install
	$(BIN)/python -m tickwork.api.openapi docs/openapi.json

run: install
	$(BIN)/tickwork local

# Benchmarks rewrite docs/benchmarks.md; they are never timed assertions in `make test`.
bench: install
	$(BIN)/python -m bench

# Long reliability runs; their figures go to docs/reliability.md.
soak: install
	$(BIN)/python -m bench.soak
	$(BIN)/python -m bench.fuzz_api

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache
