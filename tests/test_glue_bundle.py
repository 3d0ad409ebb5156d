"""The GLUE files bundled in the package: provenance, checksums, byte identity, and fetching other tasks."""

from __future__ import annotations

import hashlib
import re
import shutil
import zipfile

import pytest
from conftest import REPO

from typhoon.cli import main
from typhoon.data import glue_files as data
from typhoon.data.glue_files import (
    BUNDLED_GLUE_DIR,
    CHECKSUM_FILE,
    fetch_glue,
    load_glue,
    locate_glue,
    read_checksums,
)

# A folder of the curated official files beside the checkout (../shared/data/glue), where there is one: the
# bundled files are compared with it.
SHARED = next((path for path in (REPO.parent / "shared" / "data" / "glue", REPO.parents[1] / "shared" / "data" / "glue")
               if path.is_dir()), None)
BUNDLED_TASK_FOLDERS = ("CoLA", "MRPC")


def sha256(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def git_blob(path) -> str:
    data_bytes = path.read_bytes()
    return hashlib.sha1(b"blob %d\0" % len(data_bytes) + data_bytes).hexdigest()


def bundled_files() -> list[str]:
    """Every bundled file but the manifests, relative to the bundle (tasks `data fetch` added are not the bundle)."""
    files = [path for folder in BUNDLED_TASK_FOLDERS for path in (BUNDLED_GLUE_DIR / folder).rglob("*")
             if path.is_file() and path.name != CHECKSUM_FILE]
    return sorted(path.relative_to(BUNDLED_GLUE_DIR).as_posix() for path in files)


def sources_table() -> dict[str, dict]:
    """The file table of glue_data/SOURCES.md: {file: {sha256, git_blob, bytes}}."""
    rows = {}
    for line in (BUNDLED_GLUE_DIR / "SOURCES.md").read_text(encoding="utf-8").splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) == 7 and re.fullmatch(r"[0-9a-f]{64}", cells[2]):
            rows[cells[0]] = {"sha256": cells[2], "git_blob": cells[3], "bytes": int(cells[6])}
    return rows


# --------------------------------------------------------------------------------------------------
# Provenance and integrity of the bundle


def test_bundle_matches_its_provenance_table():
    """Every bundled file has the sha256, git blob and size that SOURCES.md records, and the manifests agree."""
    table = sources_table()
    assert sorted(table) == bundled_files()
    for name, row in table.items():
        path = BUNDLED_GLUE_DIR / name
        assert (sha256(path), git_blob(path), path.stat().st_size) == (row["sha256"], row["git_blob"], row["bytes"]), name
    manifests = {f"{folder}/{name}": digest for folder in BUNDLED_TASK_FOLDERS
                 for name, digest in read_checksums(BUNDLED_GLUE_DIR / folder).items()}
    assert manifests == {name: row["sha256"] for name, row in table.items()}


@pytest.mark.skipif(SHARED is None, reason="no ../shared/data/glue beside this repository")
def test_bundle_is_byte_identical_to_shared():
    shared = sorted(path.relative_to(SHARED).as_posix() for path in SHARED.rglob("*") if path.is_file())
    assert [name for name in shared if name != "SOURCES.md"] == bundled_files()
    for name in shared:
        assert sha256(SHARED / name) == sha256(BUNDLED_GLUE_DIR / name), name


def test_mrpc_train_dev_test_rebuild_from_the_msr_sources():
    """The rule in SOURCES.md (download_glue_data.py's format_mrpc) rebuilds the three MRPC files byte for byte."""
    source = BUNDLED_GLUE_DIR / "MRPC" / "source"
    dev_ids = [line.strip().split("\t") for line in (source / "dev_ids.tsv").read_text(encoding="utf-8").splitlines()]
    header, *rows = (source / "msr_paraphrase_train.txt").read_text(encoding="utf-8").splitlines(keepends=True)
    train, dev = [header], [header]
    for row in rows:
        label, id1, id2, s1, s2 = row.strip().split("\t")
        (dev if [id1, id2] in dev_ids else train).append("\t".join([label, id1, id2, s1, s2]) + "\n")
    _, *test_rows = (source / "msr_paraphrase_test.txt").read_text(encoding="utf-8").splitlines(keepends=True)
    test = ["index\t#1 ID\t#2 ID\t#1 String\t#2 String\n"]
    for index, row in enumerate(test_rows):
        _, id1, id2, s1, s2 = row.strip().split("\t")
        test.append(f"{index}\t{id1}\t{id2}\t{s1}\t{s2}\n")
    for name, lines in (("train.tsv", train), ("dev.tsv", dev), ("test.tsv", test)):
        assert "".join(lines).encode("utf-8") == (BUNDLED_GLUE_DIR / "MRPC" / name).read_bytes(), name


@pytest.fixture()
def bundle_copy(tmp_path, monkeypatch):
    """A copy of the bundle standing in for it, so that a test may damage it; TYPHOON_GLUE_DIR unset."""
    copy = tmp_path / "glue_data"
    shutil.copytree(BUNDLED_GLUE_DIR / "CoLA", copy / "CoLA")
    monkeypatch.setattr(data, "BUNDLED_GLUE_DIR", copy)
    monkeypatch.delenv("TYPHOON_GLUE_DIR", raising=False)
    assert len(load_glue("cola")["validation"]) == 1043
    return copy


@pytest.mark.parametrize("damage", [
    lambda path: path.write_bytes(path.read_bytes()[:-200]),  # truncated
    lambda path: path.write_bytes(path.read_bytes().replace(b"\t1\t", b"\t0\t", 1)),  # one label flipped
], ids=["truncated", "changed"])
def test_a_damaged_bundled_file_is_refused_by_name(bundle_copy, damage):
    damage(bundle_copy / "CoLA" / "dev.tsv")
    with pytest.raises(ValueError, match=r"CoLA/dev\.tsv was changed or truncated.*git checkout -- typhoon/glue_data/CoLA"):
        load_glue("cola")


def test_a_bundled_task_without_its_manifest_is_refused(bundle_copy):
    (bundle_copy / "CoLA" / CHECKSUM_FILE).unlink()
    with pytest.raises(ValueError, match=r"SHA256SUMS is missing"):
        load_glue("cola")


def test_an_unofficial_copy_is_read_but_pointed_out(glue_dir, tmp_path):
    (tmp_path / "MRPC").mkdir()
    for name in ("train.tsv", "dev.tsv"):
        (tmp_path / "MRPC" / name).write_bytes((BUNDLED_GLUE_DIR / "MRPC" / name).read_bytes())
    train = tmp_path / "MRPC" / "train.tsv"
    train.write_bytes(train.read_bytes().replace(b"Amrozi", b"Amrozy", 1))
    with pytest.warns(UserWarning, match=r"train\.tsv is not the official GLUE file"):
        assert load_glue("mrpc", tmp_path)["train"][0]["sentence1"].startswith("Amrozy")


# --------------------------------------------------------------------------------------------------
# Fetching a task that is not bundled (from a local zip standing in for the official one)

RTE_HEADER = "index\tsentence1\tsentence2\tlabel\n"


def rte_zip(tmp_path, train_rows=("0\tA dog runs.\tAn animal moves.\tentailment\n",
                                  "1\tIt rains.\tThe sun shines.\tnot_entailment\n")) -> str:
    """A zip in the layout of the official RTE.zip; its file:// URL."""
    path = tmp_path / "RTE.zip"
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("RTE/train.tsv", RTE_HEADER + "".join(train_rows))
        zf.writestr("RTE/dev.tsv", RTE_HEADER + "0\tA cat sleeps.\tA cat rests.\tentailment\n")
        zf.writestr("RTE/test.tsv", "index\tsentence1\tsentence2\n0\tA.\tB.\n")
        zf.writestr("RTE/notes/readme.txt", "not a split")
    return path.as_uri()


def test_fetch_writes_the_layout_and_a_manifest(tmp_path):
    root = tmp_path / "glue"
    folder = fetch_glue("rte", root, url=rte_zip(tmp_path))
    assert folder == root / "RTE"
    assert sorted(p.name for p in folder.iterdir()) == [CHECKSUM_FILE, "dev.tsv", "test.tsv", "train.tsv"]
    assert read_checksums(folder) == {name: sha256(folder / name) for name in ("dev.tsv", "test.tsv", "train.tsv")}
    loaded = load_glue("rte", root)
    assert (len(loaded["train"]), len(loaded["validation"]), len(loaded["test"])) == (2, 1, 1)
    assert loaded["train"]["label"] == [0, 1]
    # present: nothing is downloaded again (this URL does not exist)
    assert fetch_glue("rte", root, url=(tmp_path / "gone.zip").as_uri()) == folder
    # a fetched file is checked like a bundled one
    (folder / "dev.tsv").write_text(RTE_HEADER + "0\tA cat sleeps.\tA cat rests.\tnot_entailment\n")
    with pytest.raises(ValueError, match=r"RTE/dev\.tsv was changed or truncated.*data fetch rte --dir .* --force"):
        load_glue("rte", root)
    fetch_glue("rte", root, url=rte_zip(tmp_path), force=True)
    assert load_glue("rte", root)["validation"]["label"] == [0]


def test_fetch_defaults_to_beside_the_bundle_where_load_glue_finds_it(tmp_path, monkeypatch):
    monkeypatch.setattr(data, "BUNDLED_GLUE_DIR", tmp_path / "glue_data")
    monkeypatch.delenv("TYPHOON_GLUE_DIR", raising=False)
    fetch_glue("rte", url=rte_zip(tmp_path))
    assert locate_glue("rte") == data.GlueSource("bundled", tmp_path / "glue_data" / "RTE")
    monkeypatch.setenv("TYPHOON_GLUE_DIR", str(tmp_path / "mine"))
    assert data.default_fetch_dir() == tmp_path / "mine"


@pytest.mark.parametrize("make_url, error, message", [
    (lambda tmp: (tmp / "missing.zip").as_uri(), ConnectionError, "could not download GLUE rte"),
    (lambda tmp: (tmp / "plain.txt").as_uri(), ValueError, "not a zip archive"),
    (lambda tmp: rte_zip(tmp, train_rows=("0\tonly two\n",)), ValueError, r"train\.tsv, line 2: expected 4"),
], ids=["unreachable", "not-a-zip", "malformed"])
def test_a_failed_fetch_leaves_nothing(tmp_path, make_url, error, message):
    (tmp_path / "plain.txt").write_text("hello")
    root = tmp_path / "glue"
    with pytest.raises(error, match=message):
        fetch_glue("rte", root, url=make_url(tmp_path))
    assert not (root / "RTE").exists() and list(root.glob(".RTE*")) == []


def test_mrpc_has_no_official_zip(tmp_path):
    with pytest.raises(ValueError, match="no official zip.*bundle carries it"):
        fetch_glue("mrpc", tmp_path)


def test_data_fetch_command(tmp_path, capsys):
    root = tmp_path / "glue"
    assert main(["data", "fetch", "rte", "--dir", str(root), "--url", rte_zip(tmp_path)]) == 0
    assert str(root / "RTE") in capsys.readouterr().out
    assert main(["data", "fetch", "qnli", "--dir", str(root), "--url", (tmp_path / "nope.zip").as_uri()]) == 2
    assert "could not download GLUE qnli" in capsys.readouterr().err
    assert not (root / "QNLI").exists()
