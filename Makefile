# Two commands for a fresh clone: `make demo` and `make test`. Everything they need is set up here.
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
COLLECTIONS := $(CURDIR)/$(VENV)/collections
export ANSIBLE_COLLECTIONS_PATH := $(COLLECTIONS)

# ansible-core 2.21 needs Python 3.12+: its venv is built only where a working python3.12 exists
# (pyenv shims that refuse to run do not count). Override with PY312=/path/to/python3.12.
CORE_NEXT := ansible-core==2.21.5
VENV_NEXT := .venv-2.21
ifeq ($(origin PY312),undefined)
PY312 := $(shell p=$$(command -v python3.12) && "$$p" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 12))' 2>/dev/null && echo "$$p")
endif
# The oldest kubernetes client that requirements.txt allows (python-legacy models).
KUBE_OLDEST := kubernetes==35.0.0
VENV_K35 := .venv-k35

.PHONY: all setup demo demo-check test unit sim-test integration lint sanity ansible-lint client-ends \
	core-2.21 etcd-installed shellcheck-installed clean bench bench-smoke molecule molecule-default chaos chaos-smoke

all: test

# pytest exits 5 when it collected nothing (no test files yet, or -k matched none): print that
# and go on, so an empty suite neither fails CI nor passes silently. A missing folder is the same.
# $(call pytest,PYTHON,LABEL,PATH,EXTRA PYTEST ARGS)
define pytest
	@if [ ! -d $(3) ]; then echo "$(2): $(3) does not exist yet: no tests run"; exit 0; fi; \
	echo "$(1) -m pytest -q $(3) $(4)"; \
	$(1) -m pytest -q $(3) $(4); rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "$(2): no tests collected in $(3) $(4)"; rc=0; fi; exit $$rc
endef

$(BIN)/.installed: requirements.txt requirements-test.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -r requirements-test.txt
	mkdir -p $(COLLECTIONS)/ansible_collections/cloudstack
	ln -sfn $(CURDIR) $(COLLECTIONS)/ansible_collections/cloudstack/cks
	touch $@

# Debian's etcd-server: cks-sim runs a real etcd member per control / etcd node.
# etcdctl runs inside the sim's etcd pods (pods/exec); kubectl drives the sim in its tests
# (Debian's kubernetes-client only where no kubectl is installed: it would replace a newer one).
etcd-installed:
	@command -v etcd >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq etcd-server etcd-client >/dev/null; }
	@command -v etcdctl >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq etcd-client >/dev/null; }
	@command -v kubectl >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq kubernetes-client >/dev/null; }

# ansible-test's shellcheck sanity test is skipped without it.
shellcheck-installed:
	@command -v shellcheck >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq shellcheck >/dev/null; }

setup: $(BIN)/.installed etcd-installed

demo: setup
	$(BIN)/python tests/demo.py

# The demo's rollout as a dry run (--check): the plan and what would block each drain; nothing changes.
demo-check: setup
	$(BIN)/python tests/demo.py --check

# Rollout benchmarks against cks-sim: bench/results/latest.json, latest.md, timeline.svg.
bench: setup
	$(BIN)/python bench/run.py

# The same machinery, tiny (what tests/integration/test_bench_smoke.py checks).
bench-smoke: setup
	$(BIN)/python bench/run.py --smoke --out out/bench-smoke

test: setup unit sim-test integration lint client-ends core-2.21 molecule chaos-smoke

unit: setup
	$(call pytest,$(BIN)/python,unit,tests/unit)

sim-test: setup
	$(call pytest,$(BIN)/python,sim-test,tests/sim/tests)

# Each test starts its own cks-sim and waits on it and on ansible-playbook much of the time:
# a few workers at once (one test file each) finish the folder in about half the time on 2 cores
# (4: the 211 tests in 11 minutes on an idle 2-core machine).
INTEGRATION_JOBS ?= 4
integration: setup
	$(call pytest,$(BIN)/python,integration,tests/integration,-n $(INTEGRATION_JOBS) --dist loadfile)

# ansible-test sanity --local on the venv's Python (3.11 here), ansible-lint, ruff and mypy on
# plugins/. All run even when one fails, so one pass shows every finding.
lint: setup shellcheck-installed
	@rc=0; \
	echo "$(BIN)/ruff check plugins"; $(BIN)/ruff check plugins || rc=1; \
	echo "mypy -p ansible_collections.cloudstack.cks.plugins"; \
	(cd $(COLLECTIONS) && $(CURDIR)/$(BIN)/mypy --config-file $(CURDIR)/mypy.ini -p ansible_collections.cloudstack.cks.plugins) || rc=1; \
	$(BIN)/python tests/ci/sanity.py || rc=1; \
	echo "$(BIN)/ansible-lint --profile production"; \
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/ansible-lint --profile production || rc=1; \
	exit $$rc

sanity: setup shellcheck-installed
	$(BIN)/python tests/ci/sanity.py

ansible-lint: setup
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/ansible-lint --profile production

# Every Molecule scenario (extensions/molecule: default, resume, cancel, external_etcd), each
# against its own cks-sim on localhost.
molecule: setup
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/molecule test --all

# One scenario alone (about a minute): the full rollout, verify and the idempotence rerun.
molecule-default: setup
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/molecule test -s default

# Kill anywhere: N seeded trials, each SIGKILLs a rollout at a random moment and reruns it
# (`make chaos N=50 SEED=2`); out/chaos/trials.jsonl and summary.json. chaos-smoke: 2 trials.
N ?= 3
SEED ?= 1
chaos: setup
	$(BIN)/python tests/chaos/run.py --trials $(N) --seed $(SEED) --out out/chaos

chaos-smoke: setup
	$(call pytest,$(BIN)/python,chaos-smoke,tests/chaos)

# The kube tests again with the oldest allowed kubernetes client (its requests go out through
# python-legacy's ApiClient.call_api, 37.x's through param_serialize).
$(VENV_K35)/.installed: requirements-test.txt
	$(PYTHON) -m venv $(VENV_K35)
	$(VENV_K35)/bin/pip install -q --upgrade pip
	sed 's/^kubernetes==.*/$(KUBE_OLDEST)/' requirements-test.txt > $(VENV_K35)/requirements.txt
	$(VENV_K35)/bin/pip install -q -r $(VENV_K35)/requirements.txt
	touch $@

client-ends: setup $(VENV_K35)/.installed
	$(call pytest,$(VENV_K35)/bin/python,client-ends,tests/sim/tests,-k kube)
	$(call pytest,$(VENV_K35)/bin/python,client-ends,tests/unit,-k kube)
	$(call pytest,$(VENV_K35)/bin/python,client-ends,tests/integration/test_clients_kube.py)

# Unit tests and sanity on ansible-core 2.21 (Python 3.12), where a python3.12 exists.
$(VENV_NEXT)/.installed: requirements-test.txt
	$(PY312) -m venv $(VENV_NEXT)
	$(VENV_NEXT)/bin/pip install -q --upgrade pip
	sed 's/^ansible-core==.*/$(CORE_NEXT)/' requirements-test.txt > $(VENV_NEXT)/requirements.txt
	$(VENV_NEXT)/bin/pip install -q -r $(VENV_NEXT)/requirements.txt
	touch $@

ifeq ($(strip $(PY312)),)
core-2.21:
	@echo "core-2.21: skipped: no working python3.12 on PATH, so no unit tests or sanity on $(CORE_NEXT) (set PY312=/path/to/python3.12 to run them)"
else
core-2.21: setup $(VENV_NEXT)/.installed shellcheck-installed
	$(call pytest,$(VENV_NEXT)/bin/python,core-2.21,tests/unit)
	$(VENV_NEXT)/bin/python tests/ci/sanity.py
endif

clean:
	rm -rf $(VENV) $(VENV_K35) $(VENV_NEXT) tests/output .pytest_cache
