"""The HTML report: the executed study notebooks as one self-contained page (`evalkit report`).

The page has a title, a table of contents, a provenance block (kit version and git commit, when
the notebooks ran, profile, protocols, models, the data checksum, the machine, and every
notebook's parameters, once) and then each notebook's narrative and results: code folded away
(``<details>``), the parameter cells left out (they are in the provenance block), tables as
`evalkit.study.printed` shows them, figures embedded with their captions. It loads nothing from
the network: no scripts, no style sheets, images inline; notebook HTML passes through
`evalkit.pages.sanitize` first, so a cell's ``<script>`` is shown as text and never runs.

Every notebook is read and checked before anything is written; a smoke notebook (one
executed with SEEDS, or named ``*-smoke-*``) goes into a report only when asked
(``evalkit report --smoke``), so a smoke result never passes for the full study.
"""

from __future__ import annotations

import base64
import html
import os
import platform
import re
import subprocess
from pathlib import Path
from typing import Any
from urllib.parse import quote

from evalkit.core.devices import resolve_device
from evalkit.core.errors import DataError, KitError
from evalkit.core.version import __version__
from evalkit.data.runs import write_atomic
from evalkit.datasets.csfcube import checksum
from evalkit.models import registry
from evalkit.pages.explore import SCOPE, scope_sentence
from evalkit.pages.sanitize import sanitize
from evalkit.study import params, printed, record

ROOT = Path(__file__).resolve().parents[2]
SKIPPED_TAGS = {"parameters", "injected-parameters"}  # shown once, in the provenance block
PRIORITY = ("text/html", "image/png", "image/svg+xml", "text/markdown", "text/plain")


def read_notebook(path: Path):
    """An executed notebook, or a one-line KitError for a missing, folder, garbage or non-notebook file."""
    import nbformat

    path = Path(path)
    if path.is_dir():
        raise DataError(path, "is a folder, not a notebook; give executed .ipynb files")
    if not path.is_file():
        raise DataError(path, "no such notebook; give executed .ipynb files")
    try:
        notebook = nbformat.read(str(path), as_version=4)
    except (ValueError, RecursionError, UnicodeDecodeError, KeyError, TypeError, AttributeError,
            nbformat.ValidationError) as exc:
        first = str(exc).splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise DataError(path, f"not a readable .ipynb notebook ({first[:200]}); give executed notebooks") from None
    if not isinstance(getattr(notebook, "cells", None), list):
        raise DataError(path, "not a notebook (no cells); give executed .ipynb files")
    return notebook


def smoke_seeds(path: Path, notebook) -> str | None:
    """The SEEDS a notebook was executed with (papermill parameters), or the file's smoke tag; None
    for a full-study notebook."""
    parameters = (notebook.metadata.get("papermill") or {}).get("parameters") or {}
    seeds = parameters.get("SEEDS") if isinstance(parameters, dict) else None
    if isinstance(seeds, str) and any(part.strip() for part in seeds.split(",")):
        return seeds
    if "-smoke-" in Path(path).name:
        return Path(path).name
    return None


def explore_links(out: Path) -> str:
    """A paragraph (HTML) linking the explore pages (``explore-*.html``, `make explore SEED=...`)
    beside the report, by relative path: each name escaped as text and percent-encoded as a link,
    since a file name is anyone's text; a note on `make explore` when there are none."""
    folder = Path(out).parent
    pages = sorted(p.name for p in folder.glob("explore-*.html") if p.name != Path(out).name) \
        if folder.is_dir() else []
    if not pages:
        return ("<p><em>Per-seed exploration: <code>make explore SEED=ID</code> renders notebooks/explore.ipynb for "
                "one seed (top k per model with each annotator's grade, the documents p-MRR scores) beside this "
                "report.</em></p>")
    links = ", ".join(f'<a href="{html.escape(quote(name), quote=True)}">'
                      f'{html.escape(name.removesuffix(".html"))}</a>' for name in pages)
    return (f"<p><em>Per-seed exploration (notebooks/explore.ipynb, <code>make explore SEED=ID</code>): {links}."
            "</em></p>")


def _parameters(notebook) -> dict:
    parameters = (notebook.metadata.get("papermill") or {}).get("parameters") or {}
    return parameters if isinstance(parameters, dict) else {}


def notebook_name(path: Path, notebook) -> str:
    """The study notebook a file was executed from: relevance-offline-pool.ipynb -> relevance."""
    source = (notebook.metadata.get("papermill") or {}).get("input_path")
    if isinstance(source, str) and source:
        return Path(source).stem
    profile = _parameters(notebook).get("PROFILE")
    stem = Path(path).stem
    return stem.split(f"-{profile}-")[0] if profile and f"-{profile}-" in stem else stem


def git_commit() -> str:
    """The kit checkout's commit (short), "+ uncommitted changes" when its files differ; or why not."""
    try:
        head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short=12", "HEAD"], capture_output=True,
                              text=True, timeout=10)
        if head.returncode != 0:
            return "not a git checkout"
        dirty = subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown (git not available)"
    return head.stdout.strip() + (" + uncommitted changes" if dirty else "")


def machine() -> str:
    """The machine building the report: OS, architecture, CPUs, Python, torch and its default device."""
    parts = [f"{platform.system()} {platform.machine()}", f"{os.cpu_count()} CPUs",
             f"Python {platform.python_version()}"]
    try:
        import torch  # lazy: torch is heavy and optional (the report says "no torch" without it)

        parts.append(f"torch {torch.__version__}, device {resolve_device()}")
    except ImportError:
        parts.append("no torch")
    return ", ".join(parts)


def _models(name: str, parameters: dict) -> str:
    """The models a notebook ran: its MODELS, else its profile's default list (labels beside names)."""
    profile = parameters.get("PROFILE")
    if not profile or (name not in params.STUDY_LISTS and "MODELS" not in parameters):
        return ""
    try:
        names = params.split(parameters.get("MODELS", "")) if name not in params.STUDY_LISTS else \
            params.study_models(profile, name, parameters.get("MODELS", "")) if params.STUDY_LISTS[name] else []
        return ", ".join(f"{registry.spec(m, profile).label} ({m})" for m in names)
    except KitError:
        return str(parameters.get("MODELS", ""))


def explore_scope(notebook) -> str:
    """What an executed explore notebook ran, as its page said it (`evalkit.pages.explore.scope`, kept
    under `SCOPE` beside the page's HTML); "" when the notebook holds none (an older notebook)."""
    for cell in notebook.cells:
        for output in cell.get("outputs", []) if cell.cell_type == "code" else []:
            ran = output.get("data", {}).get(SCOPE)
            if isinstance(ran, dict):
                return scope_sentence(ran)
    return ""


def provenance(read: list[tuple[Path, object]]) -> tuple[str, str]:
    """(title, HTML block): kit, commit, when the notebooks ran, profile, protocols, models, data, machine,
    and one table of every notebook's parameters."""
    import pandas as pd


    runs = [(notebook_name(p, nb), _parameters(nb), nb.metadata.get("papermill") or {}) for p, nb in read]
    profiles = sorted({str(r[1]["PROFILE"]) for r in runs if r[1].get("PROFILE")})
    protocols = sorted({str(r[1]["PROTOCOL"]) for r in runs if r[1].get("PROTOCOL")})
    times = sorted(t for r in runs for t in (r[2].get("start_time"), r[2].get("end_time")) if isinstance(t, str))
    seeds = sorted({str(r[1]["SEEDS"]) for r in runs if str(r[1].get("SEEDS", "")).strip()})
    executed = f"{times[0][:19].replace('T', ' ')} to {times[-1][:19].replace('T', ' ')} UTC" if times \
        else "unknown (not executed by papermill)"
    explored = sorted({str(r[1]["SEED"]) for r in runs if r[0] == "explore" and r[1].get("SEED")})
    ran = sorted({s for (_, nb), r in zip(read, runs) if r[0] == "explore" and (s := explore_scope(nb))})
    scope = f"smoke run: {'; '.join(seeds)}" if seeds else "all 34 seeds (50 queries)"
    facts = [("kit", f"evalkit {__version__}, commit {git_commit()}"), ("notebooks executed", executed),
             ("profile", ", ".join(profiles) or "unknown"), ("protocol", ", ".join(protocols) or "unknown"),
             ("seeds", f"explored: {', '.join(explored)} (runs: {'; '.join(ran) or 'not recorded'})" if explored
              else scope),
             ("data", f"CSFCube, manifest sha256 {checksum()} (evalkit/manifests/csfcube.tsv)"),
             ("machine (report built on)", machine())]
    models = [(name, m) for name, parameters, _ in runs if (m := _models(name, parameters))]
    facts += [(f"models: {name}", m) for name, m in dict(models).items()]
    rows = "".join(f"<tr><th>{html.escape(k)}</th><td>{html.escape(v)}</td></tr>" for k, v in facts)
    table = pd.DataFrame([{"notebook": f"{name} ({p.name})", **{k: str(v) for k, v in parameters.items()}}
                          for (p, _), (name, parameters, _) in zip(read, runs)]).fillna("")
    title = f"evalkit: CSFCube seed {', '.join(explored)} explored" if explored and len(explored) == len(runs) \
        else "evalkit: instruction-following retrieval on CSFCube"
    if profiles or protocols:
        title += f" ({', '.join(profiles)} profile, {', '.join(protocols)} protocol{'s' * (len(protocols) > 1)})"
    if seeds:
        title += ", smoke run"
    block = (f'<table class="provenance">{rows}</table><p class="evalkit-block">Parameters of each notebook '
             f"(papermill)</p>{printed.show(table, split=False)._repr_html_() if len(table.columns) > 1 else ''}")
    return title, block


# A progress bar as tqdm draws it ("Loading:  40%|####      | 4/10 [00:01<00:02, 3.1it/s]"), the
# part of a line after its last carriage return (what a terminal would show at the end).
PROGRESS = re.compile(r"^.*?\d{1,3}%\|.*\|\s*[\d.]+[kMG]?/[\d.?]+[kMG]?\b.*$"
                      r"|^.*\|\s*[\d.]+[kMG]?/[\d.?]+[kMG]?\s*\[.*\]\s*$")
WIDGET = "application/vnd.jupyter.widget-view+json"  # a live widget (a notebook tqdm bar): nothing on a static page
BASE64 = re.compile(r"[A-Za-z0-9+/=\s]*")


def without_chatter(text: str) -> str:
    """A stderr stream as the report shows it: each line as a terminal ends up showing it (the text
    after its last carriage return), progress bars (`PROGRESS`: tqdm's, e.g. transformers'
    "Converting and de-quantizing GGUF tensors... 0%|...") dropped, and the blank lines around
    what is left; every other line (a warning, a traceback) kept as written. "" when nothing is."""
    shown = (line.rstrip("\r").rsplit("\r", 1)[-1] for line in text.split("\n"))
    kept = "\n".join(line for line in shown if not PROGRESS.match(line)).strip("\n")
    return kept + "\n" if kept.strip() else ""


def _output(output) -> str:
    """One cell output as HTML: rich data by `PRIORITY`, print output as text, stderr folded without
    its progress bars (`without_chatter`), errors shown, live widgets left out."""
    kind = output.get("output_type")
    if kind == "stream":
        raw = "".join(output.get("text", ""))
        if output.get("name") != "stderr":
            return f"<pre class=\"stdout\">{html.escape(raw)}</pre>"
        text = without_chatter(raw)
        return f"<details class=\"stderr\"><summary>messages (stderr)</summary><pre>{html.escape(text)}</pre>" \
            "</details>" if text else ""
    if kind == "error":
        error = f"{output.get('ename', '')}: {output.get('evalue', '')}"
        return f"<pre class=\"error\">{html.escape(error)}</pre>"
    data = output.get("data", {})
    if WIDGET in data:
        return ""
    for mime in PRIORITY:
        if mime not in data:
            continue
        value = data[mime]
        value = "".join(value) if isinstance(value, list) else str(value)
        if mime == "text/html":
            return f"<div class=\"output\">{sanitize(value)}</div>"
        if mime == "image/png":  # base64 only: the value goes into an attribute
            if not BASE64.fullmatch(value):
                return '<p class="error">(a figure whose data is not base64 PNG: left out)</p>'
            return f'<img src="data:image/png;base64,{"".join(value.split())}" alt="figure"/>'
        if mime == "image/svg+xml":  # as an image: a browser runs no script inside an <img>
            encoded = base64.b64encode(value.encode()).decode()
            return f'<img src="data:image/svg+xml;base64,{encoded}" alt="figure"/>'
        if mime == "text/markdown":
            from nbconvert.filters.markdown_mistune import markdown2html_mistune

            return sanitize(markdown2html_mistune(value))
        return f"<pre class=\"stdout\">{html.escape(value)}</pre>"
    return ""


def _markdown(source: str, prefix: str) -> str:
    """Markdown as HTML, headings one level down (the page title is the only h1), ids made unique."""
    from nbconvert.filters.markdown_mistune import markdown2html_mistune

    body = sanitize(markdown2html_mistune(source))
    body = re.sub(r"<(/?)h([1-5])\b", lambda m: f"<{m.group(1)}h{int(m.group(2)) + 1}", body)
    return re.sub(r'(id="|href="#)([^"]+)"', lambda m: f'{m.group(1)}{prefix}-{m.group(2)}"', body)


def section(index: int, path: Path, notebook, suffix: str = "") -> str:
    """One notebook's cells as a section: narrative, folded code and outputs (parameter cells left out);
    `suffix` goes after its first heading (the protocol, when a report holds several)."""
    out = [f'<section id="s{index}"><p class="source">Executed notebook: <code>{html.escape(path.name)}</code></p>']
    for cell in notebook.cells:
        tags = set(cell.get("metadata", {}).get("tags", []))
        if tags & SKIPPED_TAGS:
            continue
        if cell.cell_type == "markdown":
            body = _markdown(cell.source, f"s{index}")
            if suffix and "<h2" in body:
                marked = html.escape(suffix)
                body = re.sub(r'(<h2 id="[^"]+">)(.*?)(<a class="anchor-link"|</h2>)',
                              lambda m, marked=marked: f"{m.group(1)}{m.group(2)} {marked}{m.group(3)}", body, count=1)
                suffix = ""
            out.append(body)
        elif cell.cell_type == "code":
            if cell.source.strip():
                out.append(f'<details class="code"><summary>code</summary><pre>{html.escape(cell.source)}</pre>'
                           "</details>")
            out.extend(_output(o) for o in cell.get("outputs", []))
    out.append("</section>")
    return "\n".join(out)


def contents(body: str) -> str:
    """A table of contents of the sections' headings (h2, with their h3 nested)."""
    items, open_sub = [], False
    for level, anchor, text in re.findall(r'<h([23]) id="([^"]+)">(.*?)(?:<a class="anchor-link"|</h[23]>)', body):
        text = re.sub(r"<[^>]+>", "", text)
        if level == "2":
            items.append(("</ul>" if open_sub else "") + f'<li><a href="#{anchor}">{text}</a>')
            open_sub = False
        else:
            items.append(("" if open_sub else "<ul>") + f'<li><a href="#{anchor}">{text}</a></li>')
            open_sub = True
    return "<nav><h2>Contents</h2><ol>" + "".join(items) + ("</ul>" if open_sub else "") + \
        '<li><a href="#provenance">Provenance and parameters</a></li></ol></nav>'


CSS = """body{font-family:system-ui,-apple-system,"Segoe UI",Helvetica,Arial,sans-serif;font-size:15px;line-height:1.45;
color:#1a1a1a;margin:0;padding:0 1em}main{max-width:1200px;margin:0 auto;padding:1em 0 4em 0}
h1{font-size:1.7em;margin:0.6em 0 0.2em 0}h2{font-size:1.35em;margin-top:2em;border-bottom:1px solid #ccc}
h3{font-size:1.1em}a.anchor-link{display:none}img,svg{max-width:100%;height:auto}
pre{background:#f6f6f6;padding:0.5em;overflow-x:auto;font-size:12.5px;white-space:pre-wrap}
details.code summary,details.stderr summary{color:#777;font-size:12px;cursor:pointer}
details.code,details.stderr{margin:0.2em 0}p.source{color:#777;font-size:12px;margin-top:2.5em}
table.provenance{border-collapse:collapse;font-size:13px}table.provenance th{text-align:left;padding:2px 12px 2px 0;
vertical-align:top;white-space:nowrap}table.provenance td{padding:2px 0;word-break:break-word}
div.output{overflow-x:auto}p.smoke{background:#fff3cd;padding:0.5em;border:1px solid #e0c060}
nav ol{padding-left:1.4em}nav ul{padding-left:1.2em}"""


def page(title: str, links: str, provenance_html: str, sections: list[str], smoke: bool) -> str:
    """The whole page; `links` (`explore_links`) and the sections are HTML already escaped or sanitized."""
    body = "\n".join(sections)
    warning = '<p class="smoke">A smoke run (a few seeds): not the study\'s results.</p>' if smoke else ""
    return (f'<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8"/>\n<title>{html.escape(title)}</title>\n'
            f"<style>{CSS}</style>\n</head>\n<body><main>\n<h1>{html.escape(title)}</h1>\n{warning}"
            f"{links}\n{contents(body)}\n{body}\n"
            f'<section id="provenance"><h2>Provenance and parameters</h2>{provenance_html}</section>\n'
            "</main></body>\n</html>\n")


# The other tables `make all` writes (under the report's folder, tables/), shown in their own section.
def _specter_record() -> str:
    """What the release's script gives the SPECTER sample, from the published record (the one place
    these figures are written): its MAP and NDCG%20 rows, which the table's MAP_csfcube and
    nDCG_csfcube%20 rows repeat."""
    rows = record.load_record()
    rows = rows[(rows.kit_model == "specter") & (rows.protocol == "pool")]
    said = [f"{record.MEASURES[r.metric]} "
            + " / ".join(f"{float(getattr(r, p)):.2f}" for p in record.PARTS) for r in rows.itertuples()]
    return (f"the release's eval_scripts/ranking_eval.py gives {' and '.join(said)} for background / method / "
            "result / all; nDCG_csfcube@20 cuts at 20 documents, not at 20% of the pool")


def checks_said() -> dict[str, str]:
    """The other tables `make all` writes (under the report's folder, tables/), each with the
    sentence the report's Checks section puts above it."""
    return {"specter-sample.json": f"The release's SPECTER sample rankings through the kit's evaluator "
                                   f"({_specter_record()})",
            "human.json": "The Human reference (`evalkit human`, the pool recipe), every measure"}


def checks(out: Path) -> str:
    """HTML of the JSON tables `make all` writes beside the notebooks' (`checks_said`), x100, measures by
    facet; "" when there are none."""
    import json

    import pandas as pd


    found = []
    for name, what in checks_said().items():
        path = Path(out).parent / "tables" / name
        try:
            values = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        rows = [{"measure": m, **{f: (None if v is None else 100 * v) for f, v in by.items()}}
                for m, by in values.items() if isinstance(by, dict) and m not in ("queries", "settings")]
        table = pd.DataFrame(rows)
        found.append(f"<p>{html.escape(what)} (<code>tables/{name}</code>, x100):</p>"
                     f"{printed.show(table, split=False)._repr_html_()}")
    return "<section id=\"checks\"><h2 id=\"checks-h\">Checks built by make all</h2>" + "".join(found) + \
        "</section>" if found else ""


def html_report(notebooks: list[Path], out: Path, smoke: bool = False) -> Path:
    """One self-contained HTML page of the executed notebooks, in order (see the module docstring), with
    links to the explore pages beside it (`explore_links`)."""
    return report_of([(Path(p), read_notebook(p)) for p in notebooks], out, smoke)


def report_of(read: list[tuple[Path, Any]], out: Path, smoke: bool = False) -> Path:
    """`html_report` of notebooks already read (`read_notebook`: each path with its notebook), so a
    caller that checked them first (`evalkit report`) parses each one once."""
    found = next(((p, s) for p, nb in read if (s := smoke_seeds(p, nb)) is not None), None)
    if found is not None and not smoke:
        raise DataError(found[0], f"a smoke notebook (SEEDS={found[1]}); a report of smoke runs needs "
                        "--smoke, or give the full-study notebooks")
    try:
        title, block = provenance(read)
        protocols = [str(_parameters(nb).get("PROTOCOL", "")) for _, nb in read]
        several = len(set(protocols) - {""}) > 1
        sections = [section(i, p, nb, f"({protocol} protocol)" if several and protocol else "")
                    for i, ((p, nb), protocol) in enumerate(zip(read, protocols), start=1)]
    except (ValueError, KeyError, TypeError, AttributeError) as exc:  # cells nbformat read but cannot render
        first = str(exc).splitlines()[0][:200] if str(exc).strip() else type(exc).__name__
        raise DataError("notebooks",
                        f"cannot render the notebooks ({first}); give notebooks executed by papermill") from None
    sections.append(checks(out))
    links = "" if all(notebook_name(p, nb) == "explore" for p, nb in read) else explore_links(out)
    try:
        write_atomic(Path(out), page(title, links, block, sections, found is not None))
    except OSError as exc:  # a full disk, a folder gone: nothing half-written is left (write_atomic)
        raise DataError(out, f"cannot write the report ({exc.strerror or exc}); free disk space or write it "
                        "elsewhere") from None
    return Path(out)
