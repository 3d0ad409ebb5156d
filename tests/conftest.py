"""Shared fixtures: the real GLUE files (bundled with the package), the real uncased WordPiece
tokenizer, and small saved checkpoints of every supported backbone family."""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
# Tests never reach a hub; the data is the official TSVs bundled in the package (typhoon/glue_data),
# whatever TYPHOON_GLUE_DIR says in the user's environment (removed below).
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["HF_DATASETS_OFFLINE"] = "1"
# The estimate keeps its calibration for a restart (typhoon.runner.calibration_cache): a test must calibrate
# for itself, never reuse what an earlier test or a user's run kept. One fresh cache per test session, made
# whatever TYPHOON_CACHE_DIR the user set. Under pytest-xdist every worker is a session of its own: it imports
# this file and makes its own, replacing the controller's it inherited.
WORKER = os.environ.get("PYTEST_XDIST_WORKER", "main")
os.environ["TYPHOON_CACHE_DIR"] = tempfile.mkdtemp(prefix=f"typhoon-test-cache-{WORKER}-")
atexit.register(shutil.rmtree, os.environ["TYPHOON_CACHE_DIR"], ignore_errors=True)
# The variables above are the suite's own; no test reads any other TYPHOON_* or HF_* variable of the user's
# environment (a TYPHOON_GLUE_DIR or HF_HOME set for real work must not change what a test sees). They are
# removed here, before a fixture or a test module imports the package, and again around each test
# (hermetic_environment), in case one was set outside monkeypatch. A test that needs one sets it itself.
SUITE_ENVIRONMENT = {name: os.environ[name] for name in
                     ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TYPHOON_CACHE_DIR")}


def foreign_variables() -> list[str]:
    """The TYPHOON_* and HF_* variables in the environment that the suite did not set."""
    return [name for name in os.environ if name.startswith(("TYPHOON_", "HF_")) and name not in SUITE_ENVIRONMENT]


for _name in foreign_variables():
    del os.environ[_name]


@pytest.fixture(autouse=True)
def hermetic_environment(monkeypatch):
    """Each test starts with the suite's TYPHOON_* and HF_* variables only, at the suite's values."""
    for name in foreign_variables():
        monkeypatch.delenv(name)
    for name, value in SUITE_ENVIRONMENT.items():
        monkeypatch.setenv(name, value)


# Every supported family (typhoon.models.mlm_head.FAMILIES; test_models checks the two agree), listed here so
# that collecting the tests does not import transformers.
FAMILY_NAMES = ["bert", "distilbert", "roberta", "deberta-v2", "modernbert", "electra"]


@pytest.fixture(scope="session")
def glue_dir() -> Path:
    """The GLUE folder load_glue reads CoLA and MRPC from."""
    from typhoon.data.glue_files import locate_glue

    return locate_glue("mrpc").folder.parent


@pytest.fixture(scope="session")
def tokenizer():
    from typhoon.models.backbones import load_tokenizer, minilm_dir

    return load_tokenizer(minilm_dir())


def _tokenized(task: str, glue_dir: Path, tokenizer, n: int = 256):
    from typhoon.data.glue_files import load_glue
    from typhoon.data.tokenizing import tokenize_glue

    raw = load_glue(task, glue_dir)
    small = raw.__class__({k: v.select(range(min(n, len(v)))) for k, v in raw.items() if k != "test"})
    return tokenize_glue(small, tokenizer, task, max_length=128)


@pytest.fixture(scope="session")
def mrpc_tokenized(glue_dir, tokenizer):
    """The first 256 MRPC train and dev pairs, tokenized with word ids."""
    return _tokenized("mrpc", glue_dir, tokenizer)


@pytest.fixture(scope="session")
def cola_tokenized(glue_dir, tokenizer):
    """The first 256 CoLA train and dev sentences, tokenized with word ids."""
    return _tokenized("cola", glue_dir, tokenizer)


def make_batch(tokenized_split, tokenizer, start: int = 0, size: int = 32):
    from typhoon.data.batching import collate

    rows = [tokenized_split[i] for i in range(start, start + size)]
    return collate(rows, tokenizer.pad_token_id)


@pytest.fixture()
def mrpc_batch(mrpc_tokenized, tokenizer):
    """A padded batch of 32 real MRPC pairs (see docs/CONTRACTS.md for the keys)."""
    return make_batch(mrpc_tokenized["train"], tokenizer)


@pytest.fixture()
def cola_batch(cola_tokenized, tokenizer):
    """A padded batch of 32 real CoLA sentences."""
    return make_batch(cola_tokenized["train"], tokenizer)


@pytest.fixture(scope="session")
def mrpc_sentences(glue_dir) -> list[str]:
    """The first 1000 MRPC training pairs' sentences: the text the family tokenizers are trained on
    (enough for a 2000-token vocabulary, and fast)."""
    from typhoon.data.glue_files import load_glue

    train = load_glue("mrpc", glue_dir)["train"].select(range(1000))
    return list(train["sentence1"]) + list(train["sentence2"])


@dataclass(frozen=True)
class SavedBackbone:
    family: str  # the transformers model_type
    folder: Path  # config.json, model.safetensors and tokenizer files, as a hub checkpoint
    model: object  # the random-init *ForMaskedLM that was saved (do not modify: shared by the session)
    tokenizer: object


@pytest.fixture(scope="session", params=FAMILY_NAMES)
def saved_backbone(request, tmp_path_factory, tokenizer, mrpc_sentences) -> SavedBackbone:
    """A small random-init model of every supported family with a tokenizer of its kind, saved to a folder
    (see tests/family_backbones.py)."""
    import torch
    from family_backbones import save_family_backbone

    folder = tmp_path_factory.mktemp(request.param)
    torch.manual_seed(0)
    model, family_tokenizer = save_family_backbone(request.param, folder, mrpc_sentences, tokenizer)
    return SavedBackbone(request.param, folder, model, family_tokenizer)


@pytest.fixture(scope="session")
def family_batch(saved_backbone, glue_dir):
    """16 real MRPC pairs tokenized with the saved backbone's own tokenizer, padded (docs/CONTRACTS.md)."""
    return make_batch(_tokenized("mrpc", glue_dir, saved_backbone.tokenizer, n=16)["train"], saved_backbone.tokenizer,
                      size=16)


# --- the tiers (pyproject.toml's markers; the Makefile's test targets) -------------------------------------
# `slow` marks every test that starts a process that does real work -- a Python interpreter (the CLI, a
# notebook kernel, pip, a lab server) or a browser -- or that trains a model; `make test-fast` leaves them
# out. A test left unmarked that starts such a process fails here, naming the command, so the fast tier
# stays fast as tests are added. Millisecond commands (git, `make -n`, a shell script given a fake
# interpreter) are allowed.
_HEAVY_PROGRAMS = ("python", "chromium", "chrome", "jupyter", "pip")


def _heavy_program(args) -> str | None:
    import subprocess
    import sys

    argv = [args] if isinstance(args, (str, bytes, os.PathLike)) else list(args)
    if not argv:
        return None
    program = (os.fsdecode(argv[0]).split() or [""])[0] if isinstance(args, str) else os.fsdecode(argv[0])
    name = Path(program).name
    if program == sys.executable or any(name.startswith(heavy) for heavy in _HEAVY_PROGRAMS):
        return subprocess.list2cmdline([os.fsdecode(a) for a in argv])[:200]
    return None


def torch_threads_kept():
    """torch's thread count as it was on entry, again on exit. A run's config sets the count for the process
    (the grid's cells are processes of their own), and a count left behind would change the numerics, and
    the records, of the next test in this worker that trains in process. Torch is not imported for this."""
    from typhoon import machine

    return machine.torch_threads() if "torch" in sys.modules else contextlib.nullcontext()


@pytest.fixture(autouse=True)
def _torch_threads_restored():
    """Each test ends with torch's thread count as it began (module fixtures that train use
    :func:`torch_threads_kept` themselves: they are set up before this)."""
    with torch_threads_kept():
        yield


@pytest.fixture(autouse=True)
def _processes_only_in_slow_tests(request, monkeypatch):
    """Fails an unmarked test that starts a Python interpreter or a browser (see above). It sees the test and
    its function-scoped fixtures; a module- or session-scoped fixture is set up before it."""
    if request.node.get_closest_marker("slow") is not None:
        yield
        return
    import subprocess

    started = []
    popen_init = subprocess.Popen.__init__

    def guarded_init(self, args, *rest, **kwargs):
        command = _heavy_program(args)
        if command is not None:
            started.append(command)
        return popen_init(self, args, *rest, **kwargs)

    monkeypatch.setattr(subprocess.Popen, "__init__", guarded_init)
    # worker processes (typhoon.runner.workers) are spawned by multiprocessing, not through subprocess.Popen
    import multiprocessing.popen_spawn_posix as spawn

    spawn_launch = spawn.Popen._launch

    def guarded_launch(self, process_obj):
        started.append(f"a spawned Python process ({process_obj.name})")
        return spawn_launch(self, process_obj)

    monkeypatch.setattr(spawn.Popen, "_launch", guarded_launch)
    yield
    if started:
        pytest.fail(f"starts {started[0]!r} but is not marked slow: mark it @pytest.mark.slow (the fast tier "
                    "starts no process that does real work; tests/conftest.py says why)", pytrace=False)


# --- the order, for two workers ------------------------------------------------------------------------------
# `make test` spreads the files over two pytest-xdist workers (`--dist loadfile --no-loadscope-reorder`: a
# file's module fixtures, such as test_reproduce's smoke run, are made once), handing out files
# in collection order. The two longest files (docs/testing.md: 10-15 min each on one core) go first, one
# to each worker, so the rest fills in around them instead of one of them starting last.
LONGEST_FIRST = ("test_reproduce.py", "test_slurm.py")


def pytest_collection_modifyitems(config, items):
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))  # stable: the rest keep their order


def pytest_runtest_setup(item):
    """The ``gpu`` tier is skipped, saying why, where torch sees no CUDA device (torch is asked only then)."""
    if item.get_closest_marker("gpu") is None:
        return
    import torch

    if not torch.cuda.is_available():
        pytest.skip(f"gpu tier: torch {torch.__version__} sees no CUDA device here")
