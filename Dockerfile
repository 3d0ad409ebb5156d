# The runtime image: the locked runtime packages (requirements/runtime.txt, hash-checked; no dev tools),
# torch 2.13.0 in the build TORCH_VARIANT names, and the package with its bundled GLUE data (CoLA, MRPC).
#
# CPU:  docker build -t typhoon-bundle .
#       docker run --rm typhoon-bundle                        # the `cpu` profile; no mount needed
#       docker run --rm -v "$PWD/outputs:/bundle/outputs" typhoon-bundle    # ... keeping the results
# GPU:  docker build --build-arg TORCH_VARIANT=cu128 -t typhoon-bundle:cu128 .
#       the paper's hub backbones need the hub once (or a Hugging Face cache mounted at /root/.cache/huggingface):
#       docker run --rm --gpus all -e HF_HUB_OFFLINE=0 -v "$PWD/outputs:/bundle/outputs" typhoon-bundle:cu128 \
#           python -m typhoon reproduce --profile paper --workers 1
# The Python the published numbers came from (a digest pin, @sha256:..., would be stricter still).
FROM python:3.11.7-slim-bookworm

ARG TORCH_VERSION=2.13.0
ARG TORCH_VARIANT=cpu
ENV PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    HF_HUB_OFFLINE=1 \
    HF_DATASETS_OFFLINE=1

# git: run records store the commit they were made from.
RUN apt-get update && apt-get install -y --no-install-recommends git && rm -rf /var/lib/apt/lists/*
WORKDIR /bundle
COPY requirements/runtime.txt requirements/runtime.txt
RUN pip install --require-hashes --no-deps -r requirements/runtime.txt
COPY scripts/install_torch.sh scripts/install_torch.sh
RUN scripts/install_torch.sh python "${TORCH_VERSION}" "${TORCH_VARIANT}"
COPY . /bundle
RUN pip install --no-deps --no-build-isolation -e . && pip check
CMD ["python", "-m", "typhoon", "reproduce", "--profile", "cpu", "--out", "/bundle/outputs"]
