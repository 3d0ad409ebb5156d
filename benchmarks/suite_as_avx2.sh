#!/usr/bin/env bash
# The test suite as an AVX2-only CPU would run it, on a CPU that has more (AVX-512, AMX): what CI's time on
# its AVX2 machines is measured against when none is at hand (docs/testing.md, "Where CI's time goes").
#
#   sudo benchmarks/suite_as_avx2.sh LOG [pytest arguments]   # default: the whole suite, as `make test` runs it
#   sudo benchmarks/suite_as_avx2.sh --ci LOG                  # all of CI: .ci/run (make install, make test)
#   python benchmarks/bench_test_time.py LOG                    # then: where the time went
#
# --ci runs `.ci/run` as CI does, in this checkout: on a clean clone that includes `make install`, from
# empty caches only if the caches are empty (the uv and pip caches are the user's).
#
# Root, because it bind-mounts a copy of /proc/cpuinfo without the avx512* and amx* flags in a mount namespace
# of its own (so typhoon's `precision=auto` resolves to fp32, as on an AVX2 CPU), and caps torch, MKL and oneDNN
# at AVX2. This emulates the instruction set, not an older core's clock or caches. At the end it prints the
# pytest wall time and how busy the cores were (from /proc/stat: every process counts, SLURM jobs too).
case "${1:-}" in -h|--help) sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0"; exit 0 ;; esac  # the header above
set -euo pipefail
[ "$(id -u)" = 0 ] || { echo "suite_as_avx2.sh: needs root (a mount namespace and a bind mount)" >&2; exit 2; }
ci=0
if [ "${1:-}" = --ci ]; then ci=1; shift; fi
[ $# -ge 1 ] || { echo "usage: suite_as_avx2.sh [--ci] LOG [pytest arguments]" >&2; exit 2; }
log=$(realpath -m "$1"); shift
repo=$(cd "$(dirname "$0")/.." && pwd)
python=${PYTHON:-$repo/.venv/bin/python}
if [ $ci = 1 ]; then
    [ $# -eq 0 ] || { echo "suite_as_avx2.sh: --ci takes no pytest arguments (CI's are the Makefile's)" >&2; exit 2; }
elif [ $# -eq 0 ]; then  # the whole suite with `make test`'s workers, read from the Makefile (their one home)
    read -r -a xdist < <(make -s -C "$repo" --no-print-directory \
        --eval="suite-as-avx2-xdist: ; @printf '%s\n' '\$(XDIST)'" suite-as-avx2-xdist)
    set -- -q -p no:cacheprovider --durations=0 "${xdist[@]}"
fi
cpuinfo=$(mktemp)
trap 'rm -f "$cpuinfo"' EXIT
sed -E 's/ (avx512[a-z0-9_]*|amx_[a-z0-9]*)//g' /proc/cpuinfo > "$cpuinfo"

# In the namespace: the reduced cpuinfo, the capped libraries, the hub off, CI's settings; then the suite.
unshare -m bash -s "$cpuinfo" "$log" "$repo" "$python" "$ci" "$@" <<'INNER'
set -uo pipefail
cpuinfo=$1 log=$2 repo=$3 python=$4 ci=$5; shift 5
mount --bind "$cpuinfo" /proc/cpuinfo
export ATEN_CPU_CAPABILITY=avx2 MKL_ENABLE_INSTRUCTIONS=AVX2 ONEDNN_MAX_CPU_ISA=AVX2
export CI=true HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1
cd "$repo"
torch_is_capped() {  # does the venv's torch run under the AVX2 cap?
    "$python" -c "import torch; assert torch.backends.cpu.get_cpu_capability() == 'AVX2', torch.backends.cpu.get_cpu_capability()" \
        || { echo "suite_as_avx2.sh: torch did not take the AVX2 cap" >&2; return 2; }
}
if [ $ci = 0 ]; then torch_is_capped || exit 2; fi  # with --ci, .ci/run makes the venv: checked after it
read -r _ u0 n0 s0 i0 w0 q0 sq0 st0 _ < /proc/stat
start=$(date +%s)
if [ $ci = 1 ]; then .ci/run > "$log" 2>&1; else "$python" -m pytest "$@" > "$log" 2>&1; fi
status=$?
if [ $ci = 1 ] && ! torch_is_capped; then status=2; fi  # the measurement was not of an AVX2 torch
read -r _ u1 n1 s1 i1 w1 q1 sq1 st1 _ < /proc/stat
busy=$(( (u1 - u0) + (n1 - n0) + (s1 - s0) + (q1 - q0) + (sq1 - sq0) ))
total=$(( busy + (i1 - i0) + (w1 - w0) + (st1 - st0) ))
total=$(( total > 0 ? total : 1 ))  # a run shorter than one clock tick
echo "$([ $ci = 1 ] && echo .ci/run || echo pytest) exit $status in $(( $(date +%s) - start )) s; cores busy $(( 100 * busy / total )) %" \
     "($(( busy / $(getconf CLK_TCK) )) core-seconds); log: $log"
tail -1 "$log"
exit $status
INNER
