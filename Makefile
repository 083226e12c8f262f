# gpufleet: one entry point for set-up, the main job and the tests.
# The virtual environment lives outside the clone, keyed by the hash of requirements-dev.txt, so a second run reuses it.
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
PYTHON ?= python3.11
CACHE ?= $(HOME)/.cache/gpufleet
REQ_HASH := $(shell sha256sum requirements-dev.txt | cut -c1-12)
VENV ?= $(CACHE)/venv-$(REQ_HASH)
BIN := $(VENV)/bin
export PATH := $(BIN):$(PATH)
export ANSIBLE_CONFIG := $(CURDIR)/ansible.cfg
MODULES := $(sort $(basename $(notdir $(wildcard plugins/modules/*.py))))
FILTERS := $(sort $(basename $(notdir $(wildcard plugins/filter/*.yml))))
TESTS := $(sort $(basename $(notdir $(wildcard plugins/test/*.yml))))

.PHONY: setup plan wave fleet test lint unit bench-smoke bench-scale bench-wave bench-hosts lab-tests lab-tests-a lab-tests-b lab-tests-fleet lab-tests-skip sanity docs docs-gen bench freeze clean-venv venv-path lab-up lab-down lab-reset \
	lab-status molecule

setup: $(VENV)/.installed

# The venv path carries the hash of requirements-dev.txt, so a stamp that exists is already up to date.
$(VENV)/.installed:
	@echo "== gpufleet: creating $(VENV) with $(PYTHON)"
	@command -v $(PYTHON) >/dev/null || { echo "error: $(PYTHON) not found; install Python 3.11 (ansible 12 needs it)"; exit 1; }
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -r requirements-dev.txt
	@touch $@

# The offline plan of the example GPU cell (inventories/example, no host contacted): skew check, control-plane
# path, per-pool kubelet plan, support calendar, baseline validation and the wave plan.
plan: setup
	$(BIN)/ansible-playbook playbooks/plan.yml -i inventories/example/hosts.yml $(ARGS)

# The main job against the built-in lab: upgrade the lab cell from its `from` to its `to` minor, end to end.
# `make wave ARGS="-e ..."` passes extra options; `bin/lab reset` starts the cell over on `from`.
wave: setup lab-up
	$(BIN)/ansible-playbook playbooks/upgrade_wave.yml -i inventories/lab $(ARGS)

# The fleet run on the lab: the three fleet cells up (lab/lab.yml `fleet`: small canary, inference and training
# cells), the lab's fleet (`bin/lab fleet`: one ring each, in that order), then playbooks/fleet.yml; its ledger is
# out/fleet/lab/ledger.json and the same command resumes a halted or interrupted fleet.
fleet: setup
	bash lab/build/host-setup.sh
	bin/lab up --fleet
	@mkdir -p out
	bin/lab fleet > out/lab-fleet.yml
	$(BIN)/ansible-playbook playbooks/fleet.yml -e @out/lab-fleet.yml $(ARGS)

# Every test, each phase timed by bin/phase (CI prints the table, with how busy the machine was), in two rounds of
# phases at once (bin/parallel), each lab stream on lab cells of its own (lab/lab.yml `cells`):
#   round 1  lab-tests-a on `lab`: the wave story, then on the cell it leaves upgraded the jobs in the
#            execution-environment image and the etcd window, then on the reset cell the etcd_snapshot Molecule
#            scenario (its platform's name is its own, so it runs beside the scenarios on lab-b) and the benchmarks
#            at small sizes (bench-smoke: figures printed, not gates; they share the machine with the other stream,
#            so CI's figures are not docs/measurements.md's); `lab` is reset after them, which takes it down (an
#            idle cell of three apiservers and three etcd members costs about a sixth of a core, and round 2 is
#            CPU-bound; `make wave` brings it up fresh), and the three fleet cells come up for round 2 (this stream
#            ends before lab-tests-b, so their start-up is off round 2's critical path);
#            lab-tests-b on `lab-b`: every other lab test, then the other Molecule scenarios that use the cluster
#            (on a reset lab-b, which goes down after them); beside them the execution-environment image.
#   round 2  lab-fleet on the three fleet cells (up for it, down after): the three-ring fleet run, which mostly
#            waits on its cells' waves and soaks; beside it, each a stream of its own, the lab-free checks (lint,
#            docs, sanity, unit), the skip-level cycle on its own cell (up for it, down after), and the Molecule
#            scenario that needs no cluster.
# Round 2 runs also after a failed round 1, so every result is known. Measured on a 2-core machine
# (docs/measurements.md, "CI"): this split was the fastest of the five tried. Putting Molecule beside the fleet instead
# kept round 2 96 % busy and took longer; every phase in one round kept the machine 98 % busy and took 2,537 s against
# 1,957 s (tried again on 670010c, with ansible-core's 10 ms poll: after 1,837 s at 99 % busy no lab stream had
# finished, the story took over 1,700 s against 924 s, and each ansible-playbook process 0.25 CPU-s against 0.17-0.18 -
# this machine does the same work with about 45 % more CPU when both cores are held); moving the upgrading Molecule
# scenarios and the lab-free benchmarks into round 2's last 400 s, where only the fleet runs, took 2,586 s against 2,409
# s (b30935e: round 1 36 s shorter, round 2 214 s longer; the same work cost 20 % more CPU, on a busier machine or a
# slower afternoon: run-to-run figures here vary by 20-30 %). The CPU the tests take is the limit, more than the layout.
PHASE := bin/phase
M := $(MAKE) --no-print-directory
LAB_B := GPUFLEET_LAB_CELL=lab-b
LAB_SKIP := GPUFLEET_LAB_CELL=skip-level
MOLECULE_A := etcd_snapshot
# The phases that only burn CPU (lint, sanity, unit tests, image builds, the cluster-free Molecule scenario) run
# niced beside the lab cells, whose soaks and gates measure latency: a warm CI run's fleet cell failed its
# control-plane soak (write p99 3.8 s against 0.85 s) while the unit tests held both cores at 99 %.
BATCH := nice -n 10
# `lab` starts from a reset here, so the story's fixture, its first user, takes it as it is (GPUFLEET_LAB_FRESH: the
# fixture resets any other cell, or this one when run on its own).
test: setup
	@$(PHASE) lab-up bash -c 'bash lab/build/host-setup.sh && bin/lab reset && bin/lab up'
	@$(PHASE) lab-up-b env $(LAB_B) bin/lab up
	@rc=0; bin/parallel "lab-tests-a=GPUFLEET_LAB_FRESH=lab $(M) lab-tests-a && bin/phase molecule-a $(M) molecule \
	      MOLECULE_ONLY=$(MOLECULE_A) && $(M) bench-smoke; rc=\$$?; bin/lab reset >/dev/null; \
	      bin/phase fleet-up bin/lab up --fleet >/dev/null || rc=1; exit \$$rc" \
	    "lab-tests-b=$(M) lab-tests-b && bin/phase molecule env $(LAB_B) $(M) molecule MOLECULE_NO_CLUSTER= \
	      MOLECULE_SKIP=$(MOLECULE_A); rc=\$$?; $(LAB_B) bin/lab down >/dev/null; exit \$$rc" \
	    "ee-image=$(BATCH) bin/lab ee" || rc=$$?; \
	  bin/parallel "lab-fleet=$(M) lab-tests-fleet; rc=\$$?; bin/lab down --fleet >/dev/null; exit \$$rc" \
	    "checks=bin/phase lint $(BATCH) $(M) lint && bin/phase docs $(BATCH) $(M) docs \
	      && bin/phase sanity $(BATCH) $(M) sanity && bin/phase unit $(BATCH) $(M) unit" \
	    "skip-level=$(M) lab-tests-skip; rc=\$$?; $(LAB_SKIP) bin/lab down >/dev/null; exit \$$rc" \
	    "molecule-no-cluster=BIN=$(BIN) $(BATCH) tests/molecule-run --parallel 1 $(MOLECULE_NO_CLUSTER)" || rc=$$?; \
	  bin/lab down >/dev/null || rc=1; $(LAB_B) bin/lab down >/dev/null || rc=1; \
	  bin/lab down --fleet >/dev/null || rc=1; $(LAB_SKIP) bin/lab down >/dev/null || rc=1; exit $$rc

# The benchmarks at small sizes on the running lab cell (make test runs it after the story): that they still run,
# and their figures printed. The figures to compare are from `make bench`, `bench-scale` and `bench-hosts` run on a
# quiet machine (docs/measurements.md).
bench-smoke: setup
	@$(PHASE) bench $(M) bench
	@$(PHASE) bench-scale $(M) bench-scale SCALE_ARGS="--sizes 8,16 --pods-per-node 3"
	@$(PHASE) bench-hosts $(M) bench-hosts HOSTS_ARGS="--sizes 1,4 --forks 0 --out out/bench/scale-hosts-ci.json"

lint: setup
	$(BIN)/ruff check plugins tests benchmarks lab bin/docs-check bin/roles-readme
	$(BIN)/mypy
	$(BIN)/yamllint -s .
	$(BIN)/ansible-lint --profile production

docs: setup
	@$(BIN)/python bin/docs-check $(MODULES:%=module:%) $(FILTERS:%=filter:%) $(TESTS:%=test:%) callback:change_record

# Lab-free tests (unit, module, integration, Galaxy build, fresh-machine set-up), in parallel on every core.
unit: setup
	$(BIN)/pytest -q -n auto -m "not lab" tests

# Tests against the running lab, on three sets of cells at once (each one test at a time): lab-tests-a on the lab
# cell (the wave story, then the jobs in the execution-environment image on the upgraded cell the story leaves),
# lab-tests-b on its twin lab-b (every other lab test), lab-fleet on the fleet cells. They stay up after;
# `bin/lab down --all` stops every cell.
LAB_TESTS_A := tests/lab/test_upgrade_wave.py tests/lab/test_awx_runner.py
LAB_TESTS_FLEET := tests/lab/test_fleet.py
LAB_TESTS_SKIP := tests/lab/test_skip_level.py
# the etcd window leaves `lab`'s etcd on its newer release, which only `bin/lab reset` undoes: after the story, before
# the reset for Molecule
LAB_TESTS_LAST := tests/lab/test_etcd_upgrade.py
lab-tests: setup lab-up
	@bin/parallel "lab-tests-a=$(M) lab-tests-a" "lab-tests-b=$(M) lab-tests-b" "lab-fleet=$(M) lab-tests-fleet" \
	  "lab-skip=$(M) lab-tests-skip"

lab-tests-a: setup
	bin/lab up
	$(BIN)/pytest -q --durations=12 -m lab $(LAB_TESTS_A)
	env -u GPUFLEET_LAB_FRESH $(BIN)/pytest -q --durations=3 -m lab $(LAB_TESTS_LAST)

lab-tests-b: setup
	$(LAB_B) bin/lab up
	$(LAB_B) $(BIN)/pytest -q --durations=12 -m lab tests $(LAB_TESTS_A:%=--ignore=%) $(LAB_TESTS_FLEET:%=--ignore=%) \
	  $(LAB_TESTS_SKIP:%=--ignore=%) $(LAB_TESTS_LAST:%=--ignore=%)

# The fleet run on the three fleet cells (each reset to `from` first when it is not there); make test runs it beside
# the other lab streams, on cells of its own.
lab-tests-fleet: setup
	bin/lab up --fleet
	$(BIN)/pytest -q -s --durations=6 -m lab $(LAB_TESTS_FLEET)

# The skip-level cycle on its own small cell (from -> to -> later[0], one run per hop; reset to `from` first when
# it is not there).
lab-tests-skip: setup
	$(LAB_SKIP) bin/lab up
	$(BIN)/pytest -q -s --durations=6 -m lab $(LAB_TESTS_SKIP)

# ansible-test sanity on the collection as Galaxy installs it (tests/sanity/run).
sanity: setup
	tests/sanity/run

# docs/variables.md from the variable schema (plugins/module_utils/variables.py), and each roles/ROLE/README.md from
# its meta/argument_specs.yml (bin/roles-readme); unit tests check that both are current.
docs-gen: setup
	PYTHONPATH=collections $(BIN)/python -c 'from ansible_collections.gpufleet.upgrade.plugins.module_utils import \
	  variables; open("docs/variables.md", "w").write(variables.markdown())'
	$(BIN)/python bin/roles-readme

bench: setup
	$(BIN)/python benchmarks/plan_waves.py
	$(BIN)/python benchmarks/plan_fleet.py
	$(BIN)/python benchmarks/scan_manifests.py
	$(BIN)/python benchmarks/scan_audit.py

# The node ledger, gang and drain modules on a lab cell grown to 48, 200 and 500 API-only GPU nodes (needs the lab:
# it brings it up; about 10 minutes on 2 cores). Figures printed and written to out/bench/scale-kube.json.
bench-scale: lab-up
	$(BIN)/python benchmarks/scale_kube.py $(SCALE_ARGS)

# The wave benchmark: gpufleet's upgrade of the lab cell (playbooks/upgrade_wave.yml) against the peer
# (benchmarks/peer_upgrade.yml: every node one at a time with kubectl drain, no gang handling), each from a reset
# lab (it resets and brings the lab up itself, twice), against the lower bound from gpufleet's plan and measured
# stage times (about 15 minutes on 2 cores).
# Figures printed and written to out/bench/bench-wave.json; BENCH_WAVE_ARGS="--checkpoint-interval 600".
bench-wave: setup
	$(BIN)/python benchmarks/bench_wave.py $(BENCH_WAVE_ARGS)

# Host work at wave scale: one wave's host work (benchmarks/host_wave.yml) on 1 to 64 lab host containers over
# SSH, with forks = 20 and forks as wide as the wave. It needs the lab's images and apt repository (`bin/lab up`
# once) but not the lab running: with `bin/lab down` first, the lab's processes do not share the cores. Figures
# printed and written to out/bench/scale-hosts.json; HOSTS_ARGS="--sizes 1,8,32,64 --forks 20,0".
bench-hosts: setup
	$(BIN)/python benchmarks/scale_hosts.py $(HOSTS_ARGS)

venv-path:
	@echo $(VENV)

# The lab (issue 3): a GPU cell on this machine. Cold: builds etcd, two Kubernetes minors and KWOK from their Go
# modules and a Debian host image (cached in ~/.cache/gpufleet/lab); warm: seconds.
lab-up: setup
	bash lab/build/host-setup.sh
	bin/lab up

lab-down: setup
	bin/lab down --all

lab-reset: setup
	bin/lab reset

lab-status: setup
	bin/lab status

# Every Molecule scenario: molecule/*/ and roles/*/molecule/*/, on lab hosts. Needs the lab's images and apt
# repository (`make lab-up` once); role scenarios that talk to etcd need the lab running.
LAB_CACHE ?= $(or $(GPUFLEET_LAB_CACHE),$(CACHE)/lab)
export GPUFLEET_LAB_CACHE := $(LAB_CACHE)# bin/lab and Molecule read one cache; tests/molecule-run takes the lab
# cell's paths, addresses and versions from `bin/lab env`
# Scenarios that need no cluster (gpu_stack: host packages only) or only read it run two at a time first; those
# that change it (cordon, drain, upgrade the control plane or a kubelet) then run one at a time.
# MOLECULE_LAB_RESET=0 skips the reset when the lab cell is known fresh; MOLECULE_NO_CLUSTER= leaves out the
# cluster-free ones (make test runs them beside the lab tests); MOLECULE_SKIP leaves out others and MOLECULE_ONLY
# runs only those named (make test runs etcd_snapshot on `lab`, the rest on lab-b). GPUFLEET_LAB_CELL picks the cell.
MOLECULE_LAB_RESET ?= 1
MOLECULE_NO_CLUSTER ?= gpu_stack
MOLECULE_SKIP ?=
MOLECULE_ONLY ?=
MOLECULE_READ_ONLY := preflight etcd_snapshot gpu_validate
MOLECULE_MOVING := $(filter-out gpu_stack $(MOLECULE_READ_ONLY),$(sort $(notdir $(patsubst %/molecule/,%,$(wildcard \
	roles/*/molecule/)))))
MOLECULE_PICK = $(filter-out $(MOLECULE_SKIP),$(if $(MOLECULE_ONLY),$(filter $(MOLECULE_ONLY),$(1)),$(1)))
molecule: setup
	@if [ "$(MOLECULE_LAB_RESET)" = 1 ]; then bin/lab reset && bin/lab up; else bin/lab up; fi
	@BIN=$(BIN) tests/molecule-run --parallel 2 $(call MOLECULE_PICK,$(MOLECULE_NO_CLUSTER) $(MOLECULE_READ_ONLY))
	@BIN=$(BIN) tests/molecule-run --parallel 1 $(call MOLECULE_PICK,$(MOLECULE_MOVING))

freeze: setup
	$(BIN)/python -m pip freeze --exclude-editable

clean-venv:
	rm -rf $(VENV)
