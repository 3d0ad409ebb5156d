"""Where things are on disk: the repository, each profile's output folder, and paths as a reader sees them.

Every profile has its own output folder, ``<repo>/outputs/<profile>/`` (so a smoke run never overwrites
the cpu run's report), and committed reference runs live in ``<repo>/results/<profile>/`` with the same
layout. "repo" is the repository root found from the package's location, whatever the working directory:
a notebook opened in JupyterLab from ``notebooks/`` resolves its ``out_dir`` to the same folder as
``make reproduce`` does. A package installed outside a checkout (no ``notebooks/`` beside it) uses the
working directory instead.

Executed notebooks and the report show paths relative to the output folder or the repository
(:func:`shown`), never a machine's absolute paths.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import re
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

PACKAGE_ROOT = Path(__file__).resolve().parents[1]
ENV_FOLDERS = ("TYPHOON_GLUE_DIR", "HF_HOME", "TYPHOON_NOTEBOOKS")  # shown by the variable's name
RESULTS_TABLE = "results.csv"  # a run's table, one row per cell, in its output folder
# The paths a user gives through the environment (a list: separated by os.pathsep). Made absolute when the
# command starts (absolute_path_variables): the notebook kernels start in notebooks/ and inherit them.
PATH_VARIABLES = ("TYPHOON_PROFILES", "TYPHOON_GLUE_DIR", "TYPHOON_NOTEBOOKS", "TYPHOON_CACHE_DIR")


def absolute_path_variables(environ=os.environ) -> None:
    """Rewrite each path of :data:`PATH_VARIABLES` in ``environ`` as an absolute one, from the working folder.

    Read once in the folder the user ran the command from; every process started after (a notebook kernel
    starts in ``notebooks/``, a worker, a job) then names the same file. Empty entries stay out.
    """
    for var in PATH_VARIABLES:
        if environ.get(var):
            entries = filter(None, environ[var].split(os.pathsep))
            environ[var] = os.pathsep.join(os.path.abspath(os.path.expanduser(entry)) for entry in entries)


def file_sha256(path: str | os.PathLike) -> str:
    """The sha256 of a file's bytes, read in chunks (a checkpoint of gigabytes included)."""
    with open(path, "rb") as fh:
        return hashlib.file_digest(fh, "sha256").hexdigest()


def repo_root() -> Path:
    """The repository root: the folder above the package when it is a checkout, else the working directory."""
    return PACKAGE_ROOT if (PACKAGE_ROOT / "notebooks").is_dir() else Path.cwd()


def output_dir(profile: str) -> Path:
    """A profile's default output folder: ``<repo>/outputs/<profile>``."""
    _check_profile_name(profile)
    return repo_root() / "outputs" / profile


def reference_dir(profile: str) -> Path:
    """A profile's committed reference run: ``<repo>/results/<profile>``."""
    _check_profile_name(profile)
    return repo_root() / "results" / profile


def resolve_out_dir(out_dir: str | os.PathLike | None, profile: str) -> Path:
    """``out_dir`` as an absolute path; None means the profile's default output folder."""
    return output_dir(profile) if out_dir is None else Path(out_dir).resolve()


@dataclass(frozen=True)
class AnalysisFolders:
    """Where an analysis notebook reads a run (``results.csv``, ``runs/``) and writes its tables and figures,
    and a sentence saying which folders these are and why (the notebook prints it)."""

    results: Path
    output: Path
    note: str


def analysis_folders(out_dir: str | os.PathLike | None, profile: str) -> AnalysisFolders:
    """The folders of an analysis notebook (20, 30): ``out_dir`` when given (read and written alike, as
    ``reproduce`` passes it; a relative one is taken from the working directory, the notebook's own
    folder in JupyterLab and papermill). ``out_dir`` None: the profile's own run in ``outputs/<profile>``
    when it has a results table, else the committed reference run ``results/<profile>``, read only:
    the tables and figures then go to ``outputs/<profile>``, so that opening a notebook never rewrites a
    committed file. Neither there: FileNotFoundError naming both places and how to make a run."""
    if out_dir is not None:
        folder = Path(out_dir).resolve()
        return AnalysisFolders(folder, folder, f"reads and writes {shown(folder)} (out_dir)")
    own, reference = output_dir(profile), reference_dir(profile)
    if (own / RESULTS_TABLE).is_file():
        return AnalysisFolders(own, own, f"reads and writes {shown(own)}, this machine's {profile} run")
    if (reference / RESULTS_TABLE).is_file():
        return AnalysisFolders(reference, own, (
            f"{shown(own)} has no {RESULTS_TABLE} yet (`make reproduce PROFILE={profile}` makes it): reading "
            f"the committed reference run {shown(reference)}; tables and figures go to {shown(own)}"))
    raise FileNotFoundError(
        f"no {profile} run to analyse: neither {own / RESULTS_TABLE} (`make reproduce PROFILE={profile}` "
        f"makes it) nor the committed reference run {reference / RESULTS_TABLE} exists; set out_dir to a "
        "run's folder")


def pair_notebook(task: str, backbone: str) -> str:
    """The name of the executed walkthrough of one backbone × task in ``<out_dir>/notebooks/``."""
    return f"10_walkthrough-{task}-{backbone.replace('/', '__')}.ipynb"


def notebook_out_dir(notebook: str | os.PathLike, out_dir: str | os.PathLike) -> str:
    """``out_dir`` as a path relative to ``notebook``'s folder, the working directory a notebook is
    executed in when it is opened or re-run where it lies (e.g. ``..`` for ``<out>/notebooks/20_statistics.ipynb``)."""
    return Path(os.path.relpath(Path(out_dir).resolve(), Path(notebook).resolve().parent)).as_posix()


GLUE_DIR_ENV = "TYPHOON_GLUE_DIR"  # a folder of GLUE task folders the user chose (typhoon.data.glue_files reads it)


def glue_dir_from_env() -> Path | None:
    """The folder ``$TYPHOON_GLUE_DIR`` names, or None when it is not set; FileNotFoundError naming it when it is
    no folder: a user who sets it means that folder, so nothing falls back to the bundled copy."""
    value = os.environ.get(GLUE_DIR_ENV) or None
    if value is None:
        return None
    folder = Path(value).expanduser()
    if not folder.is_dir():
        raise FileNotFoundError(f"{GLUE_DIR_ENV}={value} is not a folder: point it at a folder holding the GLUE "
                                f"task folders (MRPC/, CoLA/, ...), or unset it to read the bundled copy")
    return folder


MANIFEST = "MANIFEST.json"  # an output folder's manifest (typhoon.records.provenance writes it)


def check_profile(out_dir: str | os.PathLike, profile: str) -> None:
    """Refuse an output folder that already holds another profile's results (one folder, one profile), read
    from its manifest without importing the records stage: the CLI says it before any estimate or training."""
    try:
        manifest = json.loads((Path(out_dir) / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):  # no manifest yet, or one cut short: the folder names no profile
        return
    held = manifest.get("profile") if isinstance(manifest, dict) else None
    if held not in (None, profile):
        raise ValueError(f"{shown(out_dir)} holds the {held!r} profile's results ({MANIFEST}); run {profile!r} "
                         f"into its own folder (the default: {shown(output_dir(profile))})")


def check_reuse_source(folder: str | os.PathLike) -> Path:
    """A folder named to reuse records from (``--reuse-from``), as an absolute path; ValueError naming it
    when it holds no run records (no ``runs/`` folder)."""
    path = Path(folder).resolve()
    if not (path / "runs").is_dir():
        raise ValueError(f"--reuse-from {os.fspath(folder)!r}: {shown(path)} holds no run records (no runs/ folder); "
                         "name an output folder of an earlier reproduce, e.g. results/cpu")
    return path


class OutputPathError(Exception):
    """An output path that cannot be written (a file where a folder should be, no permission, a full
    disk); the message names the path and what to do. The command line exits 2 with it."""


# Errors of the file system rather than of the program: each gets a message naming the path, never a traceback.
FILE_SYSTEM_ERRNOS = {errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EPERM, errno.ENOTDIR,
                      errno.EEXIST, errno.EISDIR}


def is_file_system_error(error: BaseException) -> bool:
    return isinstance(error, OSError) and error.errno in FILE_SYSTEM_ERRNOS


def describe_os_error(error: OSError, out_dir: str | os.PathLike | None = None) -> str:
    """What went wrong writing a path and what to do about it, for the user (see :class:`OutputPathError`)."""
    path = error.filename or out_dir or "?"
    if error.errno in (errno.ENOSPC, errno.EDQUOT):
        folder = existing = Path(out_dir or path)
        while not existing.exists() and existing != existing.parent:
            existing = existing.parent  # the output folder may be gone again (nothing was left in it)
        try:
            free = f" ({shutil.disk_usage(existing).free / 2**20:,.0f} MiB free now)"
        except OSError:
            free = ""
        return (f"no space left on the device writing {path}: free space on the file system that holds {folder}"
                f"{free}, e.g. by removing old outputs/ folders or ~/.cache, then rerun the same command "
                "(finished records are kept; nothing half-written was left)")
    if error.errno in (errno.ENOTDIR, errno.EEXIST):
        return f"cannot write {path}: a file is in the way where a folder must be ({error.strerror})"
    if error.errno == errno.EROFS:
        return f"cannot write {path}: the file system is read-only"
    return f"cannot write {path}: {error.strerror or error}"


def check_writable(folder: str | os.PathLike) -> Path:
    """Make sure ``folder`` exists and can be written, before any work starts: create it, write and remove
    a probe file. Raises :class:`OutputPathError` naming the path otherwise (a file in the way, no
    permission, a read-only or full file system)."""
    folder = Path(folder)
    if folder.exists() and not folder.is_dir():
        raise OutputPathError(f"output folder {folder} is a file, not a folder: choose another --out")
    probe = folder / f".typhoon-write-probe-{os.getpid()}"
    try:
        folder.mkdir(parents=True, exist_ok=True)
        probe.write_bytes(b"probe")
        probe.unlink()
    except OSError as err:
        if err.filename is None:
            err.filename = str(probe)
        raise OutputPathError(f"output folder {folder}: " + describe_os_error(err, folder)) from None
    return folder


def check_can_write(folder: str | os.PathLike) -> Path:
    """:func:`check_writable` that leaves nothing behind: the folders it had to make are removed again. The
    command line asks it before any work (and any import of torch), so that a refused command has written
    nothing; the work itself makes the folder later."""
    folder = Path(folder)
    missing = []  # the folders check_writable will make, the deepest first
    missing_path = folder
    while not (missing_path.exists() or missing_path.is_symlink()) and missing_path != missing_path.parent:
        missing.append(missing_path)
        missing_path = missing_path.parent
    try:
        return check_writable(folder)
    finally:
        for made in missing:
            with contextlib.suppress(OSError):
                made.rmdir()


def _check_profile_name(profile: str) -> None:
    if not isinstance(profile, str) or not profile or "/" in profile or profile.startswith("."):
        raise ValueError(f"bad profile name {profile!r} for an output folder")


def shown(path: str | os.PathLike, base: str | os.PathLike | None = None) -> str:
    """``path`` as a reader should see it: relative to ``base`` (e.g. the output folder) when inside it,
    else relative to the repository, else with the home folder, the Python environment, the installed
    packages and the folders named by :data:`ENV_FOLDERS` replaced by ``~``, ``<python>``,
    ``<site-packages>`` and ``$VARIABLE``."""
    return redact(os.fspath(path), base)


def redact(text: str, base: str | os.PathLike | None = None) -> str:
    """``text`` with this machine's absolute paths made relative (see :func:`shown`).

    The longest known prefix is replaced first, so ``<out>/runs/x`` becomes ``runs/x`` even when the
    output folder lies inside the repository.
    """
    prefixes = []
    if base is not None:
        prefixes.append((Path(base).resolve(), ""))
    prefixes.append((repo_root().resolve(), ""))
    site = [Path(p) for p in sys.path if p.endswith("site-packages")]
    # both spellings: a venv reached through a symlink (say, .venv -> a shared one) shows up in paths either way
    prefixes += [(q, "<site-packages>/") for p in site if p.is_dir() for q in {p.absolute(), p.resolve()}]
    prefixes.append((Path(sys.prefix).resolve(), "<python>/"))
    prefixes.append((Path.home().resolve(), "~/"))
    prefixes += [(Path(os.environ[var]).resolve(), f"${var}/") for var in ENV_FOLDERS if os.environ.get(var)]
    for prefix, replacement in sorted(prefixes, key=lambda item: -len(str(item[0]))):
        root = str(prefix).rstrip("/")
        if root in ("", "/"):
            continue
        # a whole path component only: /root must not eat the start of /rootfs
        text = re.sub(re.escape(root) + r"/", replacement, text)
        text = re.sub(re.escape(root) + r"(?![\w.-])", replacement.rstrip("/") or ".", text)
    return text
