"""Explore one CSFCube seed (``notebooks/explore.ipynb``, ``make explore SEED=...``).

View functions, each returning a DataFrame or an HTML string, so one code path renders both
the interactive notebook (JupyterLab: a seed and model picker, `picker`) and the static page
(papermill / nbconvert: `show`):

- `seed_view`: the seed's title and abstract, its sentences highlighted by facet;
- `top_k`: a model's top k for one query, with titles, the adjudicated grade and each
  annotator's grade;
- `movement`: the documents p-MRR scores between a seed's two instructions (relevant under
  the query's facet, not under the other), their ranks under each instruction and their
  per-document p-MRR (`evalkit.measures.pair_score`, the same rule as `measures.p_mrr`);
- `query_scores`: the seed's per-query relevance measure and p-MRR beside the collection's
  per-facet and overall values (`evalkit.evaluation.summarize`).

`Explorer` holds the data, the collection and the models' runs (`load`); `render` joins the
views of one seed into one HTML block.
"""

from __future__ import annotations

import html
import math
import os
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from evalkit.collection import Collection
from evalkit.datasets.csfcube import FACETS, CSFCube
from evalkit.errors import KitError
from evalkit.evaluation import PMRR, per_query, summarize
from evalkit.measures import changed_documents, pair_score
from evalkit.runs import Run, ranks

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

    def __post_init__(self):
        self.tables = {m: per_query(self.collection, run, [self.measure]) for m, run in self.runs.items()}
        self.summaries = {m: summarize(self.collection, t) for m, t in self.tables.items()}

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
    seed = str(seed).strip()
    if not any(q.seed == seed for q in data.queries.values()):
        known = sorted({q.seed for q in data.queries.values()})
        raise KitError(f"SEED {seed or '(empty)'} is no CSFCube seed; choose one of {', '.join(known[:5])}, ... "
                       f"({len(known)} seeds)")
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
         corpus: str | None = None, measure: str = "nDCG_csfcube@20", seed: str | None = None) -> Explorer:
    """Explorer over every CSFCube query: runs made or reused through `evalkit.runner.ensure_run`
    (every query, so the collection values are the study's); `seed`, if given, is checked first."""
    from evalkit.datasets import csfcube
    from evalkit.models import registry
    from evalkit.runner import RunSettings, ensure_run

    data = csfcube.load()
    if seed is not None:
        check_seed(data, seed)
    collection = csfcube.to_collection(data)
    runs, labels = {}, {}
    for model in models:
        labels[model] = registry.spec(model, profile).label
        settings = RunSettings(model, collection.name, profile, protocol, corpus=corpus)
        runs[model] = ensure_run(settings, collection, Path(runs_dir))
    return Explorer(data, collection, runs, labels, measure)


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

    def describe(self) -> str:
        return (f"seed {self.seed} | models {', '.join(self.models)} | profile {self.profile} | "
                f"protocol {self.protocol} | k {self.k} | measure {self.measure}")


def check(PROFILE: str, PROTOCOL: str, SEED: str, MODELS: str = "", K=DEFAULT_K,  # noqa: N803
          DISCOUNT: str = "csfcube", RUNS_DIR: str = "runs", CORPUS: str = "") -> Parameters:
    """Check the explore notebook's parameters (one-line KitError) before any data or model is loaded:
    PROFILE, PROTOCOL, MODELS, DISCOUNT and CORPUS as the study notebooks (`evalkit.study.params`;
    empty MODELS: the profile's relevance models), SEED a seed paper id, K a positive integer."""
    from evalkit.study import params

    study = params.check("relevance", PROFILE=PROFILE, PROTOCOL=PROTOCOL, MODELS=MODELS, DISCOUNT=DISCOUNT,
                         RUNS_DIR=RUNS_DIR, CORPUS=CORPUS)
    if not str(SEED).strip() or "," in str(SEED):
        raise KitError(f"SEED {SEED!r}: give one seed paper id, e.g. SEED=929877")
    return Parameters(study.profile, study.protocol, str(SEED).strip(), study.models, check_k(K), study.measure,
                      study.runs_dir, study.corpus)


def load_checked(parameters: Parameters) -> Explorer:
    """`load` with checked parameters; the seed is checked against the data."""
    return load(parameters.models, parameters.profile, parameters.protocol, parameters.runs_dir,
                parameters.corpus, parameters.measure, parameters.seed)


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
    "up"/"down"/"same" under i relative to i', and the per-document p-MRR. Empty for an unpaired seed."""
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
                     "moved": "up" if r_i < r_o else "down" if r_i > r_o else "same", "p-MRR": pair_score(r_i, r_o)})
    return pd.DataFrame(rows, columns=columns).sort_values(["p-MRR", "doc"], ascending=[False, True],
                                                           ignore_index=True)


def query_scores(explorer: Explorer, seed: str) -> pd.DataFrame:
    """Per model and annotated facet: the seed's relevance measure and p-MRR, the facet's collection
    value and the collection's overall value (the tables' aggregation), x100."""
    rows = []
    for model in explorer.runs:
        table, summary = explorer.tables[model], explorer.summaries[model]
        for facet in explorer.facets(seed):
            qid = f"{seed}_{facet}"
            row = {"model": explorer.label(model), "facet": facet}
            for name in (explorer.measure, PMRR):
                if name not in table.columns:
                    continue
                row[f"{name} (query)"] = 100 * table.loc[qid, name]
                row[f"{name} (facet)"] = 100 * summary[name].get(facet, math.nan)
                row[f"{name} (all)"] = 100 * summary[name]["all"]
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


def render(explorer: Explorer, seed: str, models=None, k: int = DEFAULT_K) -> str:
    """Every view of one seed as one HTML block (what the notebook shows, static or in the picker)."""
    seed = check_seed(explorer.data, seed)
    k = check_k(k)
    models = list(models or explorer.runs)
    unknown = [m for m in models if m not in explorer.runs]
    if unknown:
        raise KitError(f"model {unknown[0]} has no run here; choose among {', '.join(explorer.runs)}")
    parts = [seed_view(explorer, seed), "<h4>Per-query values beside the collection's (x100)</h4>",
             table_html(query_scores(explorer, seed).query("model in @labels", local_dict={
                 "labels": [explorer.label(m) for m in models]}), f"scores-{seed}")]
    for model in models:
        parts.append(f"<h4>{html.escape(explorer.label(model))} ({html.escape(model)})</h4>")
        for facet in explorer.facets(seed):
            qid = f"{seed}_{facet}"
            frame = top_k(explorer, model, qid, k)
            annotators = tuple(explorer.data.queries[qid].annotators)
            parts.append(f"<h5>{facet}: top {k} (grade: adjudicated; {', '.join(annotators)}: each annotator)</h5>")
            parts.append(table_html(frame, f"top-{model}-{qid}", ("grade", *annotators), digits=3))
            other = explorer.collection.pairs.get(qid)
            if other is not None:
                moved = movement(explorer, model, qid)
                score = moved["p-MRR"].mean() if len(moved) else math.nan
                parts.append(f"<h5>{facet} vs {other.split('_', 1)[1]}: documents relevant only under {facet} "
                             f"(rank under each instruction; p-MRR of the query {100 * score:.1f})</h5>")
                parts.append(table_html(moved, f"moved-{model}-{qid}", ("grade", "grade_other"), digits=3))
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
