# The two commands a newcomer needs: `make reproduce` (the main job) and `make test` (the tests).
# Each does all set-up on a fresh machine: `make install` creates .venv/ and installs the locked
# environment. Only `make install` (and `make lock`) use the network; everything after runs offline.

PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
PROFILE ?= cpu
OUT ?=       # empty = the profile's own folder, outputs/<profile>/
WORKERS ?=   # empty = the profile's `workers` (cpu: 2 single-thread cells at once)
# torch is installed apart from the lock, in the build this machine needs (scripts/install_torch.sh):
# TORCH_VARIANT=cpu (the default, never a CUDA wheel) or a CUDA build, e.g. `make install TORCH_VARIANT=cu128`.
# The venv remembers its variant, so a later `make test` keeps it.
TORCH_VERSION := 2.13.0
TORCH_VARIANT ?= $(or $(shell cat $(VENV)/torch-variant 2>/dev/null),cpu)
# How requirements/*.txt are resolved (`make lock`): for every platform from Python 3.11 on, with hashes,
# torch left to the torch step above. `make lock LOCK_UPGRADE=--upgrade` moves every pin to its newest
# allowed version; without it uv keeps the current pins where it can.
LOCK_FLAGS := --python-version 3.11 --universal --generate-hashes --no-emit-package torch --custom-compile-command "make lock"
LOCK_UPGRADE ?=
UV ?= $(BIN)/uv
OFFLINE := HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1

.PHONY: install test test-fast test-results test-gpu reproduce lab docker docker-gpu lint lock torch-report clean

install: $(VENV)/.installed-$(TORCH_VARIANT)

# The lock first (every package but torch, hash-checked, no resolution), then torch, then the package
# itself, built with the locked setuptools (no isolated build env to download).
# The lock goes in with uv: it downloads in parallel and byte-compiles on every core, 67 s where pip took
# 212 s on a 2-core Xeon (benchmarks/bench_install.sh, docs/install.md). Compiled up front because where
# PYTHONDONTWRITEBYTECODE is set, every process would compile each module it imports anew. uv itself comes
# first, with pip, from its own hash-pinned lines of the lock. uv reads no pip configuration, so where it
# cannot get the packages (a mirror named only in pip.conf), pip installs the same lock.
$(VENV)/.installed-$(TORCH_VARIANT): requirements/dev.txt pyproject.toml scripts/install_torch.sh
	$(PYTHON) -m venv $(VENV)
	$(PYTHON) scripts/lockfiles.py requirement uv > $(VENV)/uv-requirement.txt
	$(BIN)/python -m pip install --quiet --require-hashes --no-deps -r $(VENV)/uv-requirement.txt
	$(UV) pip install --quiet --compile-bytecode --python $(BIN)/python --require-hashes --no-deps -r requirements/dev.txt \
	    || { echo "uv could not install the lock; pip installs it instead" >&2; \
	         $(BIN)/python -m pip install --quiet --require-hashes --no-deps -r requirements/dev.txt; }
	scripts/install_torch.sh $(BIN)/python $(TORCH_VERSION) $(TORCH_VARIANT) --quiet
	$(BIN)/python -m pip install --quiet --no-deps --no-build-isolation -e ".[bundle]"
	$(BIN)/python -m pip check
	rm -f $(VENV)/.installed-*
	echo $(TORCH_VARIANT) > $(VENV)/torch-variant
	touch $@

# The test tiers (markers declared in pyproject.toml; tests/conftest.py fails an unmarked test that starts
# a Python interpreter or a browser, so the fast tier stays fast):
#   make test          every tier: the code's tests, the slow ones and the checks of the committed results.
#                      CI runs this (.ci/run): 20 min on a 2-core Intel Xeon with AMX; the target is
#                      20 min on a 2-core AVX2 CPU (docs/testing.md says where the time goes).
#   make test-fast     the code's tests without `slow` (tests that start a process -- the CLI, a notebook
#                      kernel, pip, a browser -- or train a model) and without `results`: under 5 min on 2 cores.
#   make test-results  only `results`: the committed results under results/ (tables, executed notebooks,
#                      README blocks) agree with their records, the code and each other.
# --durations: CI's log names its slowest tests, so a change that slows CI shows where.
# -n 2: two pytest-xdist workers, one per core of the 2-core machines CI runs on; whole files go to a
# worker (loadfile) in the order tests/conftest.py puts them, the two longest first.
PYTEST_WORKERS ?= 2
XDIST := -n $(PYTEST_WORKERS) --dist loadfile --no-loadscope-reorder
test: install
	$(OFFLINE) $(BIN)/python -m pytest -q -p no:cacheprovider --durations=15 $(XDIST)

test-fast: install
	$(OFFLINE) $(BIN)/python -m pytest -q -m "not slow and not results" $(XDIST)

test-results: install
	$(OFFLINE) $(BIN)/python -m pytest -q -m results $(XDIST)

test-gpu: install  # the CUDA tier (skipped without a GPU); scripts/gpu_check.sh runs it on a fresh machine
	$(OFFLINE) $(BIN)/python -m pytest -q -m gpu -rs

reproduce: install
	$(BIN)/python -m typhoon reproduce --profile $(PROFILE) $(if $(strip $(OUT)),--out $(OUT)) $(if $(strip $(WORKERS)),--workers $(WORKERS))

# JupyterLab on the repository (notebooks/ open first; the committed runs' executed notebooks under results/
# re-run where they lie), on this machine only unless told: `make lab IP=0.0.0.0 PORT=8890`. As root (a
# container, a cloud VM) jupyter refuses to start without --allow-root; with no display there is no
# browser to open, so it only prints the URL to open (with its token).
IP ?= 127.0.0.1
PORT ?= 8888
LAB_FLAGS := $(if $(filter 0,$(shell id -u)),--allow-root) \
	$(if $(or $(DISPLAY),$(WAYLAND_DISPLAY),$(filter Darwin,$(shell uname -s))),,--no-browser)
lab: install
	$(BIN)/jupyter lab --ip=$(IP) --port=$(PORT) $(strip $(LAB_FLAGS)) --ServerApp.root_dir=. --LabApp.default_url=/lab/tree/notebooks

# Regenerate the locks from pyproject.toml, and environment.yml from them (needs PyPI). The locks hold the
# bundle (the core install plus the [bundle] extra; the dev lock the [dev] extra too): a bare
# `pip install typhoon` brings only torch, transformers, accelerate and numpy (scripts/core_site.py).
lock: install
	$(UV) pip compile pyproject.toml --extra bundle $(LOCK_FLAGS) $(LOCK_UPGRADE) -o requirements/runtime.txt
	$(UV) pip compile pyproject.toml --extra bundle --extra dev -c requirements/runtime.txt $(LOCK_FLAGS) $(LOCK_UPGRADE) -o requirements/dev.txt
	$(BIN)/python scripts/lockfiles.py environment.yml

# What the torch step would install here, as pip's JSON report (no nvidia-* package for TORCH_VARIANT=cpu).
torch-report: install
	scripts/install_torch.sh $(BIN)/python $(TORCH_VERSION) $(TORCH_VARIANT) --dry-run --ignore-installed --quiet --report $(VENV)/torch-report.json
	$(BIN)/python -c "import json; r = json.load(open('$(VENV)/torch-report.json'))['install']; \
	names = sorted(i['metadata']['name'] + '==' + i['metadata']['version'] for i in r); \
	print('would install:', ' '.join(names)); print('nvidia-* packages:', [n for n in names if n.startswith('nvidia')])"

# The image runs as the user who builds it (files in a mounted outputs/ are theirs); root builds keep the
# image's own non-root user (uid 1000). DOCKER=podman works the same; BASE_IMAGE=<a local image> stands in
# where no registry answers (docs/docker.md).
DOCKER ?= docker
BASE_IMAGE ?=   # empty = the Dockerfile's default, python:3.11.7-slim-bookworm
DOCKER_BUILD = $(DOCKER) build $(if $(filter-out 0,$(shell id -u)),--build-arg UID=$(shell id -u) --build-arg GID=$(shell id -g)) \
	$(if $(strip $(BASE_IMAGE)),--build-arg BASE_IMAGE=$(strip $(BASE_IMAGE)))

docker:
	$(DOCKER_BUILD) -t typhoon-bundle .

docker-gpu:
	$(DOCKER_BUILD) --build-arg TORCH_VARIANT=cu128 -t typhoon-bundle:cu128 .

lint: install
	$(BIN)/ruff check typhoon tests benchmarks scripts

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache build *.egg-info
