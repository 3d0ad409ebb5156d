#!/usr/bin/env bash
# Build the Docker image for real and run it: the check that the container works, where an engine is.
#
#   scripts/container_check.sh            # from the repository root; prints a summary at the end
#
# Steps, each timed, each PASS or FAIL in the summary:
#   1. the base image: BASE_IMAGE if given, else the Dockerfile's default if it is local or can be pulled,
#      else a local Debian bookworm + python3.11 made with debootstrap and imported (no registry needed);
#   2. the build, from a fresh clone of the committed HEAD (what a user gets; CONTEXT=. builds the working
#      tree instead), with UID/GID set at build time (CHECK_UID, CHECK_GID), and where the host's pip has
#      them, its torch wheel (find-links, served over HTTP for TORCH_FIND_LINKS) and CA bundle (cert, a
#      build secret);
#   3. the smoke profile inside the image, run as another, arbitrary uid (RUN_UID) that has no passwd
#      entry in the image, into a mounted folder: results.csv and report.html must appear there, owned by it;
#   4. the default command (the `cpu` profile) for DEFAULT_SECONDS, then stopped: it must still be running,
#      write into the mounted outputs/cpu (files owned by CHECK_UID), be training cells itself (a progress
#      line; no record reused from results/) and print no traceback.
#
# Engine: docker when its daemon answers, else podman. Podman from Debian's packages needs
# PODMAN_RUNTIME=runc on VMs where crun cannot start containers (taken by default when runc is installed),
# and explicit ulimits (ULIMIT_NOFILE, ULIMIT_NPROC). Builds use the host's network (pip needs PyPI; apt needs Debian).
# Exit status: 0 all passed, 1 a step failed, 77 no engine here (nothing checked).
case "${1:-}" in -h|--help) sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0"; exit 0 ;; esac  # the header above
set -uo pipefail
cd "$(dirname "$0")/.."
repo=$PWD

IMAGE=${IMAGE:-typhoon-bundle:check}
CONTEXT=${CONTEXT:-}
CHECK_DIR=${CHECK_DIR:-$(mktemp -d /var/tmp/typhoon-container-check.XXXXXX)}
DEFAULT_SECONDS=${DEFAULT_SECONDS:-360}  # past the estimate's calibration (93-200 s measured on 2-core CPUs) into training
SMOKE_TIMEOUT=${SMOKE_TIMEOUT:-2400}
LOCAL_BASE=${LOCAL_BASE:-typhoon-base:bookworm}
DEBIAN_MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
ULIMIT_NOFILE=${ULIMIT_NOFILE:-65536}
ULIMIT_NPROC=${ULIMIT_NPROC:-16384}
# The image's user: the host user, or uid 1000 when the check runs as root (so that ownership shows).
if [ "$(id -u)" = 0 ]; then CHECK_UID=${CHECK_UID:-1000} CHECK_GID=${CHECK_GID:-1000}
else CHECK_UID=${CHECK_UID:-$(id -u)} CHECK_GID=${CHECK_GID:-$(id -g)}; fi
RUN_UID=${RUN_UID:-4242} RUN_GID=${RUN_GID:-4242}

summary=()
failed=0
stamp() { date -u +%H:%M:%S; }
say() { echo "[$(stamp)] $*"; }
record() {  # record STEP STATUS DETAIL
    summary+=("$(printf '%-8s %-4s %s' "$1" "$2" "$3")")
    [ "$2" = PASS ] || failed=1
    say "$1: $2 $3"
}

# --- the engine ---------------------------------------------------------------------------------
engine=()
if command -v docker >/dev/null 2>&1 && docker info >/dev/null 2>&1; then
    engine=(docker)
elif command -v podman >/dev/null 2>&1; then
    runtime=${PODMAN_RUNTIME-$(command -v runc >/dev/null 2>&1 && echo runc)}
    engine=(podman ${runtime:+--runtime "$runtime"})
else
    echo "container_check: no docker daemon and no podman here: nothing checked (Debian: apt-get install podman runc debootstrap)"
    exit 77
fi
# Limits no higher than the host's hard ones: runc cannot raise them ("error setting rlimit ... operation not
# permitted"), and podman's default nproc can be higher than a VM allows even below its reported hard limit.
at_most() { if [ "$2" != unlimited ] && [ "$2" -lt "$1" ]; then echo "$2"; else echo "$1"; fi; }
ULIMIT_NOFILE=$(at_most "$ULIMIT_NOFILE" "$(ulimit -Hn)")
ULIMIT_NPROC=$(at_most "$ULIMIT_NPROC" "$(ulimit -Hu)")
limits=(--ulimit "nofile=$ULIMIT_NOFILE:$ULIMIT_NOFILE" --ulimit "nproc=$ULIMIT_NPROC:$ULIMIT_NPROC")
cpu_flags=$(grep -o -w -E 'avx2|avx512f|avx512_bf16|amx_bf16' /proc/cpuinfo | sort -u | tr '\n' ' ')
say "engine: ${engine[*]} ($("${engine[@]}" --version 2>&1 | head -n 1)); CPU: $(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -n 1) (${cpu_flags% }), $(nproc) usable core(s)"
say "check folder: $CHECK_DIR"
mkdir -p "$CHECK_DIR"

image_exists() { "${engine[@]}" image inspect "$1" >/dev/null 2>&1; }

# --- 1. the base image --------------------------------------------------------------------------
make_local_base() {  # a Debian bookworm root file system with python3 (3.11) and its venv module
    local rootfs
    if ! command -v debootstrap >/dev/null 2>&1; then
        say "debootstrap is not installed (Debian: apt-get install debootstrap)"; return 1
    fi
    rootfs=$(mktemp -d /var/tmp/typhoon-base-rootfs.XXXXXX)
    say "making $LOCAL_BASE with debootstrap from $DEBIAN_MIRROR into $rootfs"
    debootstrap --variant=minbase --include=python3,python3-venv,ca-certificates bookworm "$rootfs" "$DEBIAN_MIRROR" \
        >"$CHECK_DIR/debootstrap.log" 2>&1 || { tail -n 20 "$CHECK_DIR/debootstrap.log"; rm -rf "$rootfs"; return 1; }
    rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/*
    tar -C "$rootfs" -c . | "${engine[@]}" import \
        --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
        --change 'ENV LANG=C.UTF-8' --change 'CMD ["/bin/bash"]' - "$LOCAL_BASE" >/dev/null
    local status=$?
    rm -rf "$rootfs"
    return $status
}

started=$SECONDS
default_base=$(sed -n 's/^ARG BASE_IMAGE=//p' Dockerfile)
if [ -n "${BASE_IMAGE:-}" ]; then
    base=$BASE_IMAGE how="given (BASE_IMAGE)"
elif image_exists "$default_base"; then
    base=$default_base how="the Dockerfile's default, already local"
elif timeout 120 "${engine[@]}" pull "$default_base" >"$CHECK_DIR/pull.log" 2>&1; then
    base=$default_base how="the Dockerfile's default, pulled"
else
    say "cannot pull $default_base: $(tail -n 1 "$CHECK_DIR/pull.log")"
    base=$LOCAL_BASE
    if image_exists "$base"; then how="local stand-in, made earlier"
    elif make_local_base; then how="local stand-in made with debootstrap (no registry reachable)"
    else how=""; fi
fi
if [ -z "$how" ] || ! image_exists "$base"; then
    record base FAIL "no base image (see above)"
elif python=$("${engine[@]}" run --rm --network none "${limits[@]}" "$base" python3 --version 2>&1); then
    record base PASS "$base: $how; $python ($((SECONDS - started)) s)"
else
    record base FAIL "$base: $how, but a container of it does not start: $python"
fi

# --- 2. the build -------------------------------------------------------------------------------
pip_setting() {  # the host pip's value of a setting (its environment variable first), e.g. find-links
    local variable=PIP_$(echo "$1" | tr a-z- A-Z_)
    if [ -n "${!variable:-}" ]; then echo "${!variable}"; return; fi
    python3 -m pip config list 2>/dev/null | sed -n "s/^[^=]*\.$1='\(.*\)'$/\1/p" | head -n 1
}

build_inputs=()
serve_torch_wheel() {  # serve the folder of pip's find-links that holds torch's wheel, for TORCH_FIND_LINKS
    local version variant dir wheel port
    version=$(sed -n 's/^ARG TORCH_VERSION=//p' Dockerfile)
    variant=$(sed -n 's/^ARG TORCH_VARIANT=//p' Dockerfile)
    for dir in $(pip_setting find-links); do
        dir=${dir#file://}
        for wheel in "$dir"/torch-"$version"+"$variant"-cp311-cp311-*linux*_"$(uname -m)".whl; do
            [ -f "$wheel" ] || continue
            port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
            python3 -m http.server --bind 127.0.0.1 "$port" --directory "$dir" >"$CHECK_DIR/wheel-server.log" 2>&1 &
            server_pid=$!
            trap 'kill "$server_pid" 2>/dev/null' EXIT
            build_inputs+=(--build-arg "TORCH_FIND_LINKS=http://127.0.0.1:$port/")
            say "serving $(basename "$wheel") from pip's find-links $dir at http://127.0.0.1:$port/ (TORCH_FIND_LINKS)"
            return 0
        done
    done
    say "no torch $version+$variant wheel in pip's find-links: the build fetches it from PyTorch's index"
}

pass_pip_cert() {  # the host pip's CA bundle as the build secret pip-cert (a proxy may present its own certificate)
    local cert
    cert=$(pip_setting cert)
    if [ -n "$cert" ] && [ -f "$cert" ]; then
        build_inputs+=(--secret "id=pip-cert,src=$cert")
        say "pip's CA bundle $cert goes in as the build secret pip-cert"
    fi
}

started=$SECONDS
if [ "$failed" = 0 ]; then
    if [ -z "$CONTEXT" ]; then
        CONTEXT=$CHECK_DIR/clone
        rm -rf "$CONTEXT"
        git clone --quiet --no-checkout "$repo" "$CONTEXT" && git -C "$CONTEXT" checkout --quiet --detach "$(git rev-parse HEAD)"
        say "build context: a fresh clone of $(git rev-parse --short HEAD) ($(git log -1 --format=%s | cut -c1-80))"
    fi
    serve_torch_wheel
    pass_pip_cert
    if "${engine[@]}" build --network host "${limits[@]}" "${build_inputs[@]}" -t "$IMAGE" --build-arg "BASE_IMAGE=$base" \
        --build-arg "UID=$CHECK_UID" --build-arg "GID=$CHECK_GID" -f "$CONTEXT/Dockerfile" "$CONTEXT" \
        2>&1 | tee "$CHECK_DIR/build.log"; then
        user=$("${engine[@]}" image inspect --format '{{.Config.User}}' "$IMAGE")
        record build PASS "$IMAGE from $base, USER $user ($((SECONDS - started)) s)"
    else
        record build FAIL "see $CHECK_DIR/build.log ($((SECONDS - started)) s)"
    fi
fi

owners() { find "$1" -type f -printf '%U:%G\n' 2>/dev/null | sort | uniq -c | tr '\n' ' '; }

# --- 3. the smoke profile, as an arbitrary uid ----------------------------------------------------
if [ "$failed" = 0 ]; then
    started=$SECONDS
    smoke_out=$CHECK_DIR/smoke-outputs
    mkdir -p "$smoke_out" && chown "$RUN_UID:$RUN_GID" "$smoke_out" 2>/dev/null
    say "smoke: python -m typhoon reproduce --profile smoke --no-estimate, as uid $RUN_UID:$RUN_GID, outputs mounted from $smoke_out"
    timeout "$SMOKE_TIMEOUT" "${engine[@]}" run --rm --network none "${limits[@]}" --user "$RUN_UID:$RUN_GID" \
        -v "$smoke_out:/bundle/outputs" "$IMAGE" python -m typhoon reproduce --profile smoke --no-estimate \
        >"$CHECK_DIR/smoke.log" 2>&1
    status=$?
    cat "$CHECK_DIR/smoke.log"
    if [ "$status" = 0 ] && [ -f "$smoke_out/smoke/results.csv" ] && [ -f "$smoke_out/smoke/report.html" ]; then
        record smoke PASS "exit 0; smoke/results.csv and report.html in the mount; file owners: $(owners "$smoke_out") ($((SECONDS - started)) s)"
    else
        record smoke FAIL "exit $status; see $CHECK_DIR/smoke.log ($((SECONDS - started)) s)"
    fi
fi

# --- 4. the default command, for a bounded time --------------------------------------------------
if [ "$failed" = 0 ]; then
    started=$SECONDS
    out=$CHECK_DIR/outputs
    name=typhoon-check-default-$$
    mkdir -p "$out" && chown "$CHECK_UID:$CHECK_GID" "$out" 2>/dev/null
    say "default command ($("${engine[@]}" image inspect --format '{{json .Config.Cmd}}' "$IMAGE")) for ${DEFAULT_SECONDS} s, outputs mounted from $out"
    "${engine[@]}" run -d --name "$name" --network none "${limits[@]}" -v "$out:/bundle/outputs" "$IMAGE" >/dev/null
    sleep "$DEFAULT_SECONDS"
    running=$("${engine[@]}" inspect --format '{{.State.Running}}' "$name" 2>/dev/null)
    "${engine[@]}" logs "$name" >"$CHECK_DIR/default.log" 2>&1
    "${engine[@]}" stop -t 60 "$name" >/dev/null 2>&1
    exit_code=$("${engine[@]}" inspect --format '{{.State.ExitCode}}' "$name" 2>/dev/null)
    "${engine[@]}" logs "$name" >"$CHECK_DIR/default.log" 2>&1  # everything, the stop included
    "${engine[@]}" rm -f "$name" >/dev/null 2>&1
    cat "$CHECK_DIR/default.log"
    say "what it wrote (outputs/, 4 levels):"
    find "$out" -maxdepth 4 -printf '  %U:%G %P\n' | sort -k2 | head -n 40
    problems=()
    [ "$running" = true ] || problems+=("it had stopped before ${DEFAULT_SECONDS} s (exit $exit_code)")
    [ -d "$out/cpu" ] || problems+=("nothing in outputs/cpu")
    foreign=$(find "$out" -mindepth 1 ! -user "$CHECK_UID" -printf '%P ' | head -c 300)
    [ -z "$foreign" ] || problems+=("files not owned by uid $CHECK_UID: $foreign")
    ! grep -q "reused .*from results/" "$CHECK_DIR/default.log" || problems+=("records reused from results/")
    ! grep -q "Traceback" "$CHECK_DIR/default.log" || problems+=("a traceback in its output")
    training=$(grep -E "^grid: [0-9]+/[0-9]+ done.*; running .* step [0-9]+" "$CHECK_DIR/default.log" | tail -n 1)
    [ -n "$training" ] || problems+=("no cell was training yet (no 'grid: ... running ... step N' line)")
    if [ "${#problems[@]}" = 0 ]; then
        record default PASS "running after ${DEFAULT_SECONDS} s ('$training'), writing outputs/cpu, owned by $CHECK_UID:$CHECK_GID; stopped (exit $exit_code)"
    else
        record default FAIL "$(IFS=';'; echo "${problems[*]}")"
    fi
fi

echo
echo "=== container check: ${engine[*]}, image $IMAGE, $(date -u '+%Y-%m-%d %H:%M UTC') ==="
printf '%s\n' "${summary[@]}"
echo "logs: $CHECK_DIR"
[ "$failed" = 0 ] && echo "RESULT: PASS" || echo "RESULT: FAIL"
exit "$failed"
