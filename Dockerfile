# The runtime image: the locked runtime packages (requirements/runtime.txt: the core install and the bundle's
# extra, hash-checked; no dev tools),
# torch 2.13.0 in the build TORCH_VARIANT names, and the package with its bundled GLUE data (CoLA, MRPC).
# It runs as a non-root user (UID/GID below) and works under any other uid (`--user`), so results
# written into a mounted outputs/ belong to the host user who ran it.
#
# CPU:  docker build --build-arg UID=$(id -u) --build-arg GID=$(id -g) -t typhoon-bundle .
#       docker run --rm typhoon-bundle                         # the `cpu` profile into outputs/cpu; no mount needed
#       docker run --rm -v "$PWD/outputs:/bundle/outputs" typhoon-bundle    # ... results in ./outputs/cpu
# GPU:  docker build --build-arg TORCH_VARIANT=cu128 -t typhoon-bundle:cu128 .
#       the paper's hub backbones need the hub once (or a Hugging Face cache mounted at /home/typhoon/.cache/huggingface):
#       docker run --rm --gpus all -e HF_HUB_OFFLINE=0 -v "$PWD/outputs:/bundle/outputs" typhoon-bundle:cu128 \
#           python -m typhoon reproduce --profile paper --workers 1
# No registry (Docker Hub unreachable): any Debian-like image with python3 (3.11), its venv module and apt
# stands in, e.g. `--build-arg BASE_IMAGE=typhoon-base:bookworm`, made by scripts/container_check.sh with
# debootstrap. A local torch wheel: TORCH_FIND_LINKS below.

# The Python the published numbers came from (a digest pin, @sha256:..., would be stricter still).
ARG BASE_IMAGE=python:3.11.7-slim-bookworm
FROM ${BASE_IMAGE}

ARG TORCH_VERSION=2.13.0
ARG TORCH_VARIANT=cpu
# The user the image runs as; `--build-arg UID=$(id -u)` makes it the host user (any uid also works at run time).
ARG UID=1000
ARG GID=1000
# HOME and every cache a run or a kernel writes (matplotlib, IPython, Jupyter, Hugging Face) lie in one
# world-writable folder, so that an arbitrary `--user` uid, one with no entry in /etc/passwd, can write them.
ENV PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    HF_HUB_OFFLINE=1 \
    HF_DATASETS_OFFLINE=1 \
    VIRTUAL_ENV=/opt/venv \
    PATH=/opt/venv/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    HOME=/home/typhoon \
    XDG_CACHE_HOME=/home/typhoon/.cache \
    HF_HOME=/home/typhoon/.cache/huggingface \
    MPLCONFIGDIR=/home/typhoon/.config/matplotlib \
    IPYTHONDIR=/home/typhoon/.ipython \
    JUPYTER_CONFIG_DIR=/home/typhoon/.jupyter \
    JUPYTER_DATA_DIR=/home/typhoon/.local/share/jupyter \
    JUPYTER_RUNTIME_DIR=/home/typhoon/.local/share/jupyter/runtime

# git: run records store the commit they were made from ("safe.directory": the checkout belongs to root,
# the runs to another user). The packages go into a venv, which works on the official Python image and
# on a plain Debian base alike (Debian's own pip refuses to install into the system Python).
RUN apt-get update && apt-get install -y --no-install-recommends git && rm -rf /var/lib/apt/lists/* \
    && git config --system --add safe.directory '*' \
    && python3 -m venv "$VIRTUAL_ENV"
WORKDIR /bundle
# Two optional inputs from the machine that builds, neither of which becomes part of the image:
# TORCH_FIND_LINKS, where pip finds a torch wheel of exactly the asked build with no index (its find-links:
# a URL such as a folder served by `python3 -m http.server`, with `--network host`); and the secret
# `pip-cert` (`--secret id=pip-cert,src=<CA bundle>`), for a proxy between here and PyPI that presents
# its own certificate. Without them: PyPI and PyTorch's index, with the base image's CA certificates.
COPY requirements/runtime.txt requirements/runtime.txt
RUN --mount=type=secret,id=pip-cert \
    if [ -f /run/secrets/pip-cert ]; then export PIP_CERT=/run/secrets/pip-cert; fi \
    && pip install --require-hashes --no-deps -r requirements/runtime.txt
COPY scripts/install_torch.sh scripts/install_torch.sh
ARG TORCH_FIND_LINKS=
RUN --mount=type=secret,id=pip-cert \
    if [ -f /run/secrets/pip-cert ]; then export PIP_CERT=/run/secrets/pip-cert; fi \
    && env ${TORCH_FIND_LINKS:+PIP_FIND_LINKS="$TORCH_FIND_LINKS"} \
        scripts/install_torch.sh python "${TORCH_VERSION}" "${TORCH_VARIANT}"
COPY . /bundle
RUN pip install --no-deps --no-build-isolation -e ".[bundle]" && pip check \
    && (getent group "$GID" >/dev/null || groupadd --gid "$GID" typhoon) \
    && useradd --non-unique --uid "$UID" --gid "$GID" --no-create-home --home-dir "$HOME" typhoon \
    && mkdir -p "$HOME" /bundle/outputs && chown "$UID:$GID" "$HOME" /bundle/outputs \
    && chmod 1777 "$HOME" /bundle/outputs
USER ${UID}:${GID}
# The package is installed from /bundle (a checkout: notebooks/ beside it), so the default output folder
# is /bundle/outputs/<profile>, as `make reproduce` writes outputs/<profile> in a clone.
CMD ["python", "-m", "typhoon", "reproduce", "--profile", "cpu"]
