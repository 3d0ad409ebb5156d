#!/usr/bin/env bash
# Install torch==VERSION in the build VARIANT ("cpu", or a CUDA build such as "cu128") with PYTHON's pip.
#
#   scripts/install_torch.sh PYTHON VERSION VARIANT [extra pip arguments...]
#
# Why a script: PyPI's Linux torch wheel is the CUDA build, which pulls several GB of nvidia-* packages,
# so torch comes from PyTorch's index for the variant (https://download.pytorch.org/whl/VARIANT), never
# from PyPI. A wheel of exactly VERSION+VARIANT that pip already knows locally (its find-links, e.g. a
# wheelhouse in pip.conf) is used first with --no-index: that needs no network and fails within a
# second where there is none, so an unreachable index never costs pip's retries. When it fails, pip's
# error is shown before falling back to the index. Extra arguments go to both pip commands
# (`make torch-report` passes --dry-run --report to show what would be installed).
# The lock (requirements/*.txt) must be installed first: torch's own dependencies come from it.
case "${1:-}" in -h|--help) sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0"; exit 0 ;; esac  # the header above
set -euo pipefail
if [ "$#" -lt 3 ]; then
    echo "usage: $0 PYTHON VERSION VARIANT [pip arguments...]" >&2
    exit 2
fi
python=$1 version=$2 variant=$3
shift 3
case "$variant" in
    cpu|cu[0-9]*|rocm[0-9]*) ;;
    *) echo "$0: TORCH_VARIANT must be cpu, cuNNN (e.g. cu128) or rocmX.Y, got '$variant'" >&2; exit 2 ;;
esac
index=${TORCH_INDEX:-https://download.pytorch.org/whl/$variant}
# The exact build, so that switching variants replaces an installed one (macOS wheels carry no +cpu label).
spec="torch==$version+$variant"
if [ "$(uname -s)" = Darwin ]; then spec="torch==$version"; fi

log=$(mktemp)
trap 'rm -f "$log"' EXIT
if "$python" -m pip install --no-index "$spec" "$@" >"$log" 2>&1; then
    echo "$spec: a local wheel (pip's find-links); no index contacted"
    tail -n 1 "$log"
else
    # Say why: "no such wheel" is the usual reason, but a wheel for another Python or platform, a broken
    # file or a dependency missing from the lock also land here, and pip's own words tell them apart.
    echo "$spec: no usable local wheel (pip's find-links); pip said:" >&2
    { grep -E '^(ERROR|error):' "$log" || tail -n 5 "$log"; } | sed 's/^/    /' >&2
    echo "$spec: from $index"
    "$python" -m pip install "$spec" --index-url "$index" "$@"
fi

case " $* " in *" --dry-run "*) exit 0 ;; esac
# What was installed must be the build that was asked for.
"$python" - "$version" "$variant" <<'PY'
import sys

import torch

version, variant = sys.argv[1:]
cuda = torch.version.cuda
built = "cpu" if cuda is None and torch.version.hip is None else (f"cu{cuda.replace('.', '')}" if cuda else "rocm")
if torch.__version__.split("+")[0] != version or not variant.startswith(built):
    sys.exit(f"installed torch {torch.__version__} (build {built}) is not torch {version} {variant}")
print(f"torch {torch.__version__} installed ({built} build)")
PY
