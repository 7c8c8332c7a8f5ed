# Everyday targets. `make test` and `make run` work on a fresh clone with only Python and pip.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: install test lint typecheck unit run openapi clean

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
	$(BIN)/mypy layers/tickwork/python local functions tests

unit: install
	$(BIN)/pytest

test: lint typecheck unit

openapi: install
	$(BIN)/python -m tickwork.api.openapi docs/openapi.json

run: install
	@echo "The local stack arrives with the local-stack work; nothing to run yet." && exit 1

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache
