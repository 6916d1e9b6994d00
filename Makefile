# schedpolicy developer entry points. `make demo` and `make test` bootstrap
# everything they need: the venv, Python packages and the Go-built control plane.
SHELL := /bin/bash
.DEFAULT_GOAL := help

PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
VENV_STAMP := $(VENV)/.installed
PYTEST_ARGS ?=

.PHONY: help
help: ## list targets
	@grep -E '^[a-z0-9-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-14s %s\n", $$1, $$2}'

$(VENV_STAMP): pyproject.toml constraints.txt
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)' || \
	  { echo "Python >= 3.11 is required (found: $$($(PYTHON) --version 2>&1)); set PYTHON=/path/to/python3.11" >&2; exit 1; }
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -c constraints.txt -e '.[dev]'
	@touch $@

.PHONY: venv
venv: $(VENV_STAMP) ## create .venv with the package and dev tools

# Each target builds only the tool groups it runs (tools/build.sh lists them); a group
# already built costs a second.
BUILD := bash tools/build.sh

.PHONY: tools
tools: ## build every tool from Go modules into .tools/bin: the control plane, helm, the real node, Prometheus, Karpenter, and the 1.35 lane's control plane
	@$(BUILD)

.PHONY: image
image: ## build the operator's image from the Dockerfile (buildah, a local Debian base) into .tools/images
	@$(BUILD) control-plane monitoring
	@bash tools/image.sh

.PHONY: lint
lint: lint-python lint-chart ## ruff, mypy, the layer and capability contracts (import-linter), hadolint, and promtool on the chart's alerts

.PHONY: lint-python
lint-python: venv ## the Python half of lint (no Go tools): ruff, mypy, import-linter, hadolint
	$(VENV)/bin/ruff check operator localcluster tests bench scripts
	$(VENV)/bin/ruff format --check operator localcluster tests bench scripts
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports --no-cache
	$(VENV)/bin/hadolint Dockerfile

.PHONY: lint-chart
lint-chart: venv ## the chart's alerts through promtool (builds helm and promtool)
	@$(BUILD) helm monitoring
	$(PY) -m scripts.check_alerts

.PHONY: fmt
fmt: venv ## format and autofix
	$(VENV)/bin/ruff format operator localcluster tests bench scripts
	$(VENV)/bin/ruff check --fix operator localcluster tests bench scripts

.PHONY: crds
crds: venv ## regenerate crds/ and chart/crds/ from operator/schedpolicy/core/api.py (the API of every capability, assembled)
	$(PY) -m schedpolicy crd > crds/schedulingpolicies.schedpolicy.io.yaml
	cp crds/schedulingpolicies.schedpolicy.io.yaml chart/crds/

.PHONY: cluster-up
# The venv is made while the control plane builds: pip waits on the network, Go on the CPU.
cluster-up: ## start the local control plane (kubeconfig: .cluster/local/kubeconfig); KARPENTER=1: Karpenter launches the nodes
	@$(BUILD) control-plane $(if $(KARPENTER),karpenter) & build=$$!; \
	  $(MAKE) --no-print-directory venv || { kill $$build 2>/dev/null; exit 1; }; \
	  wait $$build
	$(PY) -m localcluster up $(if $(KARPENTER),--karpenter)

.PHONY: cluster-down
cluster-down: venv ## stop every process of the local control plane
	$(PY) -m localcluster down

.PHONY: unit
unit: venv ## unit tests (no cluster)
	@$(PY) -m pytest tests/unit $(PYTEST_ARGS) || { rc=$$?; \
	  [[ $$rc -ne 5 ]] || echo "pytest collected no tests in tests/unit: that is a failure" >&2; exit $$rc; }

.PHONY: e2e
e2e: venv ## e2e tests against the real local control plane (Kubernetes 1.37), Karpenter v1.15 included
	@$(BUILD) control-plane helm karpenter
	@$(PY) -m pytest tests/e2e $(PYTEST_ARGS) || { rc=$$?; \
	  [[ $$rc -ne 5 ]] || echo "pytest collected no tests in tests/e2e: that is a failure" >&2; exit $$rc; }

# The oldest supported Kubernetes: the e2e tests marked `compat` against a 1.35 control plane.
.PHONY: compat
compat: venv ## the compatibility lane: costs, labels, hints, simulate and the chart install on Kubernetes 1.35
	@$(BUILD) control-plane helm compat
	@SCHEDPOLICY_KUBERNETES=1.35 $(PY) -m pytest tests/e2e -m compat $(PYTEST_ARGS) || { rc=$$?; \
	  [[ $$rc -ne 5 ]] || echo "pytest collected no compat tests in tests/e2e: that is a failure" >&2; exit $$rc; }

.PHONY: incluster
incluster: venv image ## the chart installed with helm on a real kubelet node (containerd, runc, kube-proxy)
	@$(BUILD) control-plane helm node monitoring
	@$(PY) -m pytest tests/incluster $(PYTEST_ARGS) || { rc=$$?; \
	  [[ $$rc -ne 5 ]] || echo "pytest collected no tests in tests/incluster: that is a failure" >&2; exit $$rc; }

.PHONY: test-reliability
test-reliability: venv ## only the fault, race and bad-input suite (also part of e2e)
	@$(BUILD) control-plane helm karpenter
	$(PY) -m pytest tests/e2e -m reliability $(PYTEST_ARGS)

.PHONY: test
# scripts/test_all.py runs lint, unit, e2e (with the Karpenter suite beside it), compat and
# incluster, overlapping the Go builds with the stages that do not need them, and prints
# each stage's time at the end.
test: venv ## everything CI runs (the reliability suite is part of e2e)
	@$(PY) -m scripts.test_all

SCALE ?= full
.PHONY: bench
bench: venv ## benchmarks B1-B8 (SCALE=small for a quick pass, ONLY=B2 for a subset, bench/registry.py lists them; B7/B7E: DAY=12, TRACE=file, LANES=a,b); writes bench/REPORT.md
	@$(BUILD) control-plane helm karpenter
	$(PY) -m pip install --quiet -c constraints.txt -e '.[dev,bench]'
	$(PY) -m bench --scale $(SCALE) $(if $(ONLY),--only $(ONLY)) $(if $(DAY),--day $(DAY)) $(if $(TRACE),--trace $(TRACE)) $(if $(LANES),--lanes $(LANES))

.PHONY: demo
demo: cluster-up ## the story: policies, costs, GPU labels and packing, a simulated and a real scale-down
	$(PY) -m scripts.demo
