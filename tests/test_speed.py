"""typhoon.training.speed: process-level settings that change speed, never results."""

import json
import subprocess
import sys

import pytest
from conftest import REPO

from typhoon.training import speed

# Three fp32 training steps of a seeded tiny BERT MLM (dropout on) with 40 MB word embeddings, so that
# the embedding gradient is above glibc's mmap threshold; once with glibc's default settings and once
# after tune_malloc, in one fresh process (mallopt settings last for the process).
SCRIPT = """
import json, resource, torch
from transformers import BertConfig, BertForMaskedLM
from typhoon.training import speed
from typhoon.models.mlm_head import MaskedLM

def losses():
    torch.manual_seed(0)
    config = BertConfig(vocab_size=26000, hidden_size=384, num_hidden_layers=1, num_attention_heads=6,
                        intermediate_size=512, attn_implementation="eager")
    mlm = MaskedLM(BertForMaskedLM(config)).train()
    optimizer = torch.optim.AdamW(mlm.parameters(), lr=1e-3)
    gen = torch.Generator().manual_seed(1)
    out = []
    for _ in range(3):
        ids = torch.randint(5, 26000, (8, 32), generator=gen)
        labels = torch.where(torch.rand(8, 32, generator=gen) < 0.15, ids, -100)
        loss = mlm(input_ids=ids, attention_mask=torch.ones_like(ids), labels=labels)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        out.append(loss.item())
    return out

default = losses()
choice = speed.configure("cpu")
print(json.dumps({"default": default, "tuned": losses(), "choice": choice}))
"""


@pytest.mark.slow  # a fresh interpreter trains a tiny BERT twice
def test_tuned_malloc_gives_bit_identical_training():
    out = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, cwd=REPO, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["choice"] == {"malloc": "tuned"}  # this test machine runs glibc
    assert result["tuned"] == result["default"]


def test_configure_keeps_the_default_allocator_off_the_cpu_and_when_asked(monkeypatch):
    monkeypatch.setattr(speed, "tune_malloc", _never_called)
    assert speed.configure("cuda") == {"malloc": "default"}
    assert speed.configure("mps") == {"malloc": "default"}
    assert speed.configure("cpu", malloc="default") == {"malloc": "default"}
    with pytest.raises(ValueError, match="unknown malloc setting 'jemalloc'"):
        speed.configure("cpu", malloc="jemalloc")


def test_tune_malloc_leaves_other_c_libraries_alone(monkeypatch):
    monkeypatch.setattr(speed.platform, "libc_ver", lambda: ("", ""))  # musl, or no libc found
    assert speed.tune_malloc.__wrapped__() == "default: not glibc"
    monkeypatch.setattr(speed.platform, "system", lambda: "Darwin")
    assert speed.tune_malloc.__wrapped__() == "default: not glibc"


def _never_called():
    raise AssertionError("tune_malloc must not run here")


_never_called.cache_info = lambda: type("Info", (), {"currsize": 0})()
