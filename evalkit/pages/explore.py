"""Explore one CSFCube seed (``notebooks/explore.ipynb``, ``make explore SEED=...``).

View functions, each returning a DataFrame or an HTML string, so one code path renders both
the interactive notebook (JupyterLab: a seed and model picker, `picker`) and the static page
(papermill / nbconvert: `show`):

- `seed_view`: the seed's title and abstract, its sentences highlighted by facet;
- `top_k`: a model's top k for one query, with titles, the adjudicated grade and each
  annotator's grade;
- `movement`: the documents p-MRR scores between a seed's two instructions (relevant under
  the query's facet, not under the other), their ranks under each instruction and their
  per-document p-MRR (`evalkit.evaluation.measures.pair_score`, the same rule as `measures.p_mrr`);
- `query_scores`: the seed's per-query relevance measure and p-MRR beside the collection's
  per-facet and overall values (`evalkit.evaluation.evaluate.summarize`).

`Explorer` holds the data, the collection and the models' runs (`load`); `render` joins the
views of one seed into one HTML block, the models side by side in one table per view (rows
aligned: one line per document, long titles cut with the full title on hover). Every measure
on the page is x100 (the tables' scale); the models' own scores are not measures and are left
out of the side-by-side view.
"""

from __future__ import annotations

import html
import math
import os
from dataclasses import dataclass, field, replace
from pathlib import Path

import pandas as pd

from evalkit.core.errors import KitError
from evalkit.data.collection import Collection
from evalkit.data.runs import Run, ranks
from evalkit.datasets.csfcube import FACETS, CSFCube
from evalkit.evaluation.evaluate import PMRR, per_query, summarize
from evalkit.evaluation.measures import changed_documents, pair_score

FACET_COLOURS = {"background": "#cfe2ff", "method": "#d1f2d1", "result": "#ffe0b3", "other": "#eeeeee"}
GRADE_COLOURS = {0: "#ffffff", 1: "#f2f2f2", 2: "#c8e6c9", 3: "#81c784"}
DEFAULT_K = 10


@dataclass
class Explorer:
    """CSFCube, its collection, the runs of some models (base instructions) and their per-query values."""

    data: CSFCube
    collection: Collection
    runs: dict[str, Run]
    labels: dict[str, str] = field(default_factory=dict)
    measure: str = "nDCG_csfcube@20"
    seed_only: tuple[str, ...] = ()  # models whose run covers one seed's queries: no collection values

    def __post_init__(self):
        self.tables = {m: per_query(self.collection, run, [self.measure]) for m, run in self.runs.items()}
        self.summaries = {m: summarize(self.collection, t) for m, t in self.tables.items() if m not in self.seed_only}

    @property
    def seeds(self) -> list[str]:
        """Seed ids in collection order (paired seeds first is not imposed)."""
        return list(dict.fromkeys(q.seed for q in self.data.queries.values()))

    def facets(self, seed: str) -> list[str]:
        """The facets annotated for a seed, in FACETS order."""
        check_seed(self.data, seed)
        return [f for f in FACETS if f"{seed}_{f}" in self.data.queries]

    def label(self, model: str) -> str:
        return self.labels.get(model, model)


def check_seed(data: CSFCube, seed: str) -> str:
    """The seed id, or a one-line KitError listing every valid seed."""
    seed = str(seed).strip()
    if not any(q.seed == seed for q in data.queries.values()):
        known = sorted({q.seed for q in data.queries.values()}, key=lambda s: (len(s), s))
        raise KitError(f"SEED {seed or '(empty)'} is no CSFCube seed; choose one of the {len(known)} seeds: "
                       f"{', '.join(known)}")
    return seed


def check_k(k) -> int:
    try:
        value = int(k)
    except (TypeError, ValueError):
        value = 0
    if value < 1 or str(k).strip() != str(value):
        raise KitError(f"K {k!r} must be a positive integer (documents shown per model and facet)")
    return value


def load(models, profile: str = "offline", protocol: str = "pool", runs_dir: Path = Path("runs"),
         corpus: str | None = None, measure: str = "nDCG_csfcube@20", seed: str | None = None,
         instructions: str | None = None, every_query: bool = True) -> Explorer:
    """Explorer over CSFCube: runs made or reused through `evalkit.pipeline.runner`, under a user's instruction
    file when `instructions` names one; `seed`, if given, is checked first.

    `every_query` (the picker, which can switch seeds): each model's run over every query, made when
    not stored, so the collection values are the study's. Otherwise (one seed's static page,
    `make explore`): a model's stored run over every query (`make relevance` makes them) is reused;
    a model without one is run on `seed`'s queries only (the folder a ``SEEDS=seed`` smoke run
    uses), minutes less on a cold cache, and is listed in `Explorer.seed_only`: its per-query
    values are the full run's (each query is ranked on its own), its collection values are not
    computed and the page says so."""
    # lazy (start-up cost): the runner, registry and study load only when a page is built
    from evalkit.datasets import csfcube
    from evalkit.models import registry
    from evalkit.pipeline.runner import RunSettings, ensure_run, stored_run

    data = csfcube.load()
    if seed is not None:
        check_seed(data, seed)
    elif not every_query:
        raise KitError("every_query=False needs the seed whose queries to run; give seed=")
    collection = csfcube.to_collection(data)
    seed_queries = tuple(q.qid for q in collection.queries.values() if q.seed is not None and q.seed.doc_id == seed)
    runs, labels, seed_only = {}, {}, []
    for model in models:
        labels[model] = registry.spec(model, profile).label
        settings = RunSettings(model=model, dataset=collection.name, profile=profile, protocol=protocol, corpus=corpus,
                               instructions=instructions)
        run = None if every_query else stored_run(settings, collection, Path(runs_dir))
        if run is None and not every_query:
            run = ensure_run(replace(settings, queries=seed_queries), collection, Path(runs_dir))
            seed_only.append(model)
        runs[model] = run if run is not None else ensure_run(settings, collection, Path(runs_dir))
    return Explorer(data, collection, runs, labels, measure, tuple(seed_only))


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
    (`evalkit.study.params`; empty MODELS: the profile's relevance models), SEED a seed paper id,
    K a positive integer."""
    # lazy (start-up cost): the runner, registry and study load only when a page is built
    from evalkit.study import params

    study = params.check("relevance", PROFILE=PROFILE, PROTOCOL=PROTOCOL, MODELS=MODELS, DISCOUNT=DISCOUNT,
                         RUNS_DIR=RUNS_DIR, CORPUS=CORPUS, INSTRUCTIONS=INSTRUCTIONS)
    if not str(SEED).strip() or "," in str(SEED):
        raise KitError(f"SEED {SEED!r}: give one seed paper id, e.g. SEED=929877")
    return Parameters(study.profile, study.protocol, str(SEED).strip(), study.models, check_k(K), study.measure,
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
    seed = check_seed(explorer.data, seed)
    paper = explorer.data.papers[seed]
    legend = " ".join(f'<span style="background:{c};padding:0 4px">{f}</span>' for f, c in FACET_COLOURS.items())
    sentences = " ".join(
        f'<span title="{html.escape(s.label or "")}" style="background:{FACET_COLOURS.get(s.label or "", "#fff")}">'
        f"{html.escape(s.text)}</span>" for s in paper.sentences)
    annotated = ", ".join(explorer.facets(seed))
    return (f'<div class="explore-seed"><h3>Seed {html.escape(seed)}: {html.escape(paper.title)}</h3>'
            f"<p>Annotated facets: <b>{annotated}</b>. Sentence colours: {legend}</p>"
            f'<p style="line-height:1.6">{sentences}</p></div>')


def top_k(explorer: Explorer, model: str, qid: str, k: int = DEFAULT_K) -> pd.DataFrame:
    """A model's top k for a query: rank, doc, title, score, adjudicated grade, each annotator's grade
    (NaN for a document outside the judged pool, e.g. under the pooled protocol)."""
    run = explorer.runs[model].get(qid)
    if run is None:
        raise KitError(f"the run of {model} lacks query {qid}; rank every query")
    query = explorer.data.queries[qid]
    order = sorted(run, key=lambda d: (-run[d], d))[:check_k(k)]
    rows = []
    for rank, doc in enumerate(order, start=1):
        paper = explorer.collection.documents.get(doc)
        row = {"rank": rank, "doc": doc, "title": paper.title if paper else "(not a CSFCube paper)",
               "score": run[doc], "grade": query.grades.get(doc, math.nan)}
        row.update({name: grades.get(doc, math.nan) for name, grades in query.annotators.items()})
        rows.append(row)
    return pd.DataFrame(rows)


def movement(explorer: Explorer, model: str, qid: str) -> pd.DataFrame:
    """The documents p-MRR scores for query i -> i' (its seed's other facet): relevant under i and not
    under i'; their rank under each instruction (a document a run lacks ranks after its last),
    "up"/"down"/"same" under i relative to i', and the per-document p-MRR x100 (their mean is the
    query's p-MRR, x100 as everywhere on the page). Empty for an unpaired seed."""
    collection = explorer.collection
    other = collection.pairs.get(qid)
    columns = ["doc", "title", "grade", "grade_other", "rank", "rank_other", "moved", "p-MRR"]
    if other is None:
        return pd.DataFrame(columns=columns)
    run = explorer.runs[model]
    rank_i, rank_o = ranks(run[qid]), ranks(run[other])
    rows = []
    judged = collection.judged  # as p-MRR counts them: an excluded seed is not judged
    for doc in sorted(changed_documents(judged[qid], judged[other], collection.relevance_level)):
        r_i, r_o = rank_i.get(doc, len(rank_i) + 1), rank_o.get(doc, len(rank_o) + 1)
        rows.append({"doc": doc, "title": collection.documents[doc].title, "grade": judged[qid][doc],
                     "grade_other": judged[other].get(doc, math.nan), "rank": r_i, "rank_other": r_o,
                     "moved": "up" if r_i < r_o else "down" if r_i > r_o else "same",
                     "p-MRR": 100 * pair_score(r_i, r_o)})
    return pd.DataFrame(rows, columns=columns).sort_values(["p-MRR", "doc"], ascending=[False, True],
                                                           ignore_index=True)


def query_scores(explorer: Explorer, seed: str) -> pd.DataFrame:
    """Per model and annotated facet: the seed's relevance measure and p-MRR, the facet's collection
    value and the collection's overall value (the tables' aggregation), x100; the collection
    values of a model run on the seed's queries only (`Explorer.seed_only`) are NaN."""
    rows = []
    for model in explorer.runs:
        table, summary = explorer.tables[model], explorer.summaries.get(model)  # None: seed only
        for facet in explorer.facets(seed):
            qid = f"{seed}_{facet}"
            row = {"model": explorer.label(model), "facet": facet}
            for name in (explorer.measure, PMRR):
                if name not in table.columns:
                    continue
                row[f"{name} (query)"] = 100 * table.loc[qid, name]
                row[f"{name} (facet)"] = math.nan if summary is None else 100 * summary[name].get(facet, math.nan)
                row[f"{name} (all)"] = math.nan if summary is None else 100 * summary[name]["all"]
            rows.append(row)
    return pd.DataFrame(rows)


# --- rendering -----------------------------------------------------------------------------------


def _grade_style(value) -> str:
    if isinstance(value, (int, float)) and not math.isnan(value):
        return f"background-color: {GRADE_COLOURS.get(int(value), '#ffffff')}"
    return ""


def table_html(frame: pd.DataFrame, uuid: str, grades: tuple[str, ...] = (), digits: int = 2) -> str:
    """A DataFrame as static HTML (pandas Styler, a fixed id so reruns are identical); grade columns shaded."""
    if frame.empty:
        return "<p><i>none</i></p>"
    styler = frame.style.hide(axis="index").set_uuid(uuid).format(precision=digits, na_rep="")
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
    seed = check_seed(explorer.data, seed)
    k = check_k(k)
    models = list(models or explorer.runs)
    unknown = [m for m in models if m not in explorer.runs]
    if unknown:
        raise KitError(f"model {unknown[0]} has no run here; choose among {', '.join(explorer.runs)}")
    missing = [explorer.label(m) for m in models if m in explorer.seed_only]
    note = ("" if not missing else
            f"<p><b>collection figures: run <code>make relevance</code> first.</b> {html.escape(', '.join(missing))}: "
            "no stored run over every query, so this page ran the seed's queries only; their facet and all "
            "columns are left empty (after <code>make relevance</code>, this page reuses its runs).</p>")
    parts = [CSS, seed_view(explorer, seed), "<h4>Per-query values beside the collection's (x100)</h4>", note,
             table_html(query_scores(explorer, seed).query("model in @labels", local_dict={
                 "labels": [explorer.label(m) for m in models]}), f"scores-{seed}")]
    for facet in explorer.facets(seed):
        qid = f"{seed}_{facet}"
        annotators = ", ".join(explorer.data.queries[qid].annotators)
        parts.append(f"<h4>{facet}: each model's top {k} (grade: adjudicated; {annotators}: each annotator)</h4>")
        parts.append(side_by_side(explorer, models, qid, k))
        other = explorer.collection.pairs.get(qid)
        if other is not None:
            scores = "; ".join(f"{explorer.label(m)} {movement(explorer, m, qid)['p-MRR'].mean():.2f}" for m in models)
            parts.append(f"<h4>{facet} vs {other.split('_', 1)[1]}: documents relevant only under {facet}, their "
                         f"rank under each instruction and p-MRR (x100; the query's p-MRR: {scores})</h4>")
            parts.append(moved_side_by_side(explorer, models, qid))
    return "\n".join(parts)


def show(explorer: Explorer, seed: str, models=None, k: int = DEFAULT_K):
    """The static page of one seed (IPython HTML), as papermill and the HTML report show it."""
    from IPython.display import HTML

    return HTML(render(explorer, seed, models, k))


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

    seed = check_seed(explorer.data, seed)
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
