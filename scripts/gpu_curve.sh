#!/usr/bin/env bash
# The kl-original study's second addendum on one GPU with no network, in one command: both curves -- 'all_plus'
# (the 2023 recipe: every 2023 rule, random batches, fp32) and 'all_gpu' (the registered 'all' curve from epoch 0
# in the GPU's numerics) -- 12 runs, each in a slot of its own, each towards its plan (100 MRPC / 80 CoLA MLM
# epochs), stopped as Ctrl-C stops them when the budget is spent, every finished epoch kept:
#
#   scripts/gpu_curve.sh DEST          # from the repository root, once the working tree and .device/ are there
#
# Before: here, `.venv/bin/python scripts/device_bundle.py prepare --job curve` (the weights in two parts, each
# copy under 64 MiB with the working tree; it prints what each copy carries). Steps, each timed:
#   1. join the weights' parts (device_bundle.py assemble: every piece and file against its SHA-256);
#   2. install .device/wheels (datasets and its two dependencies) into $WORK/site, first on PYTHONPATH; import what
#      the curves use and check that minilm-l6-mlm loads as the very model prepared (its weights' digest);
#   3. both curves at once, each `python -m typhoon kl-original curve` with SLOTS worker processes on the GPU, a
#      cell a run (its whole plan: a cell's set-up, loading its 0.3 GB resume state, costs as much as an epoch
#      there), stopped by SIGINT at CURVE_CAP_S;
#   4. DEST/curve.tar.xz.NN: both curves' folders (every finished epoch: epochs.csv, trace.csv, mlm_loss.csv,
#      run.json, the snapshot states), xz-compressed, cut in pieces of 15 MiB (at most 6), and DEST/curve_summary.txt
#      (each run's epochs reached, its wall time, the steps per second; the logs' ends).
# Afterwards, here: `python3 scripts/device_bundle.py land DEST results/kl_original`, then
# `python -m typhoon kl-original table`.
#
# The budget (about 10 minutes of a GPU): CURVE_CAP_S=450 for the curves, the rest for the steps around them. The
# runs need 394,800 MLM steps to reach their plans (230 a MRPC epoch, 535 a CoLA one, at batch 16); what does not
# fit is cut at the end of every run alike (benchmarks/kl_curve_gpu_plan.py; docs/results.md: the plan). Where
# the driver allows it, MPS (MPS=1, the default) lets the 12 slots' kernels run at once.
#
# Environment: CURVE_CAP_S (450), SLOTS (6 per curve), DEVICE (cuda), PYTHON (python3), BUNDLE (.device), WORK
# (/tmp/typhoon-curve), REHEARSE (unset; N: a rehearsal on the CPU or any device -- N examples a run, one epoch,
# into WORK; its runs are refused by the study's tables). Exit status: 0 the curves ran (to their plan or the
# budget) and came back packed, 1 a step failed, 2 bad input.
set -uo pipefail
case "${1:-}" in -h|--help) sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0"; exit 0 ;; esac  # the header above
cd "$(dirname "$0")/.."

DEST=${1:?"usage: scripts/gpu_curve.sh DEST (the folder the results go to)"}
PYTHON=${PYTHON:-python3}
BUNDLE=${BUNDLE:-.device}
WORK=${WORK:-/tmp/typhoon-curve}
CURVE_CAP_S=${CURVE_CAP_S:-450}
SLOTS=${SLOTS:-6}
DEVICE=${DEVICE:-cuda}
PIECE=15m
step() { printf '\n== %s (%s)\n' "$1" "$(date -u +%H:%M:%S)"; }

if [ -n "${REHEARSE:-}" ]; then
    PLAN=(--epochs 1 --epochs-per-cell 1 --rehearse "$REHEARSE")
else
    PLAN=(--epochs 100 --epochs-per-cell 100)
    if ! "$PYTHON" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)" 2>/dev/null; then
        echo "gpu_curve: error: $PYTHON's torch sees no CUDA device: the curves are registered on a GPU (REHEARSE=N tries the machinery elsewhere)" >&2
        exit 2
    fi
fi
mkdir -p "$DEST" "$WORK" || exit 2
DEST=$(cd "$DEST" && pwd)
started=$SECONDS

step "1. the weights, joined from their parts"
"$PYTHON" scripts/device_bundle.py assemble || exit 1

step "2. install $BUNDLE/wheels into $WORK/site; the model checked"
if ls "$BUNDLE"/wheels/*.whl >/dev/null 2>&1; then
    "$PYTHON" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$WORK/site" \
        "$BUNDLE"/wheels/*.whl || { echo "gpu_curve: the install failed"; exit 1; }
fi
export PYTHONPATH=$WORK/site:$(cd "$BUNDLE" && pwd)/site:$PWD
export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
"$PYTHON" - "$BUNDLE" <<'EOF' || exit 1
import importlib, json, sys
from pathlib import Path
missing = []
for module in ("torch", "transformers", "datasets", "pandas", "scipy", "typhoon.runner.workers", "typhoon.models"):
    try:
        importlib.import_module(module)
    except ImportError as error:
        missing.append(f"{module} ({error})")
if missing:
    sys.exit("gpu_curve: cannot import " + "; ".join(missing) + ": add its wheel to the bundle")
import torch
from typhoon.models import load_backbone, weights_digest
expected = json.loads(next(Path(sys.argv[1]).glob("part-*/manifest.json")).read_text())["digest"]
found = weights_digest(load_backbone("minilm-l6-mlm").mlm_model())
if found != expected:
    sys.exit(f"gpu_curve: minilm-l6-mlm loads with weights digest {found}, prepared as {expected}: not the model")
print("torch", torch.__version__, "|", torch.cuda.get_device_name(0) if torch.cuda.is_available() else "no GPU",
      "| minilm-l6-mlm: the model prepared (weights digest", found[:12] + ")")
EOF

mps=
if [ -z "${REHEARSE:-}" ] && [ "${MPS:-1}" = 1 ] && command -v nvidia-cuda-mps-control >/dev/null; then
    # MPS lets the slots' small kernels run at once instead of taking turns; where it will not start, or a CUDA
    # context fails through it, the slots take turns as usual
    export CUDA_MPS_PIPE_DIRECTORY=$WORK/mps-pipe CUDA_MPS_LOG_DIRECTORY=$WORK/mps-log
    mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
    if nvidia-cuda-mps-control -d && "$PYTHON" -c "import torch; torch.ones(2, device='cuda').sum().item()"; then
        mps=1; echo "MPS on: the slots' kernels run at once"
    else
        echo quit | nvidia-cuda-mps-control 2>/dev/null; unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY
        echo "MPS not available here: the slots take turns on the GPU"
    fi
fi

step "3. both curves at once, $SLOTS slots each, on $DEVICE (cap ${CURVE_CAP_S} s)"
pids=()
for curve in all_plus all_gpu; do
    timeout -s INT "$CURVE_CAP_S" "$PYTHON" -m typhoon kl-original curve --curve "$curve" "${PLAN[@]}" \
        --workers "$SLOTS" --set device="$DEVICE" --set num_threads=1 --out "$WORK/$curve" \
        --checkpoints "$WORK/checkpoints-$curve" > "$WORK/$curve.log" 2>&1 &
    pids+=($!)
done
failed=0
for i in 0 1; do
    wait "${pids[$i]}"; code=$?
    echo "curve $i: exit $code (0: every run at its plan; 124 or 130: stopped at the cap, its finished epochs kept)"
    case "$code" in 0|124|130) ;; *) failed=1 ;; esac
done
echo "the curves ran for $((SECONDS - started)) s since the start"
[ -n "$mps" ] && echo quit | nvidia-cuda-mps-control

step "4. packed into $DEST"
folders=()
for curve in all_plus all_gpu; do
    [ -d "$WORK/$curve/curve_$curve" ] && folders+=("$WORK/$curve/curve_$curve")
done
if [ ${#folders[@]} -eq 0 ]; then
    echo "gpu_curve: no curve run wrote an epoch"; tail -20 "$WORK"/all_*.log; exit 1
fi
"$PYTHON" scripts/device_bundle.py pack "$DEST" "${folders[@]}" || exit 1
pieces=$(ls "$DEST"/curve.tar.xz.* | wc -l)
[ "$pieces" -le 6 ] || { echo "gpu_curve: $pieces pieces, more than the 6 that come back"; failed=1; }
"$PYTHON" - "$WORK" <<'EOF' > "$DEST/curve_summary.txt"
import json, sys
from pathlib import Path
work = Path(sys.argv[1])
print(f"{'curve':15s} {'run':11s} {'epochs':>7s} {'wall_s':>7s} {'steps/s':>8s}  numerics")
for run in sorted(work.glob("all_*/curve_all_*/*/seed*/run.json")):
    r = json.loads(run.read_text())
    steps = (r["n_train"] + r["config"]["batch_size"] - 1) // r["config"]["batch_size"] * r["epochs_reached"]
    n = r.get("numerics", {})
    epochs = f"{r['epochs_reached']}/{r['epochs_planned']}"
    print(f"{run.parts[-4]:15s} {run.parts[-3] + '/' + run.parts[-2]:11s} {epochs:>7s} {r['wall_s']:7.0f} "
          f"{steps / max(r['wall_s'], 1e-9):8.1f}  {n.get('precision')} on {n.get('device')}")
for log in sorted(work.glob("all_*.log")):
    print(f"\n-- the end of {log.name}")
    print("\n".join(log.read_text(errors="replace").splitlines()[-8:]))
EOF
cat "$DEST/curve_summary.txt"
ls -la "$DEST"
exit $failed
