"""The HTML report (evalkit.pages.report): title, contents, provenance, parameters once, code folded,
tables as printed with the kit's rows apart from the paper's, and nothing loaded from the network."""

from __future__ import annotations

import re

import nbformat
import pandas as pd

from evalkit.pages import report
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
