# The two commands a newcomer needs: `make reproduce` (the main job) and `make test` (the tests).
# Each does all set-up on a fresh machine: `make install` creates .venv/ and installs everything.

PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
PROFILE ?= cpu
OUT ?=       # empty = the profile's own folder, outputs/<profile>/
WORKERS ?=   # empty = the profile's `workers` (cpu: 2 single-thread cells at once)
# torch first, pinned: a looser torch requirement resolved first would pull a multi-GB CUDA build.
# On a GPU machine install the CUDA build you need instead (see README, "GPU").
TORCH ?= torch==2.13.0
GLUE_DIR ?= $(abspath ../shared/data/glue)
export TYPHOON_GLUE_DIR ?= $(GLUE_DIR)

.PHONY: install test test-fast reproduce lab docker lint clean

install: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet "$(TORCH)"
	$(BIN)/python -m pip install --quiet -e ".[dev]"
	touch $@

test: install
	HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 $(BIN)/python -m pytest -q -p no:cacheprovider

test-fast: install
	HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 $(BIN)/python -m pytest -q -m "not slow"

reproduce: install
	$(BIN)/python -m typhoon reproduce --profile $(PROFILE) $(if $(strip $(OUT)),--out $(OUT)) $(if $(strip $(WORKERS)),--workers $(WORKERS))

lab: install
	$(BIN)/jupyter lab notebooks/

docker:
	docker build -t typhoon-bundle .

lint: install
	$(BIN)/ruff check typhoon tests benchmarks

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache
