"""Explore one CSFCube seed (``notebooks/explore.ipynb``, ``make explore SEED=...``): the page.

One code path renders both the interactive notebook (JupyterLab: a seed and model picker,
`picker`) and the static page (papermill / nbconvert: `show`). The notebook checks its
parameters (`check`), loads an `Explorer` (`load_checked`; the data and the DataFrame views are
`evalkit.pages.explore_views`) and shows it (`explore`). `render` joins the views of one seed into
one HTML block: `seed_view` (the seed's title and abstract, its sentences highlighted by facet),
then the models side by side in one table per view (rows aligned: one line per document, long
titles cut with the full title on hover). Every measure on the page is x100 (the tables' scale);
the models' own scores are not measures and are left out of the side-by-side view.
"""

from __future__ import annotations

import html
import math
import numbers
import os
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from evalkit.evaluation.request import check_options
from evalkit.pages.explore_views import (
    DEFAULT_K,
    Explorer,
    as_explore,
    check_k,
    check_models,
    check_seed,
    explore_request,
    load,
    movement,
    one_seed,
    query_scores,
    top_k,
)

FACET_COLOURS = {"background": "#cfe2ff", "method": "#d1f2d1", "result": "#ffe0b3", "other": "#eeeeee"}
GRADE_COLOURS = {0: "#ffffff", 1: "#f2f2f2", 2: "#c8e6c9", 3: "#81c784"}


@dataclass(frozen=True)
class Parameters:
    """The explore notebook's checked parameters."""

    profile: str
    protocol: str
    seed: str
    models: tuple[str, ...]
    k: int
    measure: str
    runs_dir: Path
    corpus: str | None
    instructions: str | None = None  # a user's instruction file; None: the kit's

    def describe(self) -> str:
        return (f"seed {self.seed} | models {', '.join(self.models)} | profile {self.profile} | "
                f"protocol {self.protocol} | k {self.k} | measure {self.measure}"
                + (f" | instructions {self.instructions}" if self.instructions else ""))


def check(PROFILE: str, PROTOCOL: str, SEED: str, MODELS: str = "", K=DEFAULT_K,  # noqa: N803
          DISCOUNT: str = "csfcube", RUNS_DIR: str = "runs", CORPUS: str = "", INSTRUCTIONS: str = "") -> Parameters:
    """Check the explore notebook's parameters (one-line KitError) before any data or model is loaded:
    PROFILE, PROTOCOL, MODELS, DISCOUNT, CORPUS and INSTRUCTIONS as the study notebooks
    (`evalkit.study.params`; empty MODELS: the profile's relevance models), SEED one seed paper id
    and K the documents shown per model and facet. The page's evaluation request
    (`explore_request`: the protocol, the measure and p-MRR, the seed) is checked by the rules
    every front end's request follows (`check_options`; the seed against the data by
    `load_checked`); an error names the parameter as the page spells it (``SEED``, ``K``)."""
    return as_explore(_check, PROFILE, PROTOCOL, SEED, MODELS, K, DISCOUNT, RUNS_DIR, CORPUS, INSTRUCTIONS)


def _check(PROFILE: str, PROTOCOL: str, SEED: str, MODELS: str, K, DISCOUNT: str, RUNS_DIR: str,  # noqa: N803
           CORPUS: str, INSTRUCTIONS: str) -> Parameters:
    # lazy (start-up cost): the runner, registry and study load only when a page is built
    from evalkit.study import params

    study = params.check("relevance", PROFILE=PROFILE, PROTOCOL=PROTOCOL, MODELS=MODELS, DISCOUNT=DISCOUNT,
                         RUNS_DIR=RUNS_DIR, CORPUS=CORPUS, INSTRUCTIONS=INSTRUCTIONS)
    seed = one_seed(SEED)
    check_options(explore_request(study.protocol, study.measure, seed))
    return Parameters(study.profile, study.protocol, seed, study.models, check_k(K), study.measure,
                      study.runs_dir, study.corpus, study.instructions)


def load_checked(parameters: Parameters) -> Explorer:
    """`load` with checked parameters; the seed is checked against the data. The static page (not
    `interactive`) runs only the seed's queries of a model without a stored run over every query."""
    return load(parameters.models, parameters.profile, parameters.protocol, parameters.runs_dir,
                parameters.corpus, parameters.measure, parameters.seed, parameters.instructions,
                every_query=interactive())



# --- views -------------------------------------------------------------------------------------


def seed_view(explorer: Explorer, seed: str) -> str:
    """HTML: the seed's id, title, annotated facets and abstract with each sentence coloured by facet."""
    seed = check_seed(explorer.collection, seed)
    paper = explorer.data.papers[seed]
    legend = " ".join(f'<span style="background:{c};padding:0 4px">{html.escape(f)}</span>'
                      for f, c in FACET_COLOURS.items())
    sentences = " ".join(
        f'<span title="{html.escape(s.label or "")}" style="background:{FACET_COLOURS.get(s.label or "", "#fff")}">'
        f"{html.escape(s.text)}</span>" for s in paper.sentences)
    annotated = html.escape(", ".join(explorer.facets(seed)))
    return (f'<div class="explore-seed"><h3>Seed {html.escape(seed)}: {html.escape(paper.title)}</h3>'
            f"<p>Annotated facets: <b>{annotated}</b>. Sentence colours: {legend}</p>"
            f'<p style="line-height:1.6">{sentences}</p></div>')



# --- rendering -----------------------------------------------------------------------------------


def _grade_style(value) -> str:
    """A grade's shading (`GRADE_COLOURS`); numpy's integers too (a DataFrame's grades are int64)."""
    if isinstance(value, numbers.Real) and not isinstance(value, bool) and not math.isnan(value):
        return f"background-color: {GRADE_COLOURS.get(int(value), '#ffffff')}"
    return ""


def table_html(frame: pd.DataFrame, uuid: str, grades: tuple[str, ...] = (), digits: int = 2) -> str:
    """A DataFrame as static HTML (pandas Styler, a fixed id so reruns are identical); grade columns shaded."""
    if frame.empty:
        return "<p><i>none</i></p>"
    styler = frame.style.hide(axis="index").set_uuid(uuid).format(precision=digits, na_rep="", escape="html")
    styler = styler.format_index(escape="html", axis=1)
    shaded = [c for c in frame.columns if c in grades]
    if shaded:
        styler = styler.map(_grade_style, subset=shaded)
    return styler.to_html()


WIDTH = 1150  # px the side-by-side tables may take (the report's page is 1,200 px wide)
CSS = ("<style>table.explore{border-collapse:collapse;font-size:12.5px;margin:0.2em 0 1em 0}"
       "table.explore th,table.explore td{padding:2px 5px;border-bottom:1px solid #e3e3e3;white-space:nowrap;"
       "text-align:left}table.explore th{white-space:normal;vertical-align:bottom}"
       "table.explore td.n{text-align:right;font-variant-numeric:tabular-nums}"
       "table.explore td.t{overflow:hidden;text-overflow:ellipsis}"
       "table.explore .m{border-left:2px solid #999}</style>")


def _title_px(models: int, numbers: int, fixed: int = 40, per: int = 46) -> int:
    """The px a title cell may take so that `models` column groups of a title and `numbers` number
    columns (`per` px each), beside `fixed` px of leading columns, fit in `WIDTH`."""
    return max(110, int((WIDTH - fixed - models * numbers * per) / max(models, 1)) - 12)


def _cell(value, shade: bool = False, number: bool = True, first: bool = False, title: str | None = None,
          width: int | None = None) -> str:
    # lazy (start-up cost): the runner, registry and study load only when a page is built
    from evalkit.study.printed import cell

    text = cell(value, "") if number else str(value)
    classes = " ".join(c for c in ("n" if number else "t", "m" if first else "") if c)
    styles = [s for s in (_grade_style(value) if shade else "", f"max-width:{width}px" if width else "") if s]
    style = f' style="{";".join(styles)}"' if styles else ""
    hover = f' title="{html.escape(title)}"' if title else ""
    return f'<td class="{classes}"{style}{hover}>{html.escape(text)}</td>'


def _header(models: list[str], explorer: Explorer, columns: list[str], lead: list[str]) -> str:
    top = f'<th colspan="{len(lead)}"></th>' if lead else ""
    groups = "".join(f'<th class="m" colspan="{len(columns)}">{html.escape(explorer.label(m))}</th>' for m in models)
    names = "".join(f"<th>{html.escape(c)}</th>" for c in lead) + "".join(
        "".join(("<th class=\"m\">" if i == 0 else "<th>") + f"{html.escape(c)}</th>" for i, c in enumerate(columns))
        for _ in models)
    return f"<thead><tr>{top}{groups}</tr><tr>{names}</tr></thead>"


def side_by_side(explorer: Explorer, models: list[str], qid: str, k: int) -> str:
    """HTML: the models' top k for one query in one table, a column group per model (title, adjudicated
    grade, each annotator's grade), one line per rank so the models' rows align."""
    frames = [top_k(explorer, m, qid, k) for m in models]
    annotators = list(explorer.data.queries[qid].annotators)
    width = _title_px(len(models), 1 + len(annotators))
    rows = []
    for rank in range(1, k + 1):
        cells = [_cell(rank)]
        for frame in frames:
            row = frame[frame["rank"] == rank]
            if row.empty:
                cells += [_cell("", number=False, first=True)] + [_cell(math.nan)] * (1 + len(annotators))
                continue
            row = row.iloc[0]
            cells.append(_cell(row.title, number=False, first=True, title=f"{row.doc}: {row.title}", width=width))
            cells += [_cell(row[c], shade=True) for c in ["grade", *annotators]]
        rows.append("<tr>" + "".join(cells) + "</tr>")
    head = _header(models, explorer, ["title", "grade", *annotators], ["rank"])
    return f'<table class="explore">{head}<tbody>{"".join(rows)}</tbody></table>'


def moved_side_by_side(explorer: Explorer, models: list[str], qid: str) -> str:
    """HTML: the documents p-MRR scores for a query (the same for every model: they come from the
    grades), their grades, then per model their rank under each instruction and their p-MRR (x100)."""
    frames = {m: movement(explorer, m, qid).set_index("doc") for m in models}
    first = next(iter(frames.values()))
    if first.empty:
        return "<p><i>none</i></p>"
    docs = sorted(first.index, key=lambda d: (-first.loc[d, "grade"], d))
    rows = []
    for doc in docs:
        cells = [_cell(doc, number=False), _cell(first.loc[doc, "title"], number=False, title=first.loc[doc, "title"],
                                                 width=_title_px(1, 3 * len(models) + 2, fixed=130, per=58)),
                 _cell(first.loc[doc, "grade"], shade=True), _cell(first.loc[doc, "grade_other"], shade=True)]
        for model in models:
            row = frames[model].loc[doc]
            cells += [_cell(row["rank"], first=True), _cell(row["rank_other"]), _cell(row["p-MRR"])]
        rows.append("<tr>" + "".join(cells) + "</tr>")
    other = explorer.collection.pairs[qid].split("_", 1)[1]
    head = _header(models, explorer, ["rank", f"rank ({other})", "p-MRR"],
                   ["doc", "title", "grade", f"grade ({other})"])
    return f'<table class="explore">{head}<tbody>{"".join(rows)}</tbody></table>'


def render(explorer: Explorer, seed: str, models=None, k: int = DEFAULT_K) -> str:
    """Every view of one seed as one HTML block (what the notebook shows, static or in the picker): the
    models side by side in each table, every measure x100."""
    seed = check_seed(explorer.collection, seed)
    k = check_k(k)
    models = as_explore(check_models, explorer, models)
    ran = scope(explorer, models)
    note = f"<p><b>Runs:</b> {html.escape(scope_sentence(ran))}.</p>"
    if ran["seed_only"]:
        note += ("<p><b>collection figures: run <code>make relevance</code> first</b> (after it, this page reuses "
                 "its runs).</p>")
    labels = [explorer.label(m) for m in models]
    parts = [CSS, seed_view(explorer, seed), "<h4>Per-query values beside the collection's (x100)</h4>", note,
             table_html(query_scores(explorer, seed).query("model in @labels", local_dict={"labels": labels}),
                        f"scores-{seed}")]
    for facet in explorer.facets(seed):
        qid = f"{seed}_{facet}"
        annotators = ", ".join(explorer.data.queries[qid].annotators)
        parts.append(f"<h4>{html.escape(facet)}: each model's top {k} (grade: adjudicated; {html.escape(annotators)}: "
                     "each annotator)</h4>")
        parts.append(side_by_side(explorer, models, qid, k))
        other = explorer.collection.pairs.get(qid)
        if other is not None:
            scores = "; ".join(f"{explorer.label(m)} {movement(explorer, m, qid)['p-MRR'].mean():.2f}" for m in models)
            parts.append(f"<h4>{html.escape(facet)} vs {html.escape(other.split('_', 1)[1])}: documents relevant only "
                         f"under {html.escape(facet)}, their rank under each instruction and p-MRR (x100; the query's "
                         f"p-MRR: {html.escape(scores)})</h4>")
            parts.append(moved_side_by_side(explorer, models, qid))
    return "\n".join(parts)


SCOPE = "application/vnd.evalkit.explore-scope+json"  # the page's `scope`, beside its HTML in the notebook


def scope(explorer: Explorer, models=None) -> dict[str, list[str]]:
    """Which runs the page shows, by model label: ``every_query`` (a run over every query, stored or
    made) and ``seed_only`` (`Explorer.seed_only`: the seed's queries only). The page's body and
    the report's provenance block both say it from this one value (`scope_sentence`)."""
    models = list(models or explorer.runs)
    return {"every_query": [explorer.label(m) for m in models if m not in explorer.seed_only],
            "seed_only": [explorer.label(m) for m in models if m in explorer.seed_only]}


def scope_sentence(ran: dict) -> str:
    """`scope` in words, e.g. "BM25: over every query; MiniLM: the seed's queries only (no collection
    figures)"."""
    parts = []
    if ran.get("every_query"):
        parts.append(f"{', '.join(map(str, ran['every_query']))}: over every query")
    if ran.get("seed_only"):
        parts.append(f"{', '.join(map(str, ran['seed_only']))}: the seed's queries only (no collection figures)")
    return "; ".join(parts) or "no runs"


@dataclass(frozen=True, repr=False)
class Page:
    """The static page of one seed: its HTML, and its `scope` under `SCOPE` (the HTML report reads it)."""

    html: str
    scope: dict

    def __repr__(self) -> str:  # the notebook's text/plain: short, the HTML is beside it
        return f"explore page ({scope_sentence(self.scope)})"

    def _repr_html_(self) -> str:
        return self.html

    def _repr_mimebundle_(self, include=None, exclude=None) -> dict:
        return {"text/html": self.html, SCOPE: self.scope}


def show(explorer: Explorer, seed: str, models=None, k: int = DEFAULT_K) -> Page:
    """The static page of one seed, as papermill and the HTML report show it (`Page`)."""
    return Page(render(explorer, seed, models, k), scope(explorer, models))


def interactive() -> bool:
    """True in a kernel a Jupyter server started (JupyterLab sets JPY_SESSION_NAME) with ipywidgets
    installed; False under papermill, nbconvert or plain Python."""
    if not os.environ.get("JPY_SESSION_NAME"):
        return False
    try:
        import ipywidgets  # noqa: F401
    except ImportError:
        return False
    return True


def picker(explorer: Explorer, seed: str, models=None, k: int = DEFAULT_K):
    """A seed dropdown, a model multi-select and a k slider over `render` (ipywidgets)."""
    import ipywidgets as widgets

    seed = check_seed(explorer.collection, seed)
    chosen = list(models or explorer.runs)
    seeds = widgets.Dropdown(options=[(f"{s}: {explorer.data.papers[s].title[:70]}", s) for s in explorer.seeds],
                             value=seed, description="Seed")
    pick = widgets.SelectMultiple(options=[(explorer.label(m), m) for m in explorer.runs], value=tuple(chosen),
                                  description="Models")
    depth = widgets.IntSlider(value=check_k(k), min=1, max=50, description="k")
    out = widgets.HTML()

    def update(_=None):
        out.value = render(explorer, seeds.value, list(pick.value) or chosen, depth.value)

    for control in (seeds, pick, depth):
        control.observe(update, names="value")
    update()
    return widgets.VBox([widgets.HBox([seeds, pick, depth]), out])


def explore(explorer: Explorer, seed: str, models=None, k: int = DEFAULT_K):
    """The picker in JupyterLab (`interactive`), else the static views of `seed`."""
    return picker(explorer, seed, models, k) if interactive() else show(explorer, seed, models, k)
