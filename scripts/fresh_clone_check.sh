#!/usr/bin/env bash
# What a stranger does: clone the repository into an empty folder (no ../shared beside it, no
# TYPHOON_GLUE_DIR, the hub switched off, empty pip and Hugging Face caches) and run the README's two
# commands there: `make test` and `make reproduce PROFILE=smoke`.
#
#   scripts/fresh_clone_check.sh [REV]      (default HEAD; only committed files are cloned)
#
# Takes a while: make install (~30 s), the whole test suite, the smoke grid. The folder is left in
# place for inspection; its path is printed first.
case "${1:-}" in -h|--help) sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0"; exit 0 ;; esac  # the header above
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
commit=$(git -C "$repo" rev-parse "${1:-HEAD}")
work=$(mktemp -d "${TMPDIR:-/tmp}/typhoon-fresh-XXXXXX")
echo "== fresh clone of $repo at $commit in $work"
git clone --quiet --no-local "$repo" "$work/typhoon"
cd "$work/typhoon"
git checkout --quiet "$commit"

unset TYPHOON_GLUE_DIR PYTHONPATH VIRTUAL_ENV
export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 HF_HOME="$work/hf-home" PIP_CACHE_DIR="$work/pip-cache"
if [ -e ../shared ]; then echo "../shared exists beside the clone: not a stranger's machine" >&2; exit 1; fi

step() {
    echo "== $*"
    local start=$SECONDS
    "$@"
    echo "== $* took $((SECONDS - start)) s"
}
step make install
step make test
step make reproduce PROFILE=smoke
echo "== outputs: $(cd outputs && ls | tr '\n' ' ')"
.venv/bin/python - <<'PY'
import pandas as pd

results = pd.read_csv("outputs/results.csv")
print(results[["task", "backbone", "strategy", "seed", "status", "primary_metric", "primary_value"]].to_string())
assert (results.status == "ok").all(), "a smoke cell failed"
PY
echo "== fresh clone check passed"
