"""The kit's pages in a real browser (issue 37): headless Chromium opens a report and an explore page
built from hostile inputs (tests/hostile_pages.py: an explore page's file name with an ``<img
onerror>``, CSS escapes spelling ``url(`` and ``@import``, ``image-set``, ``<style>`` and
``<script>`` in notebook HTML and markdown, a model label holding a style sheet, figure data
breaking out of its attribute) beside a server on 127.0.0.1 that records every connection. The
server gets none and no script runs (each would set the page's title). A control page first shows
the browser does reach the server, so the test can fail."""

from __future__ import annotations

import re
import shutil
import subprocess
import threading

import hostile_pages
import nbformat
import pytest
from loopback import Loopback

from evalkit.pages import explore, explore_views, report

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="headless Chromium is not installed (apt-get install "
                                                          "chromium); the pages' text tests still run")
SEED = "929877"


class Recorder(Loopback):
    """Records every connection and GET; answers 404."""

    def __init__(self):
        super().__init__()
        self.seen: list[str] = []
        self.connections = 0

    def verify_request(self, request, client_address):
        with self.lock:
            self.connections += 1
        return True

    def respond_get(self, path, headers):
        with self.lock:
            self.seen.append(path)
        return 404, b""


def dom(path, tmp_path) -> str:
    """The page's DOM after Chromium loaded it (scripts, styles and images as a browser runs them)."""
    done = subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                           "--disable-extensions", "--disable-background-networking", "--disable-component-update",
                           "--disable-sync", f"--user-data-dir={tmp_path / 'chromium'}", "--dump-dom",
                           path.resolve().as_uri()], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def notebook(path, name: str, cells, **parameters):
    executed = nbformat.v4.new_notebook()
    executed.metadata["papermill"] = {"input_path": f"notebooks/{name}.ipynb",
                                      "parameters": {"PROFILE": "offline", "PROTOCOL": "pool", **parameters}}
    executed.cells = cells
    nbformat.write(executed, str(path))
    return path


def output_cell(*outputs):
    cell = nbformat.v4.new_code_cell("display(x)")
    cell.outputs = list(outputs)
    return cell


def title(page: str) -> str:
    found = re.search(r"<title>(.*?)</title>", page, re.S)
    return found.group(1) if found else ""


def test_hostile_pages_load_nothing_and_run_nothing_in_chromium(tmp_path, data, collection):
    with Recorder() as server:
        root = server.root
        control = tmp_path / "control.html"
        control.write_text(f'<!DOCTYPE html><title>control</title><img src="{root}/control">')
        dom(control, tmp_path)
        with server.lock:
            assert server.seen == ["/control"], "the browser must reach the recording server"
            server.seen.clear()
            server.connections = 0

        # the report: hostile notebook HTML, markdown and figure data; a hostile explore page name beside it
        hostile = hostile_pages.notebook_html(root) + f'<img src=x onerror="{hostile_pages.SCRIPT}">' \
            f"<script>{hostile_pages.SCRIPT}</script><script src=\"{root}/script\"></script>"
        relevance = notebook(tmp_path / "relevance-offline-pool.ipynb", "relevance", [
            nbformat.v4.new_markdown_cell("# Ranking relevance\n\n" + hostile),
            output_cell(nbformat.v4.new_output("display_data", data={"text/html": hostile, "text/plain": "x"}),
                        nbformat.v4.new_output("display_data", data={"image/png": hostile_pages.png(root)}))])
        (tmp_path / hostile_pages.file_name(root)).write_text("page")
        built = report.html_report([relevance], tmp_path / "report.html")

        # the explore page: a model label holding a style sheet and an onerror script
        runs = {q: {d.doc_id: float(int(d.doc_id) % 101) for d in collection.candidates_of(q)}
                for q in collection.queries}
        explorer = explore_views.Explorer(data, collection, {"blind": runs}, {"blind": hostile_pages.label(root)})
        page = explore.show(explorer, SEED, k=3)
        cell = output_cell(nbformat.v4.new_output("execute_result", execution_count=1,
                                                  data={**page._repr_mimebundle_(), "text/plain": "page"}))
        explored = notebook(tmp_path / "explore.ipynb", "explore", [cell], SEED=SEED)
        explore_page = report.html_report([explored], tmp_path / f"explore-{SEED}.html")

        shown = {name: dom(path, tmp_path) for name, path in (("report", built), ("explore", explore_page))}
        threading.Event().wait(0.3)  # a request still in flight lands
        with server.lock:
            assert server.seen == [] and server.connections == 0, server.seen
    for name, page_dom in shown.items():
        assert title(page_dom).startswith("evalkit:"), (name, title(page_dom))
        assert hostile_pages.PWNED not in title(page_dom)
    assert "Hostile" in shown["explore"] and "shown" in shown["report"]  # the pages did render
