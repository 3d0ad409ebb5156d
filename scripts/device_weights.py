"""The weights a GPU machine needs, in parts small enough for one copy each, joined there without loss, and
what the curves send back, landed here (used by ``scripts/device_bundle.py``; see its docstring).

- :func:`split_files`: files as one byte stream cut into pieces, each with the manifest (every file's SHA-256 and
  destination, every piece's SHA-256, the model's digest);
- :func:`assemble`: on the GPU machine, the pieces joined into the files, each checked (stdlib only);
- :func:`pack`: there, the curves' folders as a few pieces of an xz tar, under the limit on a file;
- :func:`land`: here, the curves' folders that came back unpacked into the study folder.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
import tarfile
from pathlib import Path

WEIGHT_PARTS = 2  # copies the weights travel in: each under the limit with the working tree
MANIFEST = "manifest.json"


class BundleError(Exception):
    """Bad input or a state the bundle cannot be made from: one line, exit 2."""


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def base_embeddings(package_dir: Path, dest: Path) -> Path:
    """``dest``: the embedded MiniLM checkpoint's ``embeddings.*`` tensors alone, unchanged (safetensors). The
    adapted backbone replaces every other tensor it uses, so a model loaded from these and the shipped tensors is
    the model (the manifest's digest checks it where they arrive)."""
    from safetensors.numpy import load_file, save_file

    tensors = {name: t for name, t in load_file(package_dir / "model" / "model.safetensors").items()
               if name.startswith("embeddings.")}
    save_file(tensors, str(dest), metadata={"format": "pt"})
    return dest


def split_files(files: dict[str, Path], bundle: Path, parts: int = WEIGHT_PARTS, digest: str | None = None) -> list[Path]:
    """The ``files`` ({destination relative to the repository: source}) as one byte stream cut into ``parts``
    pieces of near-equal size, ``bundle/part-<k>/weights.<k>``, each folder with the manifest: every file's
    destination, size and SHA-256, every piece's size and SHA-256, and ``digest`` (the model's). Returns the
    part folders."""
    entries = [{"path": dest, "bytes": src.stat().st_size, "sha256": _sha256(src)} for dest, src in files.items()]
    total = sum(entry["bytes"] for entry in entries)
    size = -(-total // parts)
    folders = [bundle / f"part-{k}" for k in range(1, parts + 1)]
    for folder in folders:
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)
    pieces = [folder / f"weights.{k}" for k, folder in enumerate(folders, start=1)]
    stream = _Pieces(list(files.values()))
    for piece in pieces:
        with open(piece, "wb") as out:
            left = size
            while left and (chunk := stream.read(min(1 << 20, left))):
                out.write(chunk)
                left -= len(chunk)
    manifest = {"files": entries, "digest": digest,
                "parts": [{"name": piece.name, "bytes": piece.stat().st_size, "sha256": _sha256(piece)}
                          for piece in pieces]}
    for folder in folders:
        (folder / MANIFEST).write_text(json.dumps(manifest, indent=1) + "\n", encoding="utf-8")
    return folders


def assemble(bundle: Path, repo: Path) -> dict:
    """Join the pieces under ``bundle/part-*/`` into the files they carry, each written where it goes below
    ``repo`` (whole or not at all); every piece and every file checked against its SHA-256 first. A piece missing
    or altered is a BundleError naming it. Returns the manifest (its ``digest``: the model's, checked by the
    caller once the package can load it)."""
    manifests = sorted(bundle.glob(f"part-*/{MANIFEST}"))
    if not manifests:
        raise BundleError(f"{bundle}: no part-*/{MANIFEST}: copy the weights' parts first (device_bundle.py prepare "
                          "--job curve)")
    manifest = json.loads(manifests[0].read_text(encoding="utf-8"))
    pieces = []
    for k, part in enumerate(manifest["parts"], start=1):
        piece = bundle / f"part-{k}" / part["name"]
        if not piece.is_file():
            raise BundleError(f"{piece}: part {k} of {len(manifest['parts'])} is not here: copy {bundle.name}/"
                              f"part-{k} to this machine, then run this again")
        if piece.stat().st_size != part["bytes"] or _sha256(piece) != part["sha256"]:
            raise BundleError(f"{piece}: part {k} is not the one prepared (size or SHA-256 differs): copy it again")
        pieces.append(piece)
    stream = _Pieces(pieces)
    for entry in manifest["files"]:
        target = repo / entry["path"]
        target.parent.mkdir(parents=True, exist_ok=True)
        staging = target.with_name(f".{target.name}.tmp-{os.getpid()}")
        digest, left = hashlib.sha256(), entry["bytes"]
        with open(staging, "wb") as out:
            while left:
                chunk = stream.read(min(1 << 20, left))
                if not chunk:
                    staging.unlink()
                    raise BundleError(f"the parts end before {entry['path']} is whole")
                out.write(chunk)
                digest.update(chunk)
                left -= len(chunk)
        if digest.hexdigest() != entry["sha256"]:
            staging.unlink()
            raise BundleError(f"{entry['path']}: SHA-256 {digest.hexdigest()} after joining the parts, expected "
                              f"{entry['sha256']}")
        staging.replace(target)
    return manifest


class _Pieces:
    """The pieces' bytes read as one stream."""

    def __init__(self, paths: list[Path]):
        self.paths, self.handle = list(paths), None

    def read(self, n: int) -> bytes:
        while self.paths or self.handle:
            if self.handle is None:
                self.handle = open(self.paths.pop(0), "rb")
            chunk = self.handle.read(n)
            if chunk:
                return chunk
            self.handle.close()
            self.handle = None
        return b""


PIECE_BYTES = 15 * 2**20  # what comes back from the GPU machine: pieces under its limit on a file


def pack(folders: list[Path], dest: Path, piece_bytes: int = PIECE_BYTES) -> list[Path]:
    """``folders`` (each kept under its own name) as one xz-compressed tar cut into pieces,
    ``dest/curve.tar.xz.00``, ``.01``, ...: what a curve command sends back. Returns the pieces."""
    dest.mkdir(parents=True, exist_ok=True)
    for old in dest.glob("curve.tar.xz.[0-9][0-9]"):
        old.unlink()
    whole = dest / ".curve.tar.xz"
    with tarfile.open(whole, "w:xz", preset=6) as archive:
        for folder in folders:
            archive.add(folder, arcname=folder.name)
    pieces = []
    with open(whole, "rb") as joined:
        while chunk := joined.read(piece_bytes):
            pieces.append(dest / f"curve.tar.xz.{len(pieces):02d}")
            pieces[-1].write_bytes(chunk)
    whole.unlink()
    return pieces


def land(returned: Path, study: Path) -> list[str]:
    """Unpack what a curve command sent back (``returned``: its ``curve.tar.xz.NN`` pieces) into ``study``, the
    curves' folders where ``kl-original table`` reads them. A curve folder already in ``study`` is refused, naming
    it; nothing is written then. Returns the folders landed."""
    pieces = sorted(returned.glob("curve.tar.xz.[0-9][0-9]"))
    if not pieces:
        raise BundleError(f"{returned}: no curve.tar.xz.NN pieces: name the folder the curve command's files came "
                          "back to")
    staging = study.parent / f".{study.name}.landing-{os.getpid()}"
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    try:
        with open(staging / "curve.tar.xz", "wb") as joined:
            for piece in pieces:
                joined.write(piece.read_bytes())
        with tarfile.open(staging / "curve.tar.xz", "r:xz") as archive:
            members = archive.getmembers()
            bad = [m.name for m in members if m.name.startswith(("/", "..")) or ".." in Path(m.name).parts
                   or not (m.isfile() or m.isdir())]
            if bad:
                raise BundleError(f"{returned}: the archive holds paths outside a study folder: {bad[:3]}")
            folders = sorted({Path(m.name).parts[0] for m in members})
            there = [name for name in folders if (study / name).exists()]
            if there:
                raise BundleError(f"{study}: {', '.join(there)} is there already: move it away to land these runs")
            archive.extractall(staging / "tree", filter="data") if sys.version_info >= (3, 12) else \
                archive.extractall(staging / "tree")
        for name in folders:
            (staging / "tree" / name).replace(study / name)
        return folders
    finally:
        shutil.rmtree(staging, ignore_errors=True)


