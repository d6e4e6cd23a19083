# blackwell-sglang-ansible: the two commands of the README are `make demo` and `make test`.
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

# The interpreter that creates the virtualenvs, resolved before .venv/bin goes first on PATH: under `make -j`, a bare
# `python3` in a recipe could otherwise find a .venv that another job is still creating (no pip in it yet).
ifndef PYTHON
PYTHON := $(or $(shell command -v python3),python3)
endif
VENV ?= .venv
BIN := $(VENV)/bin
SGLANG_VERSION ?= 0.5.23
export ANSIBLE_CONFIG := $(CURDIR)/ansible.cfg
export PATH := $(CURDIR)/$(BIN):$(PATH)

.PHONY: help venv constraints deps wheel wheels lock lint unit fuzz conformance-venv conformance conformance-release conformance-all conformance-targeted conformance-grids simhost wheelhouse provision-fixtures molecule molecule-extended test demo demo-down schema catalog gateway-schema gateway-lock bench dist ee ee-image fuzz-sglang changelog release sanity sanity-venv clean

help: ## List the targets
	@grep -hE '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-18s %s\n", $$1, $$2}'

$(BIN)/.stamp: requirements.txt constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -r requirements.txt -c constraints.txt
	touch $@

venv: $(BIN)/.stamp ## Create the control-node virtualenv (.venv) from requirements.txt (the rest pinned by constraints.txt)

# constraints.txt: what requirements.txt pulls in, at the versions installed now (tools/constraints.py). After a change
# of requirements.txt: .venv/bin/pip install -r requirements.txt (without the old constraints), make test, then this.
constraints: ## Rewrite constraints.txt from the control-node virtualenv (after changing requirements.txt)
	$(BIN)/python tools/constraints.py --write

SCHEMA_DIR := collections/ansible_collections/blackwell/sglang/plugins/plugin_utils/schemas
# Every release with a committed schema (0.5.18 ... 0.5.23).
SCHEMA_VERSIONS = $(shell $(PYTHON) tools/sglang_schema_diff.py --list)

# The downloads run pip from .venv: a fresh Debian python3 has no pip module.
wheel: venv ## Download the pinned SGLang wheel the schema is extracted from (no install)
	$(BIN)/python tools/sglang_schema.py --version $(SGLANG_VERSION) --download-only

wheels: venv wheel ## Download the wheel of every release with a committed schema (the per-release schema checks need them)
	for v in $(SCHEMA_VERSIONS); do $(BIN)/python tools/sglang_schema.py --version $$v --download-only; done

schema: wheel ## Regenerate the committed CLI schema of SGLANG_VERSION; print what changed since the release before it; the newest release also gets its catalog
	$(PYTHON) tools/sglang_schema.py --version $(SGLANG_VERSION) --out $(SCHEMA_DIR)/sglang-$(SGLANG_VERSION).json
	$(PYTHON) tools/sglang_schema_diff.py --to $(SGLANG_VERSION)
	newest=$$($(PYTHON) tools/sglang_schema_diff.py --list | awk '{print $$NF}'); \
	if [ "$(SGLANG_VERSION)" = "$$newest" ]; then $(MAKE) --no-print-directory catalog; \
	else echo "catalog: only the newest release ($$newest) has one; $(SGLANG_VERSION) is older, tests/catalog untouched"; fi

catalog: venv wheel ## Regenerate tests/catalog/catalog-SGLANG_VERSION.json; print the entries new or gone vs. its mapping
	$(BIN)/python tools/sglang_catalog.py --version $(SGLANG_VERSION) --out tests/catalog/catalog-$(SGLANG_VERSION).json \
	  --mapping tests/catalog/mapping-$(SGLANG_VERSION).yml || echo "review: map the new entries in tests/catalog/mapping-$(SGLANG_VERSION).yml"

lock: venv ## Compile the hashed lock of SGLANG_VERSION and roles/sglang's torch requirement into roles/sglang/files/locks (uv pip compile --universal --generate-hashes)
	$(BIN)/python tools/sglang_lock.py --version $(SGLANG_VERSION) $(LOCK_ARGS)

# The gateways (roles/sglang_router): smg, the default, and sglang-router, the legacy path.
GATEWAY_SMG_VERSION ?= 1.13.0
GATEWAY_ROUTER_VERSION ?= 0.3.2
gateway-schema: venv ## Extract the gateways' launch parsers from their wheels into plugin_utils/schemas/gateway-*.json (smg GATEWAY_SMG_VERSION, sglang-router GATEWAY_ROUTER_VERSION)
	$(BIN)/python tools/gateway_schema.py --gateway smg --version $(GATEWAY_SMG_VERSION)
	$(BIN)/python tools/gateway_schema.py --gateway sglang-router --version $(GATEWAY_ROUTER_VERSION)

gateway-lock: venv ## Compile the hashed lock of smg GATEWAY_SMG_VERSION into roles/sglang_router/files/locks (uv pip compile --universal --generate-hashes)
	echo "smg==$(GATEWAY_SMG_VERSION)" | $(BIN)/uv pip compile --universal --generate-hashes --python-version 3.10 \
	  --custom-compile-command "make gateway-lock" - -o roles/sglang_router/files/locks/smg-$(GATEWAY_SMG_VERSION).txt

conformance-venv: ## Create .venv-conformance with the real SGLang and a CPU-capable torch
	tests/conformance/setup-venv.sh

deps: venv wheel wheels conformance-venv sanity-venv ## Everything the tests need besides Docker

lint: venv wheel ## The pre-commit hooks on every file: yamllint, ansible-lint (production profile), ruff, shellcheck, schema/catalog freshness
	$(BIN)/pre-commit run --all-files --show-diff-on-failure

unit: venv wheel wheels ## Unit tests and playbook tests that need no container
	$(BIN)/pytest -q -m "not ee_image" tests/unit tests/integration/test_validate_playbook.py \
	  tests/integration/test_collection_dist.py tests/integration/test_execution_environment.py

FUZZ_EXAMPLES ?= 10000
fuzz: venv ## Property-based input-contract tests, long: FUZZ_EXAMPLES (10000) random cases per property (CI runs a fixed-seed sample)
	HYPOTHESIS_PROFILE=fuzz FUZZ_EXAMPLES=$(FUZZ_EXAMPLES) $(BIN)/pytest -q tests/unit/test_input_contract.py

conformance: venv wheels conformance-venv ## Our validator against SGLang 0.5.23's own argument checks on every corpus case (CI probes a fixed-seed sample, CORPUS_SAMPLE=8 per family and verdict, and what the confirmation record lacks), rebuilding tests/conformance/corpus-confirmed-0.5.23.json (commit it), the real preflight on every valid unit, and every committed schema against its release's own parser
	CORPUS_SAMPLE=all $(BIN)/pytest -q tests/conformance

conformance-release: venv wheels conformance-venv ## The conformance cases against SGLANG_VERSION's own resolver (a report in build/conformance-SGLANG_VERSION.md; exit 1 on MISSED), not part of make test yet
	$(BIN)/python tests/conformance/release_conformance.py --version $(SGLANG_VERSION) --report build/conformance-$(SGLANG_VERSION).md

# The releases whose launch rules are checked; 0.5.18 and 0.5.19 are schema-only by design (docs/sglang-releases.md).
CONFORMANCE_RELEASES ?= 0.5.20 0.5.21 0.5.22 0.5.23
conformance-all: venv wheels conformance-venv ## conformance-release for every rule-checked release (CONFORMANCE_RELEASES: 0.5.20-0.5.23; 0.5.18/0.5.19 are schema-only, no rules to check), build/conformance-<version>.md each; exit 1 if any has a MISSED case (2-6 min per release on the 2-core machine)
	@failed=""; for v in $(CONFORMANCE_RELEASES); do \
	  $(BIN)/python tests/conformance/release_conformance.py --version $$v --report build/conformance-$$v.md || failed="$$failed $$v"; \
	done; \
	if [ -n "$$failed" ]; then echo "conformance-all: MISSED cases (or no report) for:$$failed" >&2; exit 1; fi

conformance-targeted: venv conformance-venv ## The whole targeted set (tests/conformance/targeted-0.5.23.json, 944 configurations written from SGLang's source) against SGLang itself, long: about 7.5 minutes on the 2-core machine (CI probes a fixed-seed sample, TARGETED_SAMPLE=5 per area and verdict)
	TARGETED_SAMPLE=all $(BIN)/pytest -q tests/conformance/test_targeted.py

CONFORMANCE_GRIDS ?= all
conformance-grids: venv conformance-venv ## Every configuration of the grids in tests/conformance/grids.yaml (CONFORMANCE_GRIDS: all, or grid names) against SGLang itself on FUZZ_SGLANG_JOBS probes, long: about 76,100 configurations, about two hours on the 2-core machine; table in build/conformance-grids.md (CI probes a fixed-seed sample, GRIDS_SAMPLE=3 per grid)
	$(BIN)/python tests/conformance/differential.py $(foreach grid,$(CONFORMANCE_GRIDS),--grid $(grid)) --jobs $(FUZZ_SGLANG_JOBS) --report build/conformance-grids.md --sglang-answers build/conformance-grids-answers.jsonl

FUZZ_SGLANG_CASES ?= 10000
FUZZ_SGLANG_SEED ?= 0
FUZZ_SGLANG_JOBS ?= $(shell nproc)
fuzz-sglang: venv conformance-venv ## Differential fuzzing against SGLang itself, long: FUZZ_SGLANG_CASES (10000) generated cases on FUZZ_SGLANG_JOBS probes (every core), table in build/fuzz-sglang.md (CI runs a fixed-seed sample)
	$(BIN)/python tests/conformance/differential.py --cases $(FUZZ_SGLANG_CASES) --seed $(FUZZ_SGLANG_SEED) --jobs $(FUZZ_SGLANG_JOBS) --report build/fuzz-sglang.md --sglang-answers build/fuzz-sglang-answers.jsonl

simhost: ## Build the simulated Blackwell host images, Debian 12 and 13 (cached by content hash)
	tests/fixtures/simhost/ensure-docker.sh
	tests/fixtures/simhost/build-image.sh
	SIMHOST_SUITE=trixie tests/fixtures/simhost/build-image.sh

wheelhouse: venv ## Build the stand-in sglang wheel(s) into build/wheelhouse
	tests/fixtures/sglang_standin/build-wheelhouse.sh

provision-fixtures: venv simhost wheelhouse ## Fixtures of the provisioning roles and the gateways (bare host, signed apt repo, wheels: smg's lock, sglang-router)
	tests/fixtures/simhost/build-provision-fixtures.sh
	tests/fixtures/router/build-wheelhouse.sh $(GATEWAY_ROUTER_VERSION) $(GATEWAY_SMG_VERSION)

MOLECULE_JOBS ?= 2
molecule: venv conformance-venv simhost wheelhouse provision-fixtures ## Every molecule scenario, MOLECULE_JOBS (2) at a time (tests/molecule_lanes.py), without the extended cases; SGLang itself (.venv-conformance) judges every start of the stand-in
	$(BIN)/python tests/molecule_lanes.py --jobs $(MOLECULE_JOBS)

molecule-extended: venv conformance-venv simhost wheelhouse provision-fixtures ## Every molecule scenario with its extended cases too (BSA_MOLECULE_EXTENDED=1), long: about 40 minutes more than make molecule
	$(BIN)/python tests/molecule_lanes.py --jobs $(MOLECULE_JOBS) --extended

# make lint's hooks, then the pytest tiers, run beside the molecule lanes (tests/molecule_lanes.py --lint --pytest):
# alone, they leave about half of the 2-core machine idle.
PYTEST_TIERS := tests/unit tests/integration tests/conformance
test: deps simhost wheelhouse provision-fixtures ee-image ## Everything CI runs: lint, ansible-test sanity, unit, playbook, simulated-host, conformance and molecule tests, side by side
	$(BIN)/python tests/molecule_lanes.py --jobs $(MOLECULE_JOBS) --lint --sanity --pytest $(PYTEST_TIERS)

demo: venv simhost wheelhouse provision-fixtures ## Deploy to a local simulated Blackwell host, then restart with spec=auto
	tests/fixtures/simhost/demo.sh

demo-down: ## Remove the demo's simulated host
	tests/fixtures/simhost/simhost.sh down bsa-demo-01

bench: venv simhost wheelhouse provision-fixtures ## Every benchmark (bench/run_all.py) and one table: validation at scale, time to reject, restart overhead, no-op deploy, fleet rollout, model fan-out, the per-task floor
	$(BIN)/python bench/run_all.py $(BENCH_ARGS)

.PHONY: bench-counts
bench-counts: venv simhost wheelhouse provision-fixtures ## Issue 31's counts, the same on every machine: tasks and module executions of a no-op deploy.yml and of restart.yml on a demo-like simulated host, plan_host calls per host on 2 hosts (bench/task_counts.py)
	$(BIN)/python bench/task_counts.py $(BENCH_COUNTS_ARGS)

COLLECTION := collections/ansible_collections/blackwell/sglang
COLLECTION_VERSION = $(shell sed -n 's/^version: *//p' $(COLLECTION)/galaxy.yml)
dist: venv ## Build the blackwell.sglang collection tarball (plugins, roles with their locks, playbooks, docs/, the sample inventory as examples/inventory) into build/dist/
	$(BIN)/python tools/build_collection.py --out build/dist

ee: dist ## The execution environment's build context for AWX/AAP (ansible-builder create) in build/ee/context
	mkdir -p build/ee
	cp build/dist/blackwell-sglang-$(COLLECTION_VERSION).tar.gz build/ee/blackwell-sglang.tar.gz
	$(BIN)/ansible-builder create -f execution-environment.yml -c build/ee/context

# Offline: a debootstrapped Debian base, a wheelhouse downloaded beforehand, the tarball of `make ee`, the same pins
# (tests/fixtures/ee/build_image.py derives the local EE file from execution-environment.yml).
ee-image: ee ## The execution environment image for the tests, bsa-ee:<hash> (ansible-builder build, cached by content hash)
	tests/fixtures/simhost/ensure-docker.sh
	$(BIN)/python tests/fixtures/ee/build_image.py

changelog: venv ## Release the changelog fragments as the galaxy.yml version (antsibull-changelog): CHANGELOG.rst; refuses a version released already (make release)
	$(BIN)/python tools/release.py --changelog

release: venv ## Cut release VERSION=X.Y.Z: set galaxy.yml's version, release the changelog fragments as X.Y.Z; refuses a released or lower version
	@test -n "$(VERSION)" || { echo "make release VERSION=X.Y.Z (galaxy.yml says $(COLLECTION_VERSION))" >&2; exit 2; }
	$(BIN)/python tools/release.py $(VERSION)

# ansible-test sanity on the built tarball, unpacked (what ships, roles and playbooks included), from .venv-sanity
# (ansible-core, and the requirements ansible-test installs there). ansible-test downloads its pip bootstrap script
# from its CI file server; tools/ansible_test_get_pip.py stands in for it where only the package index is reachable.
SANITY_VENV ?= .venv-sanity
SANITY_ARGS ?= --skip-test pslint --skip-test shellcheck
SANITY_GET_PIP := $(HOME)/.ansible/test/cache/get_pip_24_2.py
$(SANITY_VENV)/.stamp: requirements.txt
	$(PYTHON) -m venv $(SANITY_VENV)
	$(SANITY_VENV)/bin/pip install --quiet "$$(grep '^ansible-core==' requirements.txt)"
	touch $@

sanity-venv: $(SANITY_VENV)/.stamp ## The virtualenv of make sanity (.venv-sanity: ansible-core at requirements.txt's pin)

sanity: $(SANITY_VENV)/.stamp dist ## ansible-test sanity (every test but pslint and shellcheck) on the collection tarball
	test -f $(SANITY_GET_PIP) || install -D -m 0644 tools/ansible_test_get_pip.py $(SANITY_GET_PIP)
	# Unpacked outside the repository: inside it, ansible-test would take git's file list, which ignores build/.
	dir=$$(mktemp -d) && trap 'rm -rf "$$dir"' EXIT && mkdir -p "$$dir/ansible_collections/blackwell/sglang" && \
	  tar -xzf build/dist/blackwell-sglang-$(COLLECTION_VERSION).tar.gz -C "$$dir/ansible_collections/blackwell/sglang" && \
	  cd "$$dir/ansible_collections/blackwell/sglang" && env -u ANSIBLE_CONFIG PATH=$(CURDIR)/$(SANITY_VENV)/bin:$$PATH \
	  ansible-test sanity --local --python 3.11 --requirements $(SANITY_ARGS)

clean: ## Remove virtualenvs, caches and build output
	rm -rf $(VENV) .venv-conformance $(SANITY_VENV) .cache build
