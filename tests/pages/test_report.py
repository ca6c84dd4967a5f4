"""The HTML report (evalkit.pages.report): title, contents, provenance, parameters once, code folded,
tables as printed with the kit's rows apart from the paper's, and nothing loaded from the network."""

from __future__ import annotations

import errno
import html
import os
import re
from urllib.parse import quote

import hostile_pages
import nbformat
import pandas as pd
import pytest

from evalkit import cli
from evalkit.pages import report
from evalkit.pages.sanitize import REMOVED_CSS, safe_css, sanitize
from evalkit.study import printed

REMOTE = re.compile(r"""<(?!a\b)[a-z]+\b[^>]*\b(?:src|href)\s*=\s*["']?\s*(?:https?:)?//""", re.I)


def remote_references(page: str) -> list[str]:
    """src / href attributes (links to read aside: <a href>) naming another host, and CSS imports."""
    return REMOTE.findall(page) + re.findall(r"@import|url\(\s*['\"]?(?:https?:)?//", page)


def executed(path, name: str = "relevance", seeds: str = "", protocol: str = "pool"):
    notebook = nbformat.v4.new_notebook()
    notebook.metadata["papermill"] = {"input_path": f"notebooks/{name}.ipynb", "start_time": "2026-12-01T10:00:00",
                                      "end_time": "2026-12-01T10:05:00",
                                      "parameters": {"PROFILE": "offline", "PROTOCOL": protocol, "SEEDS": seeds,
                                                     "MODELS": "bm25,minilm"}}
    notebook.cells.append(nbformat.v4.new_markdown_cell("# Ranking relevance\n\nThe narrative.\n\n## Details"))
    notebook.cells.append(nbformat.v4.new_code_cell('PROFILE = "offline"', metadata={"tags": ["parameters"]}))
    notebook.cells.append(nbformat.v4.new_code_cell('PROFILE = "offline"  # injected',
                                                    metadata={"tags": ["injected-parameters"]}))
    table = pd.DataFrame({"label": ["BM25", "SciNCL (paper)"], "all": [52.3412, 36.43], "p_holm": [0.00208, None],
                          "source": ["kit", "Mysore et al., Table 1"]})
    cell = nbformat.v4.new_code_cell("printed.show(relevance)")
    cell.outputs = [nbformat.v4.new_output("stream", name="stderr", text="a warning\n"),
                    nbformat.v4.new_output("execute_result", data={"text/html": printed.show(table)._repr_html_(),
                                                                   "text/plain": "table"}, execution_count=1)]
    notebook.cells.append(cell)
    nbformat.write(notebook, str(path))
    return path


def test_evalkit_report_parses_each_notebook_once(tmp_path, monkeypatch):
    """`evalkit report` checks the notebooks before the output (read_notebook's lines) and builds the
    page from what it read: one nbformat parse per notebook, not one to check and one to build."""
    paths = [executed(tmp_path / "relevance-offline-pool.ipynb"),
             executed(tmp_path / "hybrid-offline-pool.ipynb", name="hybrid")]
    parsed = []
    real = nbformat.read
    monkeypatch.setattr(nbformat, "read", lambda path, *a, **k: parsed.append(path) or real(path, *a, **k))
    assert cli.main(["report", *map(str, paths), "--out", str(tmp_path / "r.html")]) == 0
    assert sorted(parsed) == sorted(map(str, paths)) and (tmp_path / "r.html").stat().st_size > 0


def test_report_has_title_contents_provenance_and_parameters_once(tmp_path):
    out = report.html_report([executed(tmp_path / "relevance-offline-pool.ipynb")], tmp_path / "r.html")
    page = out.read_text()
    assert "<title>evalkit: instruction-following retrieval on CSFCube (offline profile, pool protocol)</title>" in page
    assert page.count("<h1>") == 1 and '<h2 id="s1-Ranking-relevance">' in page
    assert '<a href="#s1-Ranking-relevance">Ranking relevance</a>' in page and 'href="#s1-Details"' in page
    for fact in ("evalkit 0.1.0, commit", "2026-12-01 10:00:00 to 2026-12-01 10:05:00 UTC", "manifest sha256",
                 "BM25 (bm25), all-MiniLM-L6-v2 (minilm)", "CPUs"):
        assert fact in page
    assert 'PROFILE = "offline"' not in page  # the parameter cells are left out; their values are in provenance
    assert '<details class="code"><summary>code</summary><pre>printed.show(relevance)</pre></details>' in page
    assert "This kit" in page and printed.PAPER_TITLE.replace("'", "&#x27;") in page and "0.00208" in page
    assert "nan" not in re.sub(r"<[^>]+>", "", page).split() and remote_references(page) == []


def test_remote_references_are_found():
    assert remote_references('<script src="https://cdn.example/require.js"></script>') != []
    assert remote_references('<link rel="stylesheet" href="//fonts.example/x.css">') != []
    assert remote_references('<a href="https://arxiv.org/abs/1">paper</a><img src="data:image/png;base64,">') == []


def test_smoke_reports_say_so(tmp_path):
    out = report.html_report([executed(tmp_path / "relevance-offline-pool-smoke-1.ipynb", seeds="929877")],
                             tmp_path / "r.html", smoke=True)
    page = out.read_text()
    assert "smoke run: 929877" in page and 'class="smoke"' in page and "smoke run</title>" in page


def test_the_other_tables_of_make_all_are_in_the_report(tmp_path):
    (tmp_path / "tables").mkdir()
    (tmp_path / "tables" / "specter-sample.json").write_text(
        '{"nDCG_csfcube@20": {"background": 0.5, "all": 0.25}, "p-MRR": {"all": null}, "queries": 50}')
    page = report.html_report([executed(tmp_path / "relevance-offline-pool.ipynb")], tmp_path / "r.html").read_text()
    assert '<a href="#checks-h">Checks built by make all</a>' in page and "tables/specter-sample.json" in page
    assert "50.00" in page and "25.00" in page


def test_a_report_of_several_protocols_names_each_sections_protocol(tmp_path):
    notebooks = [executed(tmp_path / "hybrid-offline-pool.ipynb", "hybrid"),
                 executed(tmp_path / "hybrid-offline-pooled.ipynb", "hybrid", protocol="pooled")]
    page = report.html_report(notebooks, tmp_path / "r.html").read_text()
    assert ">Ranking relevance (pool protocol)</a>" in page and ">Ranking relevance (pooled protocol)</a>" in page
    assert "pool, pooled protocols)</title>" in page


def test_html_and_scripts_from_notebook_cells_are_shown_as_text_never_run(tmp_path):
    """A user's notebook output or markdown holding <script>, an event handler, a javascript:
    link or an iframe: escaped or dropped; the kit's own tables and styles keep their markup."""
    path = executed(tmp_path / "relevance-offline-pool.ipynb")
    notebook = nbformat.read(str(path), as_version=4)
    notebook.cells.append(nbformat.v4.new_markdown_cell(
        'Hello <script>alert("md")</script> <a href="javascript:alert(1)">x</a> <b onclick="alert(2)">bold</b>'))
    cell = nbformat.v4.new_code_cell("display(HTML(user_text))")
    cell.outputs = [nbformat.v4.new_output("display_data", data={
        "text/html": '<div><script>alert("out")</script><iframe src="https://evil.example"></iframe>'
                     '<img src="x" onerror="alert(3)"><style>@import url(https://evil.example/x.css);</style>'
                     '<table><tr><td title="a&quot;b">1</td></tr></table>',
        "text/plain": "x"}),
        nbformat.v4.new_output("display_data", data={"image/svg+xml": "<svg><script>alert(4)</script></svg>"})]
    notebook.cells.append(cell)
    nbformat.write(notebook, str(path))
    page = report.html_report([path], tmp_path / "r.html").read_text()
    body = page.split("<body>", 1)[1]
    assert "<script" not in body and "<iframe" not in body and "onclick" not in body and "onerror" not in body
    assert "javascript:" not in body and "@import" not in body and remote_references(page) == []
    assert "&lt;script&gt;alert(&quot;md&quot;)&lt;/script&gt;" in body or "&lt;script&gt;alert(" in body
    assert "<b>bold</b>" in body and '<td title="a&quot;b">1</td>' in body
    assert 'class="evalkit"' in body and "<style>" in body  # the kit's own table and its style
    assert "data:image/svg+xml;base64," in body


# --- hostile inputs (issue 37): nothing inserted raw, no CSS that can fetch -------------------------

ROOT = "http://127.0.0.1:9"  # never contacted: the tests read the page's text (test_browser.py opens them)


def with_output(path, *outputs, markdown: str | None = None):
    """The executed notebook at `path` with one more code cell holding `outputs` (and a markdown cell)."""
    notebook = nbformat.read(str(path), as_version=4)
    if markdown is not None:
        notebook.cells.append(nbformat.v4.new_markdown_cell(markdown))
    cell = nbformat.v4.new_code_cell("display(x)")
    cell.outputs = list(outputs)
    notebook.cells.append(cell)
    nbformat.write(notebook, str(path))
    return path


def html_output(text: str):
    return nbformat.v4.new_output("display_data", data={"text/html": text, "text/plain": "x"})


def test_an_explore_page_name_is_text_and_a_percent_encoded_link_never_markup(tmp_path):
    name = hostile_pages.file_name(ROOT)
    (tmp_path / name).write_text("page")
    page = report.html_report([executed(tmp_path / "relevance-offline-pool.ipynb")], tmp_path / "r.html").read_text()
    assert "<img" not in page and "onerror=" not in page.replace("onerror=&quot;", "")
    assert f'<a href="{html.escape(quote(name))}">{html.escape(name.removesuffix(".html"))}</a>' in page


@pytest.mark.parametrize("name", sorted(hostile_pages.style_attributes(ROOT)))
def test_a_style_attribute_that_could_fetch_is_dropped(name):
    value = hostile_pages.style_attributes(ROOT)[name]
    shown = sanitize(f'<div style="{html.escape(value)}">x</div>')
    assert shown == "<div>x</div>" and ROOT not in shown


@pytest.mark.parametrize("name", sorted(hostile_pages.style_sheets(ROOT)))
def test_a_style_sheet_that_could_fetch_is_dropped(name):
    shown = sanitize(f"<style>{hostile_pages.style_sheets(ROOT)[name]}</style><p>x</p>")
    assert shown == f"<style>{REMOVED_CSS}</style><p>x</p>" and ROOT not in shown


@pytest.mark.parametrize("css", ["background:URL(x)", "background:image(x)", "background:cross-fade(a,b)",
                                 "background:element(#a)", "width:expression(alert(1))", "x:var(--a)",
                                 "background:u\\rl(x)", "background:\\55 RL(x)", "@import 'x'", "a</style>",
                                 "width:calc((1px))", "width:\x00url(x)"])
def test_the_css_rule_refuses_what_it_does_not_know(css):
    assert not safe_css(css)


def test_the_kits_own_styles_pass_the_css_rule():
    """The rule is strict, not blind: the kit's tables, the explore page's and pandas' styles pass."""
    import pandas as pd

    from evalkit.pages import explore

    styler = pd.DataFrame({"a": [1]}).style.set_uuid("x").map(lambda v: "background-color: #c8e6c9")
    for css in (printed.STYLE, explore.CSS, styler.to_html()):
        for sheet in re.findall(r"<style[^>]*>(.*?)</style>", css, re.S):
            assert safe_css(sheet), sheet
    assert safe_css("background:rgb(1, 2, 3);max-width:110px;padding:0 4px") and safe_css("tr:nth-child(2n){}")


def test_a_figure_whose_data_is_not_base64_is_left_out(tmp_path):
    path = with_output(executed(tmp_path / "relevance-offline-pool.ipynb"),
                       nbformat.v4.new_output("display_data", data={"image/png": hostile_pages.png(ROOT)}))
    page = report.html_report([path], tmp_path / "r.html").read_text()
    assert "onerror" not in page and ROOT not in page and "not base64 PNG: left out" in page


def test_hostile_notebook_html_reaches_the_page_without_anything_that_fetches(tmp_path):
    path = with_output(executed(tmp_path / "relevance-offline-pool.ipynb"),
                       html_output(hostile_pages.notebook_html(ROOT)), markdown=hostile_pages.notebook_html(ROOT))
    page = report.html_report([path], tmp_path / "r.html").read_text()
    assert ROOT not in page and "\\75" not in page and "@" not in page.split("<body>", 1)[1]
    assert page.count("<p>shown</p>") == 2


def test_a_full_disk_names_the_report_and_leaves_no_temporary_file(tmp_path, monkeypatch, capsys):
    """`evalkit report --out` on a full disk: one line naming the output file, exit 2, nothing left beside it."""
    import tempfile

    from evalkit.cli import main
    from evalkit.data import runs

    notebook = executed(tmp_path / "relevance-offline-pool.ipynb")
    out = tmp_path / "out" / "report.html"
    out.parent.mkdir()
    real = tempfile.NamedTemporaryFile

    def full(*args, **kwargs):
        handle = real(*args, **kwargs)

        def write(text):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

        handle.write = write
        return handle

    monkeypatch.setattr(runs.tempfile, "NamedTemporaryFile", full)
    assert main(["report", str(notebook), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and str(out) in err and "No space left on device" in err
    assert list(out.parent.iterdir()) == []


# --- the machinery's chatter (issue 38): progress bars out, warnings and errors in -----------------

GGUF = ("Converting and de-quantizing GGUF tensors...:   0%|          | 0/291 [00:00<?, ?it/s]\r"
        "Converting and de-quantizing GGUF tensors...: 100%|##########| 291/291 [00:02<00:00, 120.51it/s]\n")


def test_progress_bars_on_stderr_are_left_out_and_warnings_and_errors_kept(tmp_path):
    warning = "/x/encoders.py:12: UserWarning: the tokenizer truncated 3 abstracts\n  warnings.warn(\n"
    path = with_output(executed(tmp_path / "relevance-offline-pool.ipynb"),
                       nbformat.v4.new_output("stream", name="stderr", text=GGUF),
                       nbformat.v4.new_output("stream", name="stderr",
                                              text="Batches: 100%|██████████| 2/2 [00:00<00:00, 9.12it/s]\n" + warning),
                       nbformat.v4.new_output("display_data", data={
                           "application/vnd.jupyter.widget-view+json": {"model_id": "abc", "version_major": 2,
                                                                        "version_minor": 0},
                           "text/plain": "  0%|          | 0/291 [00:00<?, ?it/s]"}),
                       nbformat.v4.new_output("error", ename="ValueError", evalue="a real failure", traceback=[]))
    page = report.html_report([path], tmp_path / "r.html").read_text()
    assert "GGUF" not in page and "it/s" not in page and "Batches" not in page
    assert html.escape(warning, quote=False) in page and "ValueError: a real failure" in page
    assert page.count("messages (stderr)") == 2  # the fixture's "a warning" and this one; the bar alone: none


def test_the_checks_section_quotes_the_figures_its_table_shows(cached_data, capsys, sample_dir, tmp_path):
    """Every 'MEASURE a / b / c / d' the sentence quotes is that measure's row in the table below it
    (`evalkit evaluate` of the release's SPECTER sample, as make all writes it)."""
    (tmp_path / "tables").mkdir()
    assert cli.main(["evaluate", "--dataset", "csfcube", "--runs", str(sample_dir), "--name", "specter",
                     "--json"]) == 0
    (tmp_path / "tables" / "specter-sample.json").write_text(capsys.readouterr().out)
    section = report.checks(tmp_path / "report.html")
    quoted = re.findall(r"(\w[\w%@]*) (\d+\.\d\d) / (\d+\.\d\d) / (\d+\.\d\d) / (\d+\.\d\d)", html.unescape(section))
    assert {m for m, *_ in quoted} == {"MAP_csfcube", "nDCG_csfcube%20"}
    rows = {cells[0]: cells[1:5] for cells in
            (re.findall(r"<td[^>]*>([^<]*)</td>", row) for row in section.split("<tr>")) if cells}
    for measure, *values in quoted:
        assert rows[measure] == values, (measure, rows.get(measure))
