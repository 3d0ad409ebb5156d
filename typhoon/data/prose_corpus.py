"""English prose that can be had offline from Debian's archive, as plain paragraphs, for adapting a backbone
to masked-language modelling (``scripts/train_mlm_backbone.py``).

Each source is one Debian package, read from where the package installs its files; a source whose
files are missing is reported by name with the ``apt-get install`` line that brings it. No GLUE text is
read here, and nothing is downloaded at run time.

==================  =============================================  =========================================
source (package)    what it is                                     licence
==================  =============================================  =========================================
python-docs         The Python 3.11 documentation, reST sources    PSF licence (python3.11-doc)
(python3.11-doc)    (tutorial, library reference, HOWTOs, FAQ)
debian-handbook     The Debian Administrator's Handbook, en-US     GPL-2+ or CC-BY-SA-3.0
gcide (dict-gcide)  Webster's 1913 + additions: definitions and    GPL-2+
                    quotations from English literature
wordnet (wordnet-   WordNet 3.0 glosses and example sentences      WordNet 3.0 licence (permissive)
base)
fortunes            fortune-mod's quotations, literature, jokes    BSD (fortune-mod data)
devil (dict-devil)  Ambrose Bierce, "The Devil's Dictionary"       public domain
==================  =============================================  =========================================

A paragraph is the unit: every reader yields whitespace-normalised paragraphs of at least
``MIN_WORDS`` words, so code listings, tables and headings drop out. The held-out split is by a hash
of the paragraph, so it is stable whatever order the sources are read in.
"""

from __future__ import annotations

import gzip
import hashlib
import html
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

MIN_WORDS = 8  # shorter paragraphs are headings, table cells or code, not prose
_SPACE = re.compile(r"\s+")


@dataclass(frozen=True)
class ProseSource:
    name: str
    package: str  # the Debian package that installs it
    path: Path  # a file or folder the package installs
    licence: str
    read: Callable[[Path], Iterator[str]]  # paragraphs of text


def _normalise(text: str) -> str:
    return _SPACE.sub(" ", text).strip()


def _paragraphs(text: str) -> Iterator[str]:
    """Blank-line separated paragraphs, whitespace-normalised, of at least MIN_WORDS words."""
    for block in re.split(r"\n\s*\n", text):
        para = _normalise(block)
        if len(para.split()) >= MIN_WORDS:
            yield para


# -- reStructuredText (the Python docs) ---------------------------------------------------------------
_RST_ROLE = re.compile(r":[\w:+-]+:`~?!?([^`<]*?)(?:\s*<[^>]*>)?`")  # :func:`name <target>` -> name
_RST_LINK = re.compile(r"`([^`<]+?)\s*<[^>]*>`_+")  # `text <url>`_ -> text
_RST_MARK = re.compile(r"``|\*\*|(?<!\w)\*(?=\w)|(?<=\w)\*(?!\w)|`_*")


# Directives whose indented body is code, data or navigation; every other directive's body (a function's
# description, a note) is prose and is kept.
_RST_NON_PROSE = re.compile(r"\.\.\s+(code-block|code|sourcecode|doctest|testcode|testsetup|testoutput|"
                            r"productionlist|literalinclude|highlight|toctree|index|csv-table|list-table|table|"
                            r"raw|image|figure|only|include|sectionauthor|moduleauthor|impl-detail)::")


def rst_to_text(text: str) -> str:
    """reST source as plain paragraphs: literal blocks, comments and the bodies of code-like directives
    dropped; directive lines (``.. function:: open(...)``) dropped but prose bodies kept; roles and links
    replaced by their text."""
    kept, skip_deeper_than = [], None  # lines indented deeper than this belong to a skipped body
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped:
            kept.append("")  # a blank line neither starts nor ends an indented body
            continue
        indent = len(line) - len(line.lstrip())
        if skip_deeper_than is not None and indent > skip_deeper_than:
            continue  # inside a literal block, a comment or a code-like directive's body
        skip_deeper_than = None
        if stripped.startswith(".."):
            # a comment (".. text", no "::") continues on indented lines that are not prose either
            if _RST_NON_PROSE.match(stripped) or "::" not in stripped:
                skip_deeper_than = indent
            kept.append("")
            continue
        if stripped.endswith("::"):
            skip_deeper_than = indent  # a literal block follows
        if re.fullmatch(r"[=\-~^\"'`#*+<>]{3,}", stripped) or stripped.startswith((">>>", "$ ", "...")):
            kept.append("")  # a section underline or a prompt line ends the paragraph
            continue
        kept.append(line.rstrip(":") if stripped.endswith("::") else line)
    text = "\n".join(kept)
    text = _RST_ROLE.sub(r"\1", text)
    text = _RST_LINK.sub(r"\1", text)
    return _RST_MARK.sub("", text)


def _read_rst_tree(folder: Path) -> Iterator[str]:
    for path in sorted(folder.rglob("*.rst.txt")):
        yield from _paragraphs(rst_to_text(path.read_text(encoding="utf-8", errors="replace")))


# -- HTML (the Debian handbook) -------------------------------------------------------------------------
_HTML_DROP = re.compile(r"<(script|style|pre|table|div class=\"navheader\"|div class=\"navfooter\")"
                        r"[^>]*>.*?</\1>", re.S | re.I)
# Publican (the handbook's tool) writes paragraphs as <div class="para">; plain HTML as <p>
_HTML_PARA = re.compile(r"<(p|div class=\"para\")[^>]*>(.*?)</(?:p|div)>", re.S | re.I)
_HTML_TAG = re.compile(r"<[^>]+>")


def html_paragraphs(text: str) -> Iterator[str]:
    """The text of every paragraph (<p>, or Publican's <div class="para">) outside code listings, tables
    and navigation; inline code keeps its words."""
    text = _HTML_DROP.sub(" ", text)
    for match in _HTML_PARA.finditer(text):
        para = _normalise(html.unescape(_HTML_TAG.sub(" ", match.group(2))))
        if len(para.split()) >= MIN_WORDS:
            yield para


def _read_html_tree(folder: Path) -> Iterator[str]:
    for path in sorted(folder.glob("*.html")):
        yield from html_paragraphs(path.read_text(encoding="utf-8", errors="replace"))


# -- dictd databases (GCIDE, the Devil's Dictionary) ----------------------------------------------------
_GCIDE_HEADWORD = re.compile(r"\\[^\\\n]*\\")  # \Ab*di*ca"tion\ pronunciation
_GCIDE_NOTE = re.compile(r"\[(1913 Webster|PJC|WordNet 1\.5|Webster 1913 Suppl\.|[A-Z]{2,5})\]")


def dictd_paragraphs(text: str) -> Iterator[str]:
    """Definitions and quotations of a dictd database, without headwords' pronunciations or source tags."""
    text = _GCIDE_HEADWORD.sub(" ", text)
    text = _GCIDE_NOTE.sub(" ", text)
    yield from _paragraphs(text)


def _read_dictd(path: Path) -> Iterator[str]:
    with gzip.open(path, "rt", encoding="utf-8", errors="replace") as handle:
        text = handle.read()
    # the database's own header (licence, "00-database-*" entries) is not prose of the dictionary
    start = text.find("\n\n", text.rfind("00-database"))
    yield from dictd_paragraphs(text[start:])


# -- WordNet data files ---------------------------------------------------------------------------------
def wordnet_glosses(lines: Iterator[str]) -> Iterator[str]:
    """From WordNet ``data.*`` lines, each synset's gloss: its definition, then its quoted examples."""
    for line in lines:
        if line.startswith("  ") or "|" not in line:
            continue  # the licence header lines start with two spaces
        gloss = line.split("|", 1)[1]
        parts = [p.strip().strip('"').strip() for p in gloss.split(";")]
        sentence = ". ".join(p for p in parts if p)
        if len(sentence.split()) >= MIN_WORDS:
            yield _normalise(sentence)


def _read_wordnet(folder: Path) -> Iterator[str]:
    for pos in ("noun", "verb", "adj", "adv"):
        with open(folder / f"data.{pos}", encoding="utf-8", errors="replace") as handle:
            yield from wordnet_glosses(handle)


# -- fortune files --------------------------------------------------------------------------------------
def fortune_paragraphs(text: str) -> Iterator[str]:
    """Each fortune (``%``-separated) as one paragraph, with its attribution line dropped."""
    for fortune in text.split("\n%\n"):
        body = "\n".join(line for line in fortune.splitlines() if not line.strip().startswith("--"))
        para = _normalise(body)
        if len(para.split()) >= MIN_WORDS:
            yield para


def _read_fortunes(folder: Path) -> Iterator[str]:
    for path in sorted(folder.iterdir()):
        if path.is_file() and not path.suffix and not path.is_symlink():
            yield from fortune_paragraphs(path.read_text(encoding="utf-8", errors="replace"))


SOURCES: tuple[ProseSource, ...] = (
    ProseSource("python-docs", "python3.11-doc", Path("/usr/share/doc/python3.11-doc/html/_sources"),
                "PSF License", _read_rst_tree),
    ProseSource("debian-handbook", "debian-handbook", Path("/usr/share/doc/debian-handbook/html/en-US"),
                "GPL-2+ or CC-BY-SA-3.0", _read_html_tree),
    ProseSource("gcide", "dict-gcide", Path("/usr/share/dictd/gcide.dict.dz"), "GPL-2+", _read_dictd),
    ProseSource("wordnet", "wordnet-base", Path("/usr/share/wordnet"), "WordNet 3.0 license", _read_wordnet),
    ProseSource("fortunes", "fortunes", Path("/usr/share/games/fortunes"), "BSD-4-clause (fortune-mod)",
                _read_fortunes),
    ProseSource("devil", "dict-devil", Path("/usr/share/dictd/devil.dict.dz"), "public domain", _read_dictd),
)


def missing_sources(sources: tuple[ProseSource, ...] = SOURCES) -> list[ProseSource]:
    return [source for source in sources if not source.path.exists()]


def check_sources(sources: tuple[ProseSource, ...] = SOURCES) -> None:
    """FileNotFoundError naming every missing source and the one command that installs them all."""
    missing = missing_sources(sources)
    if missing:
        names = ", ".join(f"{s.name} ({s.path})" for s in missing)
        packages = " ".join(s.package for s in missing)
        raise FileNotFoundError(f"prose corpus sources missing: {names}. "
                                f"Install them with: apt-get install --no-install-recommends {packages}")


def is_held_out(paragraph: str, held_out_per_mille: int) -> bool:
    """Whether a paragraph is in the held-out split: a stable hash, independent of reading order."""
    digest = hashlib.blake2b(paragraph.encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest, "little") % 1000 < held_out_per_mille


def read_corpus(sources: tuple[ProseSource, ...] = SOURCES) -> dict[str, list[str]]:
    """Every source's paragraphs, duplicates within the corpus removed (first occurrence kept)."""
    check_sources(sources)
    seen: set[str] = set()
    corpus: dict[str, list[str]] = {}
    for source in sources:
        kept = []
        for para in source.read(source.path):
            if para not in seen:
                seen.add(para)
                kept.append(para)
        corpus[source.name] = kept
    return corpus
