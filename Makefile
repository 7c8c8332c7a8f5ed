# Everyday targets. `make test` and `make run` work on a fresh clone with only Python and pip.
PYTHON ?= python3
# jsii (under the CDK) warns at length on every run about these Node.js versions reaching end of life.
export JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION := 20,22
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: install console screenshots test lint typecheck unit run bench bench-flow soak synth build openapi clean

install: $(STAMP) console

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev,local,infra,bench]'
	touch $(STAMP)

# The web console (infra/console): `npm ci` when its lock file changed, then a build when a source changed.
# Without Node.js and npm it says so and goes on: `make run` still serves the API (and says the console is
# not built); the browser tests then fail with the same advice.
CONSOLE := infra/console
CONSOLE_STAMP := $(CONSOLE)/dist/.built
CONSOLE_SOURCES := $(CONSOLE)/package.json $(CONSOLE)/package-lock.json $(CONSOLE)/build.mjs \
	$(CONSOLE)/tsconfig.json $(CONSOLE)/index.html $(shell find $(CONSOLE)/src $(CONSOLE)/public -type f 2>/dev/null)

console: $(CONSOLE_STAMP)

$(CONSOLE_STAMP): $(CONSOLE_SOURCES)
	@if command -v npm >/dev/null 2>&1; then \
		set -e; cd $(CONSOLE); \
		if [ ! -f node_modules/.package-lock.json ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then \
			npm ci --no-audit --no-fund --loglevel=error; \
		fi; \
		npm run --silent build; \
		touch dist/.built; \
	else \
		echo "the web console is not built: it needs Node.js and npm (then run: make console)"; \
	fi

# The console's browser tests, writing their screenshots into docs/console/ for docs/console.md.
screenshots: install
	TICKWORK_CONSOLE_SCREENSHOTS=docs/console $(BIN)/pytest tests/e2e/test_console.py

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
synth: build console
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

# Flow control across tenants (issue 30): minutes each, so `make bench` keeps their last figures.
bench-flow: install
	$(BIN)/python -m bench --only fairness,throttle,priorities

# Long reliability runs; their figures go to docs/reliability.md. The fault scenarios also run, smaller, in
# `make test`; here each has 150 fires (about 15 minutes under moto).
soak: install
	$(BIN)/python -m bench.faults
	$(BIN)/python -m bench.soak
	$(BIN)/python -m bench.fuzz_api

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache build cdk.out $(CONSOLE)/dist $(CONSOLE)/node_modules
