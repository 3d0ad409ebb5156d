"""Check an HTML page the way a reader sees it: rendered by headless Chromium, offline.

:func:`check_page` loads a copy of the page with a small script that, once everything has loaded,
measures what a reader would see wrong and writes it into the DOM; Chromium prints the DOM
(``--dump-dom``) and the findings are read back from it. Checked: raw TeX left in the visible text
(``$...$`` as TeX delimits math -- no space inside the dollars, so "$ 2.5 billion ... for $" in a
sentence is not math -- and ``\\frac`` and the like: math that did not render), a page wider than the window (content
cut off or needing a horizontal scroll of the whole page), images that did not load or have no
real alt text, table rows taller than their content needs (a wide table squeezed into the column wraps
every cell into a few characters: rows several lines tall and mostly blank), and a Python list of quoted
names printed as text (``['comparisons.csv', ...]``: a notebook's last expression, not a sentence). :func:`static_problems` reads the HTML text itself (no browser): markup that is not
HTML, MathML or SVG (an unescaped ``<site-packages>/...`` that a browser swallows as an element) and a
report header whose wall time is not recorded. Nothing is fetched from a network: Chromium runs with networking features off, so a
page that needs a CDN fails the check.

Chromium comes from the OS packages (Debian: ``apt-get install chromium``); :func:`find_chromium`
returns None where there is none, and the tests skip then.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tempfile
from html.parser import HTMLParser
from pathlib import Path

WINDOW = (1280, 900)  # a laptop's browser window
CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
# nbconvert's placeholder, and the report's for a figure that carries no caption (typhoon.report.notebook_html.NO_CAPTION)
GENERIC_ALT = ("", "No description has been provided for this image", "A figure without a stored caption.")

# A table row counts as too tall when it is more than TALL_ROW_LINES lines of text high while its cells' content
# fills less than BLANK_ROW_FILL of it on average (each cell's content height over the tallest cell's): one long
# cell wrapped into a narrow column beside one-line numbers. Rows of the committed reports that read well measure
# >= 0.44; the squeezed rows of a 36-column table 0.13-0.24. Prose tables (a claim per row) wrap by design and
# stay well filled.
TALL_ROW_LINES = 3
BLANK_ROW_FILL = 0.35

# Runs in the page after load: the findings go into <pre id="typhoon-check"> as JSON.
_PROBE = """
<script>
window.addEventListener("load", () => {
  const text = document.body.innerText;
  const raw = [...text.matchAll(/\\$(?=\\S)[^$\\n]{1,80}(?<=\\S)\\$|\\\\(frac|sum|mathrm|pi|lambda|alpha|mid|log)\\b/g)]
      .map(m => m[0]).slice(0, 10);
  const doc = document.documentElement;
  const wide = [...document.querySelectorAll("body *")].filter(e => {
      const r = e.getBoundingClientRect();
      return r.width > 0 && r.right > window.innerWidth + 1 && !e.closest(".table-wrap, pre, math");
  }).slice(0, 10).map(e => e.tagName.toLowerCase() + (e.className ? "." + e.className : ""));
  const images = [...document.images].map(img => ({
      src: img.src.slice(0, 60), loaded: img.complete && img.naturalWidth > 0, alt: img.getAttribute("alt")}));
  const tall = [...document.querySelectorAll("table tr")].map(tr => {
      const cells = [...tr.children];
      if (!cells.length || tr.querySelector("img, svg, math")) return null;
      const style = getComputedStyle(cells[0]);
      const line = parseFloat(style.lineHeight) || 1.2 * parseFloat(style.fontSize);
      const height = tr.getBoundingClientRect().height;
      const needs = cells.map(c => { const r = document.createRange(); r.selectNodeContents(c);
                                     return r.getBoundingClientRect().height; });
      const tallest = Math.max(...needs);
      const fill = tallest > 0 ? needs.reduce((a, b) => a + b, 0) / (cells.length * tallest) : 1;
      return {height: Math.round(height), lines: +(height / line).toFixed(1), fill: +fill.toFixed(2),
              cells: cells.length, first: cells[0].innerText.trim().slice(0, 40)};
  }).filter(r => r && r.lines > TALL_ROW_LINES && r.fill < BLANK_ROW_FILL);
  const texts = [];
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
      if (!node.parentElement.closest("code, script, style, #typhoon-check")) texts.push(node.textContent);
  }
  const reprs = [...texts.join("\\n").matchAll(/\\[\\s*(['"])[^'"\\n\\]]+\\1(\\s*,\\s*(['"])[^'"\\n\\]]+\\3)+\\s*,?\\s*\\]/g)]
      .map(m => m[0].slice(0, 80)).slice(0, 10);
  const out = document.createElement("pre");
  out.id = "typhoon-check";
  out.textContent = JSON.stringify({raw_math: raw, page_width: doc.scrollWidth, window_width: window.innerWidth,
                                    too_wide: wide, images: images, mathml: document.querySelectorAll("math").length,
                                    tall_rows: tall, python_lists: reprs});
  document.body.appendChild(out);
});
</script>
"""


# The elements a report may hold: HTML, the MathML latex2mathml writes, and the SVG a figure may carry.
HTML_TAGS = frozenset("""
a abbr address area article aside audio b base bdi bdo blockquote body br button canvas caption cite code col
colgroup data datalist dd del details dfn dialog div dl dt em embed fieldset figcaption figure footer form h1 h2 h3
h4 h5 h6 head header hgroup hr html i iframe img input ins kbd label legend li link main map mark menu meta meter
nav noscript object ol optgroup option output p param picture pre progress q rp rt ruby s samp script search
section select slot small source span strong style sub summary sup table tbody td template textarea tfoot th
thead time title tr track u ul var video wbr
math annotation annotation-xml maction menclose merror mfenced mfrac mi mmultiscripts mn mo mover mpadded
mphantom mprescripts mroot mrow ms mspace msqrt mstyle msub msubsup msup mtable mtd mtext mtr munder munderover
semantics none
svg g path rect circle ellipse line polyline polygon text tspan defs use clippath lineargradient stop
""".split())


class _TagCollector(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.unknown: list[str] = []
        self.wall_time: str | None = None
        self._term: str | None = None
        self._in: str | None = None

    def handle_starttag(self, tag, attrs):
        if tag not in HTML_TAGS:
            self.unknown.append(f"<{tag}>")
        self._in = tag

    def handle_data(self, data):
        if self._in == "dt":
            self._term = data.strip()
        elif self._in == "dd" and self._term == "Wall time" and self.wall_time is None:
            self.wall_time = data.strip()


def static_problems(text: str) -> list[str]:
    """What is wrong in a report's HTML text itself, no browser needed: elements that are not HTML,
    MathML or SVG (unescaped markup, e.g. ``<site-packages>/...`` from a redacted path), and a header
    whose wall time is missing or "not recorded" (a report made by :mod:`typhoon.report.html` has one)."""
    collector = _TagCollector()
    collector.feed(text)
    problems = []
    if collector.unknown:
        names = sorted(set(collector.unknown))
        problems.append(f"unescaped markup (elements that are not HTML, which a browser hides): {names[:10]}")
    if 'class="meta"' in text and (collector.wall_time is None or collector.wall_time.startswith("not recorded")):
        problems.append(f"no wall time in the header: {collector.wall_time or 'missing'}")
    return problems


def find_chromium() -> str | None:
    """The Chromium (or Chrome) executable on PATH, or None."""
    for name in CHROMIUM_NAMES:
        path = shutil.which(name)
        if path:
            return path
    return None


def measure_page(page: str | os.PathLike, chromium: str | None = None, timeout_s: float = 120) -> dict:
    """Render ``page`` in headless Chromium (window :data:`WINDOW`) and return what the probe measured."""
    chromium = chromium or find_chromium()
    if chromium is None:
        raise FileNotFoundError("no Chromium found (on Debian: apt-get install chromium)")
    html = Path(page).read_text(encoding="utf-8")
    with tempfile.TemporaryDirectory(prefix="typhoon-browser-") as tmp:
        probe_page = Path(tmp) / "page.html"
        probe = _PROBE.replace("TALL_ROW_LINES", str(TALL_ROW_LINES)).replace("BLANK_ROW_FILL", str(BLANK_ROW_FILL))
        probe_page.write_text(html.replace("</body>", probe + "</body>", 1), encoding="utf-8")
        cmd = [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
               "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-extensions",
               "--disable-dev-shm-usage", f"--user-data-dir={Path(tmp) / 'profile'}",
               f"--window-size={WINDOW[0]},{WINDOW[1]}", "--virtual-time-budget=10000", "--dump-dom",
               probe_page.as_uri()]
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s)
    match = re.search(r'<pre id="typhoon-check">(.*?)</pre>', done.stdout, re.S)
    if not match:
        raise RuntimeError(f"Chromium did not render {page} (exit {done.returncode}): {done.stderr[-2000:]}")
    return json.loads(match.group(1).replace("&quot;", '"').replace("&lt;", "<").replace("&gt;", ">")
                      .replace("&amp;", "&"))


def report_page(page: str | os.PathLike) -> Path:
    """``page``, or the ``report.html`` of the output folder ``page``; FileNotFoundError when there is none."""
    page = Path(page) / "report.html" if Path(page).is_dir() else Path(page)
    if not page.is_file():
        raise FileNotFoundError(f"no report at {page} (give a report.html or the output folder that holds one)")
    return page


def check_page(page: str | os.PathLike, chromium: str | None = None) -> list[str]:
    """What a reader would see wrong in ``page`` (an empty list when nothing): one line per problem,
    :func:`static_problems` first, then what headless Chromium measured. ``page`` may be an output folder
    (its ``report.html``); FileNotFoundError when there is no report."""
    page = report_page(page)
    problems = static_problems(page.read_text(encoding="utf-8"))
    chromium = chromium or find_chromium()
    if chromium is None:
        return [*problems, "not rendered: no Chromium found (on Debian: apt-get install chromium)"]
    seen = measure_page(page, chromium)
    if seen["raw_math"]:
        problems.append(f"raw TeX in the text (math that did not render): {seen['raw_math']}")
    if seen["page_width"] > seen["window_width"] or seen["too_wide"]:
        problems.append(f"wider than a {seen['window_width']} px window ({seen['page_width']} px): {seen['too_wide']}")
    if seen["tall_rows"]:
        rows = ", ".join(f"{r['first'] or '(blank)'!r} ({r['cells']} cells, {r['lines']} lines, {r['fill']:.0%} filled)"
                         for r in seen["tall_rows"][:5])
        problems.append(f"{len(seen['tall_rows'])} table row(s) taller than their content needs (more than "
                        f"{TALL_ROW_LINES} lines, mostly blank: a wide table squeezed into the column): {rows}")
    if seen["python_lists"]:
        problems.append(f"a Python list printed as text, not a sentence: {seen['python_lists']}")
    for img in seen["images"]:
        if not img["loaded"]:
            problems.append(f"image not shown: {img['src']}...")
        if (img["alt"] or "").strip() in GENERIC_ALT:
            problems.append(f"image without alt text: {img['src']}...")
    return problems
