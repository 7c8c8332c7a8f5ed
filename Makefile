# Everyday targets. `make test` and `make run` work on a fresh clone with only Python and pip.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: install test lint typecheck unit run bench openapi clean

install: $(STAMP)

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev,local]'
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

bench: install
	$(BIN)/python -m bench.local_burst --jobs 200

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache
