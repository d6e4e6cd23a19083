# blackwell-sglang-ansible: the two commands of the README are `make demo` and `make test`.
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
SGLANG_VERSION ?= 0.5.23
export ANSIBLE_CONFIG := $(CURDIR)/ansible.cfg
export PATH := $(CURDIR)/$(BIN):$(PATH)

.PHONY: help venv deps wheel lint unit fuzz conformance-venv conformance simhost wheelhouse provision-fixtures molecule test demo demo-down schema bench clean

help: ## List the targets
	@grep -hE '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-18s %s\n", $$1, $$2}'

$(BIN)/.stamp: requirements.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -r requirements.txt
	touch $@

venv: $(BIN)/.stamp ## Create the control-node virtualenv (.venv) from requirements.txt

wheel: ## Download the pinned SGLang wheel the schema is extracted from (no install)
	$(PYTHON) tools/sglang_schema.py --version $(SGLANG_VERSION) --download-only

schema: wheel ## Regenerate the committed CLI schema of SGLANG_VERSION
	$(PYTHON) tools/sglang_schema.py --version $(SGLANG_VERSION) \
	  --out collections/ansible_collections/blackwell/sglang/plugins/plugin_utils/schemas/sglang-$(SGLANG_VERSION).json

conformance-venv: ## Create .venv-conformance with the real SGLang and a CPU-capable torch
	tests/conformance/setup-venv.sh

deps: venv wheel conformance-venv ## Everything the tests need besides Docker

lint: venv ## yamllint, ansible-lint (production profile), ruff
	$(BIN)/yamllint --strict .
	$(BIN)/ansible-lint --profile production
	$(BIN)/ruff check tools tests collections bench molecule

unit: venv wheel ## Unit tests and playbook tests that need no container
	$(BIN)/pytest -q tests/unit tests/integration/test_validate_playbook.py

FUZZ_EXAMPLES ?= 10000
fuzz: venv ## Property-based input-contract tests, long: FUZZ_EXAMPLES (10000) random cases per property (CI runs a fixed-seed sample)
	HYPOTHESIS_PROFILE=fuzz FUZZ_EXAMPLES=$(FUZZ_EXAMPLES) $(BIN)/pytest -q tests/unit/test_input_contract.py

conformance: venv conformance-venv ## Our validator against SGLang 0.5.23's own argument checks
	$(BIN)/pytest -q tests/conformance

simhost: ## Build the simulated Blackwell host images, Debian 12 and 13 (cached by content hash)
	tests/fixtures/simhost/ensure-docker.sh
	tests/fixtures/simhost/build-image.sh
	SIMHOST_SUITE=trixie tests/fixtures/simhost/build-image.sh

wheelhouse: ## Build the stand-in sglang wheel(s) into build/wheelhouse
	tests/fixtures/sglang_standin/build-wheelhouse.sh

provision-fixtures: venv simhost ## Fixtures of the provisioning roles and the router (bare host, signed apt repo, wheels)
	tests/fixtures/simhost/build-provision-fixtures.sh
	tests/fixtures/router/build-wheelhouse.sh

molecule: venv simhost wheelhouse provision-fixtures ## Every molecule scenario
	$(BIN)/molecule test --all

test: deps lint simhost wheelhouse provision-fixtures ## Everything: lint, unit, playbook, simulated-host, conformance and molecule tests
	$(BIN)/pytest -q tests/unit tests/integration tests/conformance
	$(BIN)/molecule test --all

demo: venv simhost wheelhouse provision-fixtures ## Deploy to a local simulated Blackwell host, then restart with spec=auto
	tests/fixtures/simhost/demo.sh

demo-down: ## Remove the demo's simulated host
	tests/fixtures/simhost/simhost.sh down bsa-demo-01

bench: venv simhost wheelhouse provision-fixtures ## All five benchmarks (bench/run_all.py) and one table: validation at scale, time to reject, restart overhead, no-op deploy, fleet rollout
	$(BIN)/python bench/run_all.py $(BENCH_ARGS)

clean: ## Remove virtualenvs, caches and build output
	rm -rf $(VENV) .venv-conformance .cache build
