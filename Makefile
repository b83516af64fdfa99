# Two commands for a fresh clone: `make demo` and `make test`. Everything they need is set up here.
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
COLLECTIONS := $(CURDIR)/$(VENV)/collections
export ANSIBLE_COLLECTIONS_PATH := $(COLLECTIONS)

# The oldest kubernetes client that requirements.txt allows (python-legacy models).
KUBE_OLDEST := kubernetes==35.0.0
VENV_K35 := .venv-k35

.PHONY: all setup demo demo-check test unit sim-test integration lint dead-code sanity ansible-lint docs-lint client-ends \
	matrix test-matrix ee-context etcd-installed shellcheck-installed clean bench bench-smoke molecule molecule-default chaos chaos-smoke chaos-transient

all: test

# A suite that collects nothing fails (pytest's exit 5), as does a folder or file that is missing:
# every suite has tests now, and one that runs none has lost them. -rs prints each skip with its
# reason: under `make test` (CKS_TESTS_NEED_TOOLS=1) a missing etcd, etcdctl, kubectl or Chromium
# fails the run naming what to install (tests/sim/cks_sim/tools.py), so what is left to skip is seen.
# $(call pytest,PYTHON,LABEL,PATH,EXTRA PYTEST ARGS)
define pytest
	@if [ ! -e $(3) ]; then echo "$(2): $(3) does not exist: no tests to run"; exit 1; fi; \
	echo "$(1) -m pytest -q -rs $(3) $(4)"; \
	$(1) -m pytest -q -rs $(3) $(4); rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "$(2): no tests collected in $(3) $(4): a suite that runs nothing fails"; fi; exit $$rc
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

# A real Kubernetes control plane for the real tier (tests/real) and make sim-diff: kube-apiserver,
# kube-controller-manager and kube-scheduler of the release tests/kube-plane/go.mod pins, one binary
# built from Go modules (the module proxy; nothing else is downloaded). Go's build cache makes a
# rebuild seconds; the binary is remade only when the module changes. `make demo` needs none of it.
KUBE_PLANE_DIR := tests/kube-plane
KUBE_PLANE := $(KUBE_PLANE_DIR)/bin/kube-plane
KUBE_RELEASE := $(shell sed -n 's|^\tk8s.io/kubernetes \(v[0-9.]*\)$$|\1|p' $(KUBE_PLANE_DIR)/go.mod)
KUBE_MINOR := $(word 2,$(subst ., ,$(KUBE_RELEASE)))
KUBE_VERSION_X := $(foreach pkg,k8s.io/component-base/version k8s.io/client-go/pkg/version,\
	-X $(pkg).gitVersion=$(KUBE_RELEASE) -X $(pkg).gitMajor=1 -X $(pkg).gitMinor=$(KUBE_MINOR) \
	-X $(pkg).gitTreeState=clean -X $(pkg).buildDate=1970-01-01T00:00:00Z)

.PHONY: go-installed kube-plane demo-real real
go-installed:
	@command -v go >/dev/null || { echo "make test needs Go 1.25 or newer on PATH to build the real Kubernetes control plane" \
		"(tests/kube-plane): install it from https://go.dev/dl/ (or your distribution's golang package) and run make test again"; exit 1; }

$(KUBE_PLANE): $(KUBE_PLANE_DIR)/go.mod $(KUBE_PLANE_DIR)/go.sum $(KUBE_PLANE_DIR)/main.go
	cd $(KUBE_PLANE_DIR) && go build -trimpath -ldflags "-s -w $(KUBE_VERSION_X)" -o bin/kube-plane .

kube-plane: go-installed $(KUBE_PLANE)

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

# Go first: without it make test stops at once (go-installed says what to install), before any suite.
test: go-installed setup kube-plane unit sim-test integration real lint docs client-ends test-matrix molecule chaos-smoke sim-diff fault-sweep

# Under `make test` a test may not skip for a missing program: it fails naming what to install.
test: export CKS_TESTS_NEED_TOOLS := 1

unit: setup
	$(call pytest,$(BIN)/python,unit,tests/unit)

# cks-sim's Kubernetes API held to a real one (tests/sim_diff): every request kind the collection's
# rollouts make (tests/sim_diff/recorded.json) and its edge cases, replayed against both from the same
# starting objects; out/sim-diff/report.json. Fails on a difference neither fixed nor explained.
.PHONY: sim-diff sim-diff-record
sim-diff: setup kube-plane
	cd tests && ../$(BIN)/python -m sim_diff.run --out $(CURDIR)/out/sim-diff

# Record the rollouts' requests again (CKS_SIM_KUBE_RECORD) into tests/sim_diff/recorded.json.
sim-diff-record: setup
	cd tests && ../$(BIN)/python -m sim_diff.record

# The simulator's tests mostly wait on its clock: a few workers (one test file each) halve the stage.
SIM_JOBS ?= 4
sim-test: setup
	$(call pytest,$(BIN)/python,sim-test,tests/sim/tests,-n $(SIM_JOBS) --dist loadfile)

# Each test starts its own cks-sim and waits on it and on ansible-playbook much of the time:
# a few workers at once (one test file each) finish the folder in about half the time on 2 cores
# (4: the 211 tests in 11 minutes on an idle 2-core machine).
INTEGRATION_JOBS ?= 4
integration: setup chromium-installed
	$(call pytest,$(BIN)/python,integration,tests/integration,-n $(INTEGRATION_JOBS) --dist loadfile)

# The real tier: rollouts against cks-sim serve --kube real (a real kube-apiserver, controllers and
# scheduler, tests/kube-plane, beside cks-sim's cloud; CKS_SIM_KUBE=real makes every sim a test starts
# one). tests/real's own tests, and these of the integration suite, unchanged: a control-node rollout
# with stacked etcd, a killed run resumed, the dry run, the Events story. Each test starts its own
# control plane.
REAL_JOBS ?= 2
REAL_SUITE := \
	tests/integration/test_node_cycle_quorum.py::test_control_nodes_one_at_a_time_on_a_stacked_control_plane \
	tests/integration/test_rollout_crash.py::test_killed_controller_then_rerun_after_the_lease_expired_converges \
	tests/integration/test_rollout_dry_run.py::test_check_prints_the_plan_and_drain_blockers_and_changes_nothing \
	tests/integration/test_rollout_events.py::test_describe_node_tells_the_rollouts_story
real: setup kube-plane
	CKS_SIM_KUBE=real $(BIN)/python -m pytest -q -n $(REAL_JOBS) --dist loadfile tests/real $(REAL_SUITE)

# The demo's rollout against a real Kubernetes control plane (make demo needs no Go; this does).
demo-real: setup kube-plane
	$(BIN)/python tests/demo.py --kube real

# ansible-test sanity --local on the venv's Python (3.11 here), ansible-lint, ruff and mypy on
# plugins/, mypy on cks-sim (tests/sim/cks_sim), and the docs lint. All run even when one fails,
# so one pass shows every finding.
lint: setup shellcheck-installed
	@rc=0; \
	echo "$(BIN)/ruff check plugins"; $(BIN)/ruff check plugins || rc=1; \
	echo "mypy -p ansible_collections.cloudstack.cks.plugins"; \
	(cd $(COLLECTIONS) && $(CURDIR)/$(BIN)/mypy --config-file $(CURDIR)/mypy.ini -p ansible_collections.cloudstack.cks.plugins) || rc=1; \
	echo "mypy tests/sim/cks_sim"; $(BIN)/mypy --config-file mypy.ini tests/sim/cks_sim || rc=1; \
	$(BIN)/python tests/ci/sanity.py || rc=1; \
	echo "$(BIN)/ansible-lint --profile production"; \
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/ansible-lint --profile production || rc=1; \
	echo "$(BIN)/vulture (dead code)"; $(BIN)/vulture $(VULTURE_ARGS) || rc=1; \
	$(MAKE) --no-print-directory docs-lint || rc=1; \
	exit $$rc

# Dead code in the collection, cks-sim, the tests and the benchmarks (a name used only by a test counts as
# used). The allow-list, the names read by name at run time: Ansible's plugin entry points
# (DOCUMENTATION ... v2_*, TRANSFERS_FILES, is_conditional of v2_playbook_on_task_start), pytest's
# (test_*, pytest_*, pytestmark, @pytest.fixture), cks-sim's @handler commands and HANDLER_MODULES (imported
# to register them), HTMLParser's and BaseHTTPRequestHandler's hooks, requests' Session.trust_env, a type named in a cast's string, and
# the members of a table kept whole (a job status, an exec channel, the Event reasons, an old error text,
# an exec request field).
VULTURE_ARGS := plugins tests bench --min-confidence 60 --exclude tests/docs/conf.py \
	--ignore-names 'DOCUMENTATION,EXAMPLES,RETURN,FilterModule,ActionModule,CallbackModule,InventoryModule,ModuleDocFragment,NAME,CALLBACK_*,v2_*,TRANSFERS_FILES,is_conditional,test_*,pytest_*,pytestmark,HANDLER_MODULES,handle_starttag,handle_data,handle_endtag,log_request,trust_env,CertificateIssuerPublicKeyTypes,JOB_FAILED,RESIZE,PUT_BACK,LEFT_CORDONED,LEGACY_LIMIT_TEXT,tty,do_GET,log_message,close_connection' \
	--ignore-decorators '@handler,@pytest.fixture'
dead-code: setup
	$(BIN)/vulture $(VULTURE_ARGS)

# The module, plugin and role docs and docs/docsite (extra docs, links) as a collection docsite
# would render them.
docs-lint: setup
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/antsibull-docs lint-collection-docs --plugin-docs .

# The collection docsite as docs.ansible.com renders one: antsibull-docs writes the module, plugin,
# role and extra-docs pages (docs/docsite) as RST into out/docs-rst, Sphinx renders them with the
# Ansible theme into out/docs (tests/docs/conf.py; every warning an error), then tests/docs opens
# the pages in headless Chromium. Open out/docs/index.html in a browser to read it.
.PHONY: docs chromium-installed
DOCS_RST := out/docs-rst
docs: setup chromium-installed
	rm -rf $(DOCS_RST) out/docs
	mkdir -p $(DOCS_RST) && chmod 700 $(DOCS_RST)
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/antsibull-docs collection --use-current --squash-hierarchy \
		--fail-on-error --cleanup everything --dest-dir $(DOCS_RST) cloudstack.cks
	$(BIN)/sphinx-build -b html -c tests/docs -W --keep-going -q $(DOCS_RST) out/docs
	$(call pytest,$(BIN)/python,docs,tests/docs)

# Debian's chromium for the docsite test (headless; no WebDriver needed: the test reads the DOM
# Chromium built with --dump-dom).
chromium-installed:
	@command -v chromium >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; }

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

# One 503 and one dropped connection on the first request of every kind a rollout, a dry run, status,
# cancel and unlock send (recorded from a run of each): every run must complete in one go.
# out/fault-sweep/report.json; docs/docsite/rst/reliability.rst.
fault-sweep: setup
	$(BIN)/python tests/chaos/fault_sweep.py --out out/fault-sweep

# Rollouts of the four workers under 5% transient faults on both APIs, never rerun:
# N with 5xx answers, then N with dropped connections, each run with its own simulator seed.
chaos-transient: setup
	$(BIN)/python tests/chaos/transient.py --runs $(N) --mode 5xx --rate 0.05 --seed 1000 --out out/transient-5xx
	$(BIN)/python tests/chaos/transient.py --runs $(N) --mode drop --rate 0.05 --seed 2000 --out out/transient-drop

# The kube tests again with the oldest allowed kubernetes client (its requests go out through
# python-legacy's ApiClient.call_api, 37.x's through param_serialize), and the watches: a batch's
# shared node watch is stopped by shutting down the socket under the client's streaming response.
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
	$(call pytest,$(VENV_K35)/bin/python,client-ends,tests/integration/test_kube_watch.py)

# The support matrix (tests/matrix.txt): unit tests on every ansible-core the collection claims,
# each with its own Python (found on PATH or in pyenv's versions), sanity where the list says.
# Each cell's venv (.venv-core-X.Y) is built once. `make test` leaves out the sanity of the cell
# that is the main .venv: `make lint` runs it.
matrix: setup shellcheck-installed
	$(BIN)/python tests/ci/matrix.py

test-matrix: setup shellcheck-installed
	$(BIN)/python tests/ci/matrix.py --main-sanity-elsewhere

# The execution environment's build context (extensions/awx/execution-environment.yml), without
# building an image: out/ee/Containerfile and _build/. tests/integration/test_execution_environment.py
# checks what it installs.
ee-context: setup
	$(BIN)/ansible-builder create -f extensions/awx/execution-environment.yml -c out/ee --output-filename Containerfile

clean:
	rm -rf $(VENV) $(VENV_K35) .venv-core-* tests/output .pytest_cache out/ee
