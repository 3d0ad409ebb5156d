"""The README and the manual under docs/: every relative link and anchor resolves, every page is on the
README's map, and what the pages tell a reader to type still exists: each `python -m typhoon ...`
command's subcommand, flags, profiles and --set keys, each `make` target, each repository path and each
`typhoon.<module>.<name>` they name. A command or a module that goes away fails here until its page says
so. (The Docker page's commands are checked against the Dockerfile in test_docker.py, the README's
Results block against the reference run in test_findings.py.)"""

from __future__ import annotations

import argparse
import ast
import functools
import re
import shlex
import subprocess
import sys
from collections.abc import Iterable
from dataclasses import fields
from pathlib import Path

import pytest
from conftest import REPO

from typhoon import cli
from typhoon.config import RunConfig
from typhoon.masking.plugins import ENTRY_POINT_GROUP  # an entry-point group, not a module
from typhoon.profiles import load_profiles

PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
PAGE_IDS = [str(page.relative_to(REPO)) for page in PAGES]

FENCE = re.compile(r"^```.*?^```[ \t]*$", re.S | re.M)
INLINE_CODE = re.compile(r"`([^`]+)`")
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
# repository paths as the pages write them: a top-level folder, then a path with no placeholder in it
REPO_PATH = re.compile(r"(?:typhoon|scripts|benchmarks|tests|notebooks|requirements|results|docs|\.ci)/[\w./-]*")
DOTTED_NAME = re.compile(r"typhoon(?:\.\w+)+")
TYPHOON_COMMAND = re.compile(r"python -m typhoon\s+(.*?)(?=python -m typhoon|[|;#]|&&|$)")


def read(page: Path) -> str:
    return page.read_text(encoding="utf-8")


def prose_of(text: str) -> str:
    """The text outside code: no fenced blocks, no inline code spans (their brackets are not links)."""
    return INLINE_CODE.sub("", FENCE.sub("", text))


def code_of(text: str) -> list[str]:
    """Each fenced block's commands (a line continued with a backslash joined to the next) and each inline
    code span (one may wrap over lines), as one line each."""
    blocks = [block.split("\n", 1)[1].rsplit("```", 1)[0] for block in FENCE.findall(text)]
    commands = [line for block in blocks for line in block.replace("\\\n", " ").splitlines()]
    spans = [span.replace("\n", " ") for span in INLINE_CODE.findall(FENCE.sub("", text))]
    return commands + spans


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower().replace("`", ""))
    return text.replace(" ", "-")


def anchors_of(page: Path) -> set[str]:
    headings = re.findall(r"^#{1,6}\s+(.+?)\s*#*\s*$", FENCE.sub("", read(page)), re.M)
    seen: dict[str, int] = {}
    anchors = set()
    for heading in headings:  # a repeated heading gets -1, -2, ... as on GitHub
        base = slug(heading)
        anchors.add(f"{base}-{seen[base]}" if base in seen else base)
        seen[base] = seen.get(base, 0) + 1
    return anchors


@pytest.mark.parametrize("page", PAGES, ids=PAGE_IDS)
def test_every_relative_link_resolves(page):
    targets = [t for t in LINK.findall(prose_of(read(page))) if not re.match(r"[a-z][\w+.-]*:", t)]
    broken = []
    for target in targets:
        path, _, anchor = target.partition("#")
        resolved = (page.parent / path).resolve() if path else page
        if not resolved.exists():
            broken.append(f"{target}: no such file")
        elif anchor and resolved.suffix == ".md" and anchor not in anchors_of(resolved):
            broken.append(f"{target}: {resolved.name} has no heading #{anchor}")
    assert not broken, broken


def test_the_anchor_check_reads_headings_as_github_does(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("# One run, and the grid\n\n## Profiles (`typhoon/profiles.toml`)\n\n## Notes\n\n## Notes\n"
                    "```\n# not a heading\n```\n")
    assert anchors_of(page) == {"one-run-and-the-grid", "profiles-typhoonprofilestoml", "notes", "notes-1"}


def test_every_docs_page_is_on_the_readme_map():
    readme = REPO / "README.md"
    linked = {(readme.parent / t.partition("#")[0]).resolve() for t in LINK.findall(prose_of(read(readme)))}
    assert not [str(page.relative_to(REPO)) for page in PAGES[1:] if page.resolve() not in linked]


@functools.cache
def build_parser() -> argparse.ArgumentParser:
    return cli.build_parser()


def subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    (action,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return action.choices


def every_parser(parser: argparse.ArgumentParser) -> list[argparse.ArgumentParser]:
    """The parsers below ``parser``: each command's, and its parts' (``data fetch``, ``kl-original curve``)."""
    found = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for command in action.choices.values():
                found += [command, *every_parser(command)]
    return found


def typhoon_commands(page: Path) -> list[list[str]]:
    """The words of every `python -m typhoon ...` command on a page, and of every code span that starts
    with `run --` or `reproduce --` (a command the prose shortens); `[--flag]` read as `--flag`."""
    found = []
    for code in code_of(read(page)):
        shortened = [code] if re.match(r"(run|reproduce) --", code) else []
        for command in TYPHOON_COMMAND.findall(code) + shortened:
            words = shlex.split(command.replace("[", " ").replace("]", " "), posix=False)
            if words and re.fullmatch(r"[a-z][\w-]*", words[0]):  # not `python -m typhoon ...`
                found.append(words)
    return found


def problems_of_command(words: list[str], own_profiles: Iterable[str] = ()) -> list[str]:
    """What in a documented command the CLI does not have: the subcommand, a flag, a profile, a --set key.

    ``own_profiles``: the profiles the page itself defines (a TOML block for ``TYPHOON_PROFILES``). A command
    naming a strategy of your own (``--strategy MODULE:CLASS``) may ``--set`` that strategy's parameters,
    which no check here can know."""
    parser = subcommands(build_parser()).get(words[0])
    if parser is None:
        return [f"no subcommand {words[0]!r}"]
    rest = words[1:]
    if words[0] == "data":
        parser = subcommands(parser).get(rest[0]) if rest else None
        if parser is None:
            return [f"no subcommand 'data {rest[0] if rest else ''}'"]
        rest = rest[1:]
    problems = []
    fields_of_config = {f.name for f in fields(RunConfig)}
    plugin = any(word == "--strategy" and ":" in value for word, value in zip(rest, rest[1:], strict=False))
    for i, word in enumerate(rest):
        flag, _, value = word.partition("=")
        if not flag.startswith("--"):
            continue
        if flag not in parser._option_string_actions:
            problems.append(f"{words[0]} has no flag {flag}")
        value = value or (rest[i + 1] if i + 1 < len(rest) else "")
        if flag == "--profile" and value not in load_profiles() and value not in own_profiles:
            problems.append(f"no profile {value!r}")
        key = value.partition("=")[0]
        if flag == "--set" and key not in fields_of_config | {"key"} and not plugin:  # `--set key=value`: the placeholder
            problems.append(f"--set {key}: not a RunConfig field")
    return problems


@pytest.mark.parametrize("page", PAGES, ids=PAGE_IDS)
def test_documented_typhoon_commands_exist(page):
    own = page_profiles(page)
    problems = {" ".join(words): p for words in typhoon_commands(page) if (p := problems_of_command(words, own))}
    assert not problems, problems


def page_profiles(page: Path) -> set[str]:
    """The profiles a page defines in its TOML blocks (its own profiles file, for ``TYPHOON_PROFILES``)."""
    blocks = [block for block in FENCE.findall(read(page)) if block.startswith("```toml")]
    return {name for block in blocks for name in re.findall(r"^\[([\w-]+)\]\s*$", block, re.M)}


def test_the_command_check_fails_on_what_the_cli_lacks():
    assert not problems_of_command(["reproduce", "--profile", "cpu", "--set", "precision=fp32", "--commit-records"])
    assert not problems_of_command(["data", "fetch", "rte", "--dir", "DIR"])
    assert problems_of_command(["reproduce", "--profile", "cpu", "--resume"]) == ["reproduce has no flag --resume"]
    assert problems_of_command(["reproduce", "--profile=gpu"]) == ["no profile 'gpu'"]
    assert problems_of_command(["run", "--set", "precison=fp32"]) == ["--set precison: not a RunConfig field"]
    assert not problems_of_command(["run", "--strategy", "mine:Mine", "--set", "own=1"])  # its own parameter
    assert problems_of_command(["run", "--strategy", "random", "--set", "own=1"]) == ["--set own: not a RunConfig field"]
    assert not problems_of_command(["reproduce", "--profile", "mine"], own_profiles={"mine"})
    assert "long-words" in page_profiles(REPO / "docs" / "extending.md")
    assert problems_of_command(["train"]) == ["no subcommand 'train'"]
    assert problems_of_command(["data", "pull", "rte"]) == ["no subcommand 'data pull'"]


# the pages about the CLI, where a code span that is a bare flag (`--retries`) is one of its flags
CLI_PAGES = ["grid.md", "speed.md", "cluster.md", "data.md", "profiles.md", "extending.md", "backbones.md",
             "testing.md"]


@pytest.mark.parametrize("name", CLI_PAGES)
def test_bare_flags_on_the_cli_pages_are_typhoon_flags(name):
    parsers = every_parser(build_parser())  # every command's, and each part's (data fetch, kl-original curve)
    flags = {flag for p in parsers for flag in p._option_string_actions}
    spans = INLINE_CODE.findall(FENCE.sub("", read(REPO / "docs" / name)))
    bare = {span.split()[0].partition("=")[0] for span in spans if re.match(r"--\w", span)}
    assert bare <= flags, sorted(bare - flags)


def makefile_targets() -> set[str]:
    return set(re.findall(r"^([\w-]+):", read(REPO / "Makefile"), re.M))


@pytest.mark.parametrize("page", PAGES, ids=PAGE_IDS)
def test_documented_make_targets_exist(page):
    targets = {m for code in code_of(read(page)) for m in re.findall(r"(?:^|&&\s*)make ([a-z][\w-]*)", code.strip())}
    assert targets <= makefile_targets(), sorted(targets - makefile_targets())


@pytest.mark.parametrize("page", PAGES, ids=PAGE_IDS)
def test_documented_repository_paths_exist(page):
    paths = {token.rstrip(".,:;)") for code in code_of(read(page)) for token in code.split()
             if REPO_PATH.fullmatch(token.rstrip(".,:;)"))}
    assert not sorted(p for p in paths if not (REPO / p).exists())


def module_file(dotted: str) -> Path | None:
    base = REPO.joinpath(*dotted.split("."))
    return next((p for p in (base.with_suffix(".py"), base / "__init__.py") if p.exists()), None)


def defined_names(source: Path, imported: bool = True) -> set[str]:
    """The top-level names a module defines (and, with ``imported``, imports)."""
    names = set()
    for node in ast.parse(source.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                names |= {t.id for t in ast.walk(target) if isinstance(t, ast.Name)}
        elif imported and isinstance(node, ast.Import | ast.ImportFrom):
            names |= {(alias.asname or alias.name).split(".")[0] for alias in node.names}
    return names


def missing_dotted_name(dotted: str) -> str | None:
    """Why `typhoon.a.b.name` names nothing: the longest prefix that is a module must define the next part."""
    parts = dotted.split(".")
    for end in range(len(parts), 0, -1):
        module = module_file(".".join(parts[:end]))
        if module is None:
            continue
        if end == len(parts) or parts[end] in defined_names(module) or module_file(".".join(parts[:end + 1])):
            return None
        return f"{'.'.join(parts[:end])} defines no {parts[end]}"
    return f"no module {parts[0]}"


@pytest.mark.parametrize("page", PAGES, ids=PAGE_IDS)
def test_documented_typhoon_names_exist(page):
    names = {name for code in code_of(read(page)) for name in DOTTED_NAME.findall(code)}
    names = {n for n in names if n != "typhoon" and not n.endswith(".py") and n != ENTRY_POINT_GROUP}
    assert not {n: why for n in names if (why := missing_dotted_name(n))}


def test_the_name_check_fails_on_a_name_that_went_away():
    assert missing_dotted_name("typhoon.profiles.resolve") is None
    assert missing_dotted_name("typhoon.config.RunConfig") is None
    assert missing_dotted_name("typhoon.config.resolve_everything") == "typhoon.config defines no resolve_everything"
    assert missing_dotted_name("typhoon.nonexistent_module") == "typhoon defines no nonexistent_module"


# The bundle speaks to its reader about the reader's own machines (a GPU, a cluster, a folder is theirs). Words that
# assume some other machine -- one borrowed for a while, the tool that lends it and its results folder, a working
# session, the writer's own VM -- or an absolute path of another computer's folders read as something the reader
# lacks. Written split here, so that this file does not match itself.
LENT = "len" + "t"
BUILT_ON = re.compile("|".join([rf"\b{LENT} (?:GPU|machine|node|image)", rf"the {LENT}\b", "`device`" + " tool", "device" + " tool",
                                "this " + "workplace", "KINDS" + r"\.md", r"\bthis session'?s?\b",
                                r"\bthe session'?s\b", r"\bprevious session\b", r"\bthe sessions\b",
                                r"\bmany sessions\b", r"\bthis " + r"(?:VM|host)\b", "farm" + "-studio",
                                r"\bAI " + "agent", r"\bduplicates " + "--change"]), re.I)
# the upper-case OUT variable: a results folder no command or page of the bundle defines for its user (a script's own
# lower-case $out is its own variable)
OUT_FOLDER = re.compile(r"\$" + r"OUT\b")
# Absolute folders of another computer: a /work tree, a person's home (the image's own /home/typhoon and a test's
# made-up /home/someone are the user's), a shared tools folder. A user's paths in the pages are relative or their
# own ($HOME, ~, outputs/).
OTHER_COMPUTER = re.compile(r"(?<![\w.~$}/-])/" + r"work/|/" + r"home/(?!typhoon\b|someone\b)[a-z_][\w.-]*/|/"
                            + r"Users/\w|" + r"shared/" + r"tools/")
# Not read: the committed results (records and logs of the runs as they were made: their paths are the runs'
# provenance) and the bundled GLUE files (official data).
NOT_READ = ("results/", "typhoon/glue_data/")


def tracked_text_files() -> list[Path]:
    """Every tracked file that is text (dotfiles, tests and their comments included), but :data:`NOT_READ`."""
    try:
        listed = subprocess.run(["git", "ls-files"], cwd=REPO, capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout: the tracked files are git's list")
    paths = [REPO / name for name in listed.splitlines() if not name.startswith(NOT_READ)]
    return [path for path in paths if path.is_file() and not is_binary(path)]


def is_binary(path: Path) -> bool:
    with path.open("rb") as file:
        return b"\0" in file.read(8192)


def built_on_lines(path: Path) -> list[str]:
    """``path:line: match`` for each line of ``path`` that speaks of another machine than the reader's."""
    return [f"{path.relative_to(REPO)}:{n}: {match.group(0)}"
            for n, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1)
            for match in [BUILT_ON.search(line) or OUT_FOLDER.search(line) or OTHER_COMPUTER.search(line)] if match]


def test_no_tracked_file_speaks_of_the_machines_the_bundle_was_built_on():
    """The README, the docs, the scripts, the package, the tests (comments included), the benchmarks, the
    notebooks and the dotfiles (.gitignore, .dockerignore, .ci/run) speak of the user's own machines: a GPU
    machine with no network and a size limit, say, not a machine someone else borrowed."""
    files = tracked_text_files()
    assert len(files) > 200 and REPO / ".gitignore" in files and REPO / ".ci" / "run" in files
    found = [line for path in files for line in built_on_lines(path)]
    assert not found, "\n".join(found)


@pytest.mark.parametrize("line, match", [
    ("# a " + LENT + " GPU machine's bundle, carried to it", LENT + " GPU"),
    ("cd /" + "work/bitcheck/old", "/" + "work/"),
    ("independently of /" + "work/shared/" + "tools/import_cycles.py", "/" + "work/"),
    ("run ../shared/" + "tools/import_cycles.py first", "shared/" + "tools/"),
    ("see /" + "home/alice/notes.log", "/" + "home/alice/"),
    ("its speed varied on this " + "VM by 15 %", "this " + "VM"),
    ("torch's default (2 on this " + "host)", "this " + "host"),
])
def test_the_guard_finds_a_build_machine_path_or_word_in_a_dotfile(tmp_path, monkeypatch, line, match):
    monkeypatch.setattr(sys.modules[__name__], "REPO", tmp_path)
    (tmp_path / ".gitignore").write_text(f"build/\n{line}\n", encoding="utf-8")
    assert built_on_lines(tmp_path / ".gitignore") == [f".gitignore:2: {match}"]


@pytest.mark.parametrize("line", [
    "HF_HOME=/" + "home/typhoon/.cache/huggingface", "python -m typhoon reproduce --out /" + "tmp/est",
    "scripts/train_mlm_backbone.py --work outputs/mlm_backbone", "a GPU machine of your own",
])
def test_the_guard_leaves_the_users_own_paths_alone(tmp_path, monkeypatch, line):
    monkeypatch.setattr(sys.modules[__name__], "REPO", tmp_path)
    (tmp_path / "page.md").write_text(line, encoding="utf-8")
    assert built_on_lines(tmp_path / "page.md") == []
