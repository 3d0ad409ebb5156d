"""An executed notebook as a section of the HTML report: its Markdown cells and its outputs, never its code.

Markdown with ``$...$`` / ``$$...$$`` math outside code becomes HTML with MathML (rendered by the browser, no
CDN); an output becomes HTML by its kind: stdout as text, a failed cell's error, a figure with the caption that
:func:`typhoon.figure_style.save_figure` stores in the PNG as alt text and below the image, a table in a box
that scrolls; stderr, progress bars and widgets are left out. This machine's absolute paths are made relative
(:func:`typhoon.paths.redact`). The page around the sections is :mod:`typhoon.report.html`'s.
"""

from __future__ import annotations

import base64
import html
import io
import re
from pathlib import Path

from typhoon import paths

_CODE_SPANS = re.compile(r"(```.*?```|`[^`\n]*`)", re.S)
_MATH = re.compile(r"\$\$(.+?)\$\$|(?<![\\$\w])\$(?=\S)([^$\n]+?)(?<=\S)\$(?![\w$])", re.S)
_PLACEHOLDER = "TYPHOONMATH{}X"
NO_CAPTION = "A figure without a stored caption."
FIGURE_HTML = re.compile(r'<img class="typhoon-figure" alt="[^"]*" src="data:image/png;base64,([A-Za-z0-9+/=]+)">')
# The names typhoon.paths.redact puts for this machine's folders look like tags: in HTML they must be escaped
# (a browser swallows "<site-packages>/x" as an unknown element); committed notebooks carry them raw.
REDACTED_NAMES = ("<site-packages>", "<python>")  # what a figure not made by typhoon.figure_style.save_figure gets


# --------------------------------------------------------------------------------------------------
# Markdown and math


def redact_html(text: str, base: Path | None = None) -> str:
    """HTML (or Markdown) with this machine's paths made relative and the names that stand for them
    (:data:`REDACTED_NAMES`) escaped, so they show as text."""
    text = paths.redact(text, base)
    for name in REDACTED_NAMES:
        text = text.replace(name, html.escape(name))
    return text


def latex_to_mathml(latex: str, block: bool) -> str:
    """LaTeX as MathML (rendered natively by browsers, offline); on a conversion error, the source in code."""
    import latex2mathml.converter

    try:
        return latex2mathml.converter.convert(latex.strip(), display="block" if block else "inline")
    except Exception:  # an expression the converter does not know: show it as code, never as raw $...$
        return f"<code>{html.escape(latex)}</code>"


def markdown_html(text: str, shift: int = 0) -> str:
    """Markdown (with ``$...$`` / ``$$...$$`` math outside code) as HTML; headings moved down ``shift`` levels."""
    import mistune

    maths: list[str] = []

    def stash(match: re.Match) -> str:
        block = match.group(1) is not None
        maths.append(latex_to_mathml(match.group(1) if block else match.group(2), block))
        return _PLACEHOLDER.format(len(maths) - 1)

    parts = _CODE_SPANS.split(text)
    text = "".join(part if i % 2 else _MATH.sub(stash, part) for i, part in enumerate(parts))
    out = mistune.create_markdown(escape=False, plugins=["table", "strikethrough"])(text)
    for i, mathml in enumerate(maths):
        out = out.replace(_PLACEHOLDER.format(i), mathml)
    if shift:
        out = re.sub(r"<(/?)h([1-6])\b", lambda m: f"<{m.group(1)}h{min(6, int(m.group(2)) + shift)}", out)
    return re.sub(r"<table>", '<div class="table-wrap"><table>', out).replace("</table>", "</table></div>")


# --------------------------------------------------------------------------------------------------
# Notebook outputs


def image_caption(png: bytes) -> str | None:
    """The caption stored in a PNG's ``Description`` text chunk (``typhoon.figure_style.save_figure``)."""
    from PIL import Image

    try:
        with Image.open(io.BytesIO(png)) as img:
            return img.text.get("Description") or img.text.get("Title")
    except Exception:
        return None


def output_html(output: dict, base: Path) -> str:
    """One notebook output as report HTML; "" for what a reader should not see (stderr, progress, widgets)."""
    kind = output.get("output_type")
    if kind == "stream":
        if output.get("name") != "stdout":
            return ""
        text = paths.redact(_text(output.get("text", "")), base).strip()
        return f"<pre>{html.escape(text)}</pre>" if text else ""
    if kind == "error":
        return (f'<div class="error">This cell failed: <b>{html.escape(output.get("ename", ""))}</b>: '
                f'{html.escape(paths.redact(output.get("evalue", ""), base))}</div>')
    data = output.get("data", {})
    if "application/vnd.jupyter.widget-view+json" in data:  # a widget: nothing a static page can show
        return ""
    shown_figure = FIGURE_HTML.fullmatch(_text(data.get("text/html", "")).strip())  # report.display.show_figure
    if "image/png" in data or shown_figure:
        encoded = _text(data["image/png"]).strip() if "image/png" in data else shown_figure[1]
        caption = image_caption(base64.b64decode(encoded)) or NO_CAPTION
        return (f'<figure><img src="data:image/png;base64,{encoded}" '
                f'alt="{html.escape(caption)}"><figcaption>{html.escape(caption)}</figcaption></figure>')
    if "text/html" in data:
        body = redact_html(_text(data["text/html"]), base)
        return f'<div class="table-wrap rendered-html">{body}</div>'
    if "text/markdown" in data:
        return markdown_html(redact_html(_text(data["text/markdown"]), base), shift=2)
    if "text/plain" in data:
        text = paths.redact(_text(data["text/plain"]), base)
        return f"<pre>{html.escape(text)}</pre>" if text.strip() else ""
    return ""


def _text(value) -> str:
    return "".join(value) if isinstance(value, list) else str(value)


def notebook_section(path: Path, anchor: str, base: Path, banner: str = "") -> tuple[str, list[tuple[str, str]], str]:
    """An executed notebook as a report section: (its title, its [(anchor, subtitle)], its HTML).

    Markdown cells and code outputs in order; code, the parameters cells and the first heading (which
    becomes the section title) are left out.
    """
    import nbformat

    nb = nbformat.read(path, as_version=4)
    title, parts, subsections = path.stem, [], []
    for cell in nb.cells:
        tags = cell.get("metadata", {}).get("tags", [])
        if cell.cell_type == "markdown":
            source = cell.source
            if title == path.stem and source.lstrip().startswith("# "):
                first, _, source = source.lstrip().partition("\n")
                title = first[2:].strip()
            rendered = markdown_html(redact_html(source, base), shift=1)
            parts.append(_anchored(rendered, anchor, subsections))
        elif cell.cell_type == "code" and not {"parameters", "injected-parameters"} & set(tags):
            parts.extend(output_html(o, base) for o in cell.get("outputs", []))
    head = f'<h2 id="{anchor}">{html.escape(title)}</h2>\n<p class="source">From <code>notebooks/{html.escape(path.name)}</code>.</p>'
    return title, subsections, "\n".join([head, banner, *filter(None, parts)])


def _anchored(rendered: str, prefix: str, subsections: list[tuple[str, str]]) -> str:
    """Give the section's h3 headings ids (for the table of contents) and list them in ``subsections``."""
    def name(match: re.Match) -> str:
        anchor = f"{prefix}-{len(subsections) + 1}"
        subsections.append((anchor, re.sub(r"<[^>]+>", "", match.group(1))))
        return f'<h3 id="{anchor}">{match.group(1)}</h3>'

    return re.sub(r"<h3>(.*?)</h3>", name, rendered, flags=re.S)
