# Everyday targets. `make test` and `make run` work on a fresh clone with only Python and pip.
PYTHON ?= python3
# jsii (under the CDK) warns at length on every run about these Node.js versions reaching end of life.
export JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION := 20,22
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
	$(BIN)/mypy layers/tickwork/python local functions tests bench infra

unit: install
	$(BIN)/pytest

test: lint typecheck unit

# The Lambda layer of third-party dependencies, as Linux arm64 wheels for Python 3.13 (no Docker).
build: install
	$(BIN)/python -m infra.build_layers

# The CloudFormation template, checked by cdk-nag during synthesis and by cfn-lint after it.
synth: build
	rm -rf cdk.out
	CDK_OUTDIR=cdk.out $(BIN)/python -m infra.app
	$(BIN)/cfn-lint cdk.out/tickwork-*.template.json
	@echo "template: $$(ls cdk.out/tickwork-*.template.json)"

openapi: install
	$(BIN)/python -m tickwork.api.openapi docs/openapi.json

# `make run PORT=8080` (or TICKWORK_PORT=8080) to listen elsewhere than 8000.
run: install
	$(BIN)/tickwork local $(if $(PORT),--port $(PORT))

# Benchmarks rewrite docs/benchmarks.md; they are never timed assertions in `make test`.
bench: install
	$(BIN)/python -m bench

# Long reliability runs; their figures go to docs/reliability.md. The fault scenarios also run, smaller, in
# `make test`; here each has 150 fires (about 15 minutes under moto).
soak: install
	$(BIN)/python -m bench.faults
	$(BIN)/python -m bench.soak
	$(BIN)/python -m bench.fuzz_api

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache build cdk.out
