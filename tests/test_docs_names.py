"""Every code name the README and docs/ mention resolves against the repository: dotted names with or
without the `typhoon.` prefix (`runner.stop`, `records/locks.py`, `notebooks.ANALYSIS_NOTEBOOKS`,
`RunConfig.identity()`), bare names that are clearly code (`FAMILIES`, `MaskedLM`, `save_figure()`),
"`NAME` in `module.py`" claims (the module must define the name), every file a code span names, and every
`--flag` (of `python -m typhoon` or of the script the command runs). test_docs.py checks the commands,
links and `typhoon.`-prefixed names; this file checks the rest, which drifted unseen."""

from __future__ import annotations

import ast
import functools
import importlib
import importlib.util
import re
from pathlib import Path

import pytest
from conftest import REPO
from test_docs import (
    ENTRY_POINT_GROUP,
    FENCE,
    INLINE_CODE,
    PAGE_IDS,
    PAGES,
    build_parser,
    code_of,
    defined_names,
    every_parser,
    read,
)

PACKAGE = REPO / "typhoon"

# names in code spans that are not the package's, each for a reason
NOT_OURS = {
    "torch", "sys", "os", "np", "loss",  # torch.compile, sys.path, np.ndarray, loss.backward()
    "e",  # "e.g."
    "probe",  # `probe.saliency(true_ids)`: a variable holding a SaliencyProbe
    "hardware",  # `hardware.matmul_peak`: a key of a record's metrics.json, not a module
}
FILE_SUFFIXES = (".json", ".csv", ".md", ".toml", ".log", ".html", ".npz", ".safetensors", ".model", ".conf",
                 ".txt", ".yml", ".yaml", ".ipynb", ".sh", ".tsv", ".py", ".lock", ".pid", ".svg", ".png")
# bare capitalised spans that are other software's names or words, not the package's
OTHER_SOFTWARE = {
    "SLURMCluster",  # dask-jobqueue's class
    "ENOSPC",  # the errno
    "TYPE_CHECKING",  # typing's flag
    "DataCollatorForLanguageModeling",  # transformers' masked-LM collator (docs/hf_trainer.md compares with it)
}
# other tools' flags, on the pages that say how to call those tools (docker/podman, pip)
OTHER_TOOLS_FLAGS = {"--build-arg", "--user", "--userns", "--ulimit", "--runtime", "--dry-run", "--report",
                     "--multi_gpu", "--num_processes", "--nproc_per_node"}  # accelerate launch, torchrun
# files the pages name that a reader makes, not the repository
READERS_FILES = {"my_masking.py", "my_study.py", "pip.conf"}


@functools.cache
def modules() -> dict[str, Path]:
    """Every module of the package by its dotted name below `typhoon` (`runner.stop`, `records`)."""
    found = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        if parts:
            found[".".join(parts)] = path
    return found


@functools.cache
def classes() -> dict[str, set[str]]:
    """Every class of the package with the names its body defines (methods, fields, class attributes)."""
    found: dict[str, set[str]] = {}
    for path in modules().values():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef):
                members = found.setdefault(node.name, set())
                for item in node.body:
                    if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                        members.add(item.name)
                    elif isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                        members.add(item.target.id)
                    elif isinstance(item, ast.Assign):
                        members |= {t.id for t in item.targets if isinstance(t, ast.Name)}
    return found


@functools.cache
def all_defined_names() -> set[str]:
    """The names the package and the test helpers define (a page may send a contributor to `conftest.py`)."""
    sources = [*modules().values(), *(REPO / "tests").glob("*.py")]
    return {name for path in sources for name in defined_names(path)}


def resolve_in_module(module: str, rest: list[str]) -> bool:
    """Whether `module` (dotted, below `typhoon`) defines rest[0] (and, for a class, rest[1] as a member)."""
    path = modules().get(module)
    if path is None:
        return False
    if not rest:
        return True
    if f"{module}.{rest[0]}" in modules():
        return resolve_in_module(f"{module}.{rest[0]}", rest[1:])
    if rest[0] not in defined_names(path) and not (path.name == "__init__.py" and exported(module, rest[0])):
        return False
    return len(rest) == 1 or rest[1] in classes().get(rest[0], set()) or rest[0] not in classes()


def exported(package: str, name: str) -> bool:
    """Whether a package's ``__init__`` gives ``name`` (a lazy one lists its names in ``__dir__``)."""
    return name in dir(importlib.import_module(f"typhoon.{package}"))


def missing_code_name(span: str) -> str | None:
    """Why a dotted or module-relative name (`records.exclusive_lock(path)`, `data/batching.PAD_MULTIPLE`,
    `Backbone.model_inputs`) names nothing in the package; None when it resolves or is not the package's."""
    name = re.sub(r"\(.*\)$", "", span).replace("/", ".").removesuffix(".py")
    parts = name.split(".")
    if parts[0] == "typhoon":
        parts = parts[1:]
    if not parts or parts[0] in NOT_OURS or ".".join(parts) == ENTRY_POINT_GROUP.removeprefix("typhoon."):
        return None
    if "/" in span and not (PACKAGE / span.split("/")[0]).is_dir():  # a repository or output folder
        return None
    if parts[0] in classes() and parts[0] not in modules():  # Class.member
        if len(parts) == 2 and parts[1] in classes()[parts[0]]:
            return None
        return f"class {parts[0]} has no {'.'.join(parts[1:])}"
    # the module may be written from any of its trailing parts: `stop` for runner.stop, `runner.stop`, ...
    candidates = [m for m in modules() if any(m.split(".")[-k:] == parts[:k] or m == ".".join(parts[:k])
                                              for k in range(1, len(parts) + 1))]
    for module in candidates:
        for k in range(1, len(parts) + 1):
            if module.split(".")[-k:] == parts[:k] and resolve_in_module(module, parts[k:]):
                return None
    if not candidates:
        return f"no module {parts[0]}"
    return f"{'.'.join(parts)}: no module of the package defines it (tried {', '.join(sorted(candidates))})"


DOTTED_SPAN = re.compile(r"[A-Za-z_]\w*(?:[./][A-Za-z_]\w*)+(?:\([^)]*\))?")
BARE_CODE = re.compile(r"[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+|[A-Z]{5,}|[A-Z][a-z0-9]+(?:[A-Z][a-z0-9]*)+|[a-z_]\w*\(\)")


def spans_of(page: Path) -> list[str]:
    """The inline code spans of a page (outside fenced blocks), one line each, and the dotted words of the
    comments in its fenced blocks (`# families in models.FAMILIES`)."""
    text = read(page)
    spans = [span.replace("\n", " ").strip() for span in INLINE_CODE.findall(FENCE.sub("", text))]
    comments = [line.partition("#")[2] for block in FENCE.findall(text) for line in block.splitlines()[1:]
                if not block.startswith(("```toml", "```stages")) and " # " in f" {line}"]
    words = [w.strip(".,;:()") for comment in comments for w in comment.split()]
    return spans + [w for w in words if DOTTED_SPAN.fullmatch(w) and not is_file_name(w)]


def is_file_name(span: str) -> bool:
    return span.endswith(FILE_SUFFIXES) and "(" not in span


def name_problems(page: Path) -> list[str]:
    problems = []
    for span in spans_of(page):
        span = re.sub(r"\((?:[^()]|\([^()]*\))*\)$", "()", span)  # `f(a, b)` read as `f()`
        if is_file_name(span) or " " in span or "-" in span or "<" in span:
            continue
        if DOTTED_SPAN.fullmatch(span):
            if (why := missing_code_name(span)) is not None:
                problems.append(f"`{span}`: {why}")
        elif BARE_CODE.fullmatch(span) and span not in OTHER_SOFTWARE:
            name = span.removesuffix("()")
            if name in all_defined_names() or name in classes() or any(name in m for m in classes().values()):
                continue
            if name.isupper() and mentioned_in_code(name):  # an environment variable the code reads
                continue
            problems.append(f"`{span}`: defined nowhere in the package")
    return problems


@functools.cache
def code_text() -> str:
    """The repository's code, where an environment variable the pages name must be read."""
    files = [*PACKAGE.rglob("*.py"), *(REPO / "scripts").glob("*"), *(REPO / "benchmarks").glob("*"),
             REPO / "Dockerfile", REPO / "Makefile"]
    return "\n".join(f.read_text(encoding="utf-8", errors="replace") for f in files if f.is_file())


def mentioned_in_code(name: str) -> bool:
    return re.search(rf"\b{re.escape(name)}\b", code_text()) is not None


# "`NAME` in `models/backbones.py`" or "... in `typhoon/studies/grid/policy.py`", and "`NAME` there" after a file or "... in `typhoon/studies/grid/policy.py`": the module must define NAME
PLACED_NAME = re.compile(r"`([A-Za-z_]\w*)`[^`.;\n]{0,12}?\bin\s+`((?:typhoon/)?[\w/]+\.py)`")


PLACED_THERE = re.compile(r"`((?:typhoon/)?[\w/]+\.py)`|`([A-Za-z_]\w*)` there\b")


def placed_names(text: str) -> list[tuple[str, str]]:
    """(name, file) for each "`NAME` in `file.py`", and for each "`NAME` there" after a file in its paragraph."""
    placed = PLACED_NAME.findall(text)
    for paragraph in text.split("\n\n"):
        last_file = None
        for file, name in PLACED_THERE.findall(paragraph.replace("\n", " ")):
            last_file = file or last_file
            if name and last_file:
                placed.append((name, last_file))
    return placed


def placement_problems(page: Path) -> list[str]:
    problems = []
    for name, file in placed_names(FENCE.sub("", read(page)).replace("\n", " ")):
        path = REPO / file if file.startswith("typhoon/") else PACKAGE / file
        if path.exists() and name not in defined_names(path, imported=False):
            problems.append(f"`{name}` in `{file}`: {file} does not define it")
    return problems


def file_problems(page: Path) -> list[str]:
    """Files named in code spans: a repository path, a path below typhoon/ (`runner/stop.py`), or a bare
    script or test file name (`test_resume.py`), each must exist."""
    problems = []
    for span in spans_of(page):
        if not re.fullmatch(r"[\w./-]+\.py", span) or span in READERS_FILES:
            continue
        if "/" in span:
            exists = (REPO / span).exists() or (PACKAGE / span).exists()
        else:
            exists = any(REPO.glob(f"**/{span}"))
        if not exists:
            problems.append(f"`{span}`: no such file")
    return problems


@functools.cache
def script_flags(script: str) -> frozenset[str]:
    """The flags a script's argparse declares (read from its source, without running it), with those of the
    modules of its own folder it imports (the examples share theirs)."""
    path = REPO / script
    if not path.exists():
        return frozenset()
    text = path.read_text(encoding="utf-8")
    for name in re.findall(r"^from (\w+) import", text, flags=re.MULTILINE):
        if (path.parent / f"{name}.py").is_file():
            text += (path.parent / f"{name}.py").read_text(encoding="utf-8")
    return frozenset(re.findall(r"[\"'](--[\w-]+)[\"']", text))


@functools.cache
def typhoon_flags() -> frozenset[str]:
    parsers = every_parser(build_parser())  # every command's, and each part's (data fetch, kl-original curve)
    return frozenset(flag for p in [build_parser(), *parsers] for flag in p._option_string_actions)


SCRIPT_COMMAND = re.compile(r"python3?\s+((?:scripts|benchmarks|examples)/[\w.-]+\.py)\s*(.*)")


def flag_problems(page: Path) -> list[str]:
    """`--flag`s: in a command that runs a script, that script's; in a bare code span, typhoon's or those of
    a script the page names."""
    problems = []
    text = read(page)
    named_scripts = set(re.findall(r"(?:scripts|benchmarks|examples)/[\w.-]+\.(?:py|sh)", text))
    own = typhoon_flags().union(OTHER_TOOLS_FLAGS, *(script_flags(s) for s in named_scripts))
    for code in code_of(text):
        for script, rest in SCRIPT_COMMAND.findall(code):
            rest = re.split(r"[|;#]|&&", rest)[0]
            for flag in re.findall(r"(?<![\w-])(--[a-z][\w-]*)", rest):
                if flag not in script_flags(script) and flag != "--help":
                    problems.append(f"{script} has no flag {flag}")
    for span in spans_of(page):
        if re.fullmatch(r"--[a-z][\w-]*(?:[= ].*)?", span):
            flag = re.split(r"[= ]", span)[0]
            if flag not in own:
                problems.append(f"`{span}`: no flag {flag} in typhoon's CLI or a script the page names")
    return problems


@pytest.mark.parametrize("page", PAGES, ids=PAGE_IDS)
def test_every_code_name_a_page_mentions_resolves(page):
    problems = name_problems(page) + placement_problems(page) + file_problems(page) + flag_problems(page)
    assert not problems, problems


def test_the_name_check_fails_on_names_that_moved(tmp_path):
    assert missing_code_name("runner/stop.py") is None
    assert missing_code_name("records/locks.exclusive_lock") is None
    assert missing_code_name("notebooks.ANALYSIS_NOTEBOOKS") is None
    assert missing_code_name("config.RunConfig") is None
    assert missing_code_name("RunConfig.identity()") is None
    assert missing_code_name("data/batching.PAD_MULTIPLE") is None
    assert missing_code_name("pipeline.run") == "no module pipeline"
    assert "no module of the package defines it" in missing_code_name("provenance.Numerics")
    assert "no module of the package defines it" in missing_code_name("records.no_such_lock(path)")
    assert missing_code_name("RunConfig.no_such_field") == "class RunConfig has no no_such_field"
    page = tmp_path / "page.md"
    page.write_text("`FAMILIES` in `models/backbones.py`; `FAMILIES` in `models/mlm_head.py`; `MaskedLM` there; "
                    "`NO_SUCH_LIST` and `no_such_function()`; `MaskedLM`; `tests/no_such_test.py`; "
                    "`--no-such-flag`; `--workers`.\n\n```\npython scripts/slurm_check.py --no-such\n```\n")
    assert placement_problems(page) == ["`FAMILIES` in `models/backbones.py`: models/backbones.py does not define it"]
    assert name_problems(page) == ["`NO_SUCH_LIST`: defined nowhere in the package",
                                   "`no_such_function()`: defined nowhere in the package"]
    assert file_problems(page) == ["`tests/no_such_test.py`: no such file"]
    assert flag_problems(page) == ["scripts/slurm_check.py has no flag --no-such",
                                   "`--no-such-flag`: no flag --no-such-flag in typhoon's CLI or a script the page names"]
    page.write_text("Add one to `BACKBONES` in `typhoon/names.py`; one more in `FAMILIES` there.\n"
                    "```python\nx = 1  # families in models.FAMILIES\n```\n")
    assert placement_problems(page) == ["`FAMILIES` in `typhoon/names.py`: typhoon/names.py does not define it"]
    assert name_problems(page) == ["`models.FAMILIES`: models.FAMILIES: no module of the package defines it "
                                   "(tried models)"]


# --------------------------------------------------------------------------------------------------
# The package's own docstrings: a dotted name there must name what the package defines


DOCSTRING_ROLE = re.compile(r":(?:func|class|meth|mod|data|attr|exc|obj):`~?([^`<>\s]+)`")
DOCSTRING_TICKED = re.compile(r"``([^`\s]+)``|(?<![`\w])`([^`\s]+)`(?![`\w])")
# first parts of docstring spans that are other software's objects, named like something of the package
DOCSTRING_NOT_OURS = {"client"}  # `client.run`: dask's Client.run


def docstrings() -> list[tuple[str, int, str]]:
    """(module, line, text) of every module, class and function docstring of the package."""
    found = []
    for module, path in sorted(modules().items()):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
                text = ast.get_docstring(node, clean=False)
                if text:
                    found.append((module, getattr(node, "lineno", 1), text))
    return found


def docstring_spans(text: str) -> list[str]:
    """The code names of a docstring: its Sphinx roles' targets (:func:`x.y`) and its ``x.y`` / `x.y` spans."""
    roles = DOCSTRING_ROLE.findall(text)
    ticked = [a or b for a, b in DOCSTRING_TICKED.findall(DOCSTRING_ROLE.sub(" ", text))]
    return [re.sub(r"\((?:[^()]|\([^()]*\))*\)$", "", span).rstrip(".,;:") for span in roles + ticked]


@functools.cache
def top_level_names() -> set[str]:
    """The functions and classes defined at the top of the package's modules (not the names they import)."""
    return {node.name for path in modules().values() for node in ast.parse(path.read_text(encoding="utf-8")).body
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)}


def names_the_package(parts: list[str]) -> bool:
    """Whether a dotted name reads as the package's: a module written from any of its trailing parts (`machine`,
    `runner.stop`), a class of the package, or something (`pipeline.warm_up_task_model`) whose next part is a
    function or class the package defines."""
    tails = {".".join(m.split(".")[-k:]) for m in modules() for k in range(1, len(m.split(".")) + 1)}
    if parts[0] in DOCSTRING_NOT_OURS | NOT_OURS:
        return False
    if any(".".join(parts[:k]) in tails for k in range(1, len(parts) + 1)) or parts[0] in classes():
        return True
    return parts[1] in top_level_names() and importlib.util.find_spec(parts[0]) is None  # not `pingouin.tost`


def defines(module: str, rest: list[str]) -> bool:
    """Whether `module` (dotted, below `typhoon`) or a module below it DEFINES ``rest`` -- an import is not a
    definition, but a stage face hands on its names -- and a class there the member after it."""
    if not rest:
        return True
    if f"{module}.{rest[0]}" in modules():
        return defines(f"{module}.{rest[0]}", rest[1:])
    path = modules()[module]
    if rest[0] not in defined_names(path, imported=False) and not (path.name == "__init__.py"
                                                                    and exported(module, rest[0])):
        return False
    return len(rest) == 1 or rest[0] not in classes() or rest[1] in classes()[rest[0]]


def missing_in_docstring(span: str) -> str | None:
    """Why a dotted name in a docstring names nothing the package defines; None when it does, or when it is not
    the package's (`torch.device`, `ctx.device`, `tqdm.auto`)."""
    if not DOTTED_SPAN.fullmatch(span) or is_file_name(span) or "/" in span:
        return None
    parts = span.split(".")
    if parts[0] == "typhoon":
        parts = parts[1:]
    elif not names_the_package(parts):
        return None
    if parts[0] in classes() and parts[0] not in modules():  # Class.member
        return None if len(parts) == 2 and parts[1] in classes()[parts[0]] else f"class {parts[0]} has no {parts[1]}"
    for module in modules():
        tail = module.split(".")
        for k in range(1, min(len(tail), len(parts)) + 1):
            if tail[-k:] == parts[:k] and defines(module, parts[k:]):
                return None
    return f"no module of the package defines {'.'.join(parts)}"


def docstring_problems() -> list[str]:
    return [f"typhoon.{module} (line {line}): `{span}`: {why}" for module, line, text in docstrings()
            for span in docstring_spans(text) if (why := missing_in_docstring(span)) is not None]


def test_every_dotted_name_in_the_packages_docstrings_resolves():
    problems = docstring_problems()
    assert not problems, "\n".join(problems)


def test_the_docstring_check_fails_on_names_that_moved_or_are_only_imported():
    assert missing_in_docstring("typhoon.runner.dask_executor.DaskExecutor") is None
    assert missing_in_docstring("runner.stop") is None and missing_in_docstring("machine.cpu_features") is None
    assert missing_in_docstring("RunConfig.replace") is None and missing_in_docstring("records.is_complete") is None
    assert missing_in_docstring("cluster.DaskExecutor") == "no module of the package defines cluster.DaskExecutor"
    assert missing_in_docstring("typhoon.machine.worker_slots") is not None  # no such function
    assert missing_in_docstring("pipeline.warm_up_task_model") is not None  # no module pipeline
    assert missing_in_docstring("RunConfig.validate") == "class RunConfig has no validate"
    for not_ours in ("torch.device", "ctx.masks_on_device", "tqdm.auto", "client.run", "metrics.json", "pingouin.tost"):
        assert missing_in_docstring(not_ours) is None
    assert docstring_spans(":func:`~typhoon.machine.usable_cores` and ``grid.preflight(configs)``, `cells.train_cell`.") \
        == ["typhoon.machine.usable_cores", "grid.preflight", "cells.train_cell"]
