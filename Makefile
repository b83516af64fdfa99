# Two commands for a fresh clone: `make demo` and `make test`. Everything they need is set up here.
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
COLLECTIONS := $(CURDIR)/$(VENV)/collections
export ANSIBLE_COLLECTIONS_PATH := $(COLLECTIONS)

.PHONY: all setup demo test unit sim-test integration lint clean

all: test

$(BIN)/.installed: requirements.txt requirements-test.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -r requirements-test.txt
	mkdir -p $(COLLECTIONS)/ansible_collections/cloudstack
	ln -sfn $(CURDIR) $(COLLECTIONS)/ansible_collections/cloudstack/cks
	touch $@

# Debian's etcd-server: cks-sim runs a real etcd member per control / etcd node.
etcd-installed:
	@command -v etcd >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq etcd-server etcd-client >/dev/null; }

setup: $(BIN)/.installed etcd-installed

demo: setup
	$(BIN)/python tests/demo.py

test: setup unit sim-test integration

unit: setup
	$(BIN)/python -m pytest -q tests/unit

sim-test: setup
	$(BIN)/python -m pytest -q tests/sim/tests

integration: setup
	$(BIN)/python -m pytest -q tests/integration

clean:
	rm -rf $(VENV) tests/output .pytest_cache
