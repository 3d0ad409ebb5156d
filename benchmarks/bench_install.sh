#!/usr/bin/env bash
# How long `make install` takes, and its lock step with pip against uv, in one run on the machine it runs on.
#
#   benchmarks/bench_install.sh [CORES]     # e.g. `benchmarks/bench_install.sh 0` pins everything to core 0
#
# Clones this repository's HEAD into a temp folder and times, each from an empty venv and empty caches (so
# every package is downloaded again, as on a fresh CI machine):
#   1. the lock (requirements/dev.txt) with pip, as `make install` did before it used uv;
#   2. the same lock with uv, byte-compiled (`--compile-bytecode`), as `make install` does now;
#   3. the same lock with uv, not byte-compiled (each module compiled when first imported, and compiled
#      again in every process where PYTHONDONTWRITEBYTECODE is set);
#   4. the whole `make install`: venv, lock, torch (scripts/install_torch.sh) and the editable package.
# Steps 2 and 3 include installing uv itself with pip. Every step downloads, so its time also measures the
# link to the package index. Wall and CPU seconds (user + system, all processes) for each.
case "${1:-}" in -h|--help) sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0"; exit 0 ;; esac  # the header above
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
pin=()
if [ $# -ge 1 ]; then pin=(taskset -c "$1"); fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
git clone -q "$repo" "$work/clone"
cd "$work/clone"
export PIP_NO_CACHE_DIR=1
python3 scripts/lockfiles.py requirement uv > "$work/uv-requirement.txt"  # as `make install` does

timed() {  # LABEL COMMAND...: prints the label, wall and CPU seconds (the command's output goes to $work/log)
    local label=$1; shift
    /usr/bin/time -f "%e %U %S" -o "$work/time" "${pin[@]}" "$@" >>"$work/log" 2>&1 \
        || { echo "failed: $*" >&2; tail -20 "$work/log" >&2; exit 1; }
    read -r wall user sys < "$work/time"
    printf '%-34s %5.0f s wall %5.0f s CPU\n' "$label" "$wall" "$(echo "$user + $sys" | bc)"
}

lock_with_uv() {  # VENV [uv arguments]: uv from its lines of the lock (pip), then the lock (uv)
    local venv=$1; shift
    python3 -m venv "$venv"
    "$venv/bin/python" -m pip install --quiet --require-hashes --no-deps -r "$work/uv-requirement.txt"
    UV_CACHE_DIR="$venv.uv-cache" "$venv/bin/uv" pip install --quiet --python "$venv/bin/python" "$@" \
        --require-hashes --no-deps -r requirements/dev.txt
}

echo "machine: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores; pinned to: ${1:-none}"
python3 -m venv "$work/pip-venv"
timed "the lock with pip" "$work/pip-venv/bin/python" -m pip install --quiet --require-hashes --no-deps \
    -r requirements/dev.txt
export -f lock_with_uv
export work
timed "the lock with uv, byte-compiled" bash -c 'lock_with_uv "$work/uv-venv" --compile-bytecode'
timed "the lock with uv, not compiled" bash -c 'lock_with_uv "$work/uv-lazy-venv"'
UV_CACHE_DIR="$work/make-uv-cache" timed "make install" make install
