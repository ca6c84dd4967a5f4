"""The data of the explore page (`evalkit.pages.explore`): one CSFCube seed's views as DataFrames.

`Explorer` holds the data, the collection and the models' runs (`load`: made or reused through
`evalkit.pipeline.runner`) with their per-query values; the views read it:

- `top_k`: a model's top k for one query, with titles, the adjudicated grade and each
  annotator's grade;
- `movement`: the documents p-MRR scores between a seed's two instructions (relevant under
  the query's facet, not under the other), their ranks under each instruction and their
  per-document p-MRR (`evalkit.evaluation.measures.pair_score`, the same rule as `measures.p_mrr`);
- `query_scores`: the seed's per-query relevance measure and p-MRR beside the collection's
  per-facet and overall values (`evalkit.evaluation.evaluate.summarize`).

Every measure is x100 (the tables' scale). `check_seed` and `check_k` are the one-line checks of
the page's SEED and K.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from pathlib import Path

import pandas as pd

from evalkit.core.errors import NOTEBOOK, DataError, RequestError
from evalkit.data.collection import Collection
from evalkit.data.runs import Run, ranks
from evalkit.datasets import csfcube
from evalkit.datasets.csfcube import FACETS, CSFCube
from evalkit.evaluation.evaluate import PMRR, per_query, summarize
from evalkit.evaluation.measures import changed_documents, pair_score

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
        raise RequestError("seed", f"is no CSFCube seed; choose one of the {len(known)} seeds: {', '.join(known)}",
                           value=seed or "(empty)", front_end=NOTEBOOK)
    return seed


def check_k(k) -> int:
    try:
        value = int(k)
    except (TypeError, ValueError):
        value = 0
    if value < 1 or str(k).strip() != str(value):
        raise RequestError("k", "must be a positive integer (documents shown per model and facet)", value=repr(k),
                           front_end=NOTEBOOK)
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
    # lazy (start-up cost): the runner and registry load only when a page is built
    from evalkit.models import registry
    from evalkit.pipeline.runner import Reuse, RunSettings, bind, obtain

    data = csfcube.load()
    if seed is not None:
        check_seed(data, seed)
    elif not every_query:
        raise RequestError("seed", "every_query=False needs the seed whose queries to run; give it")
    collection = csfcube.to_collection(data)
    seed_queries = tuple(q.qid for q in collection.queries.values() if q.seed is not None and q.seed.doc_id == seed)
    runs, labels, seed_only = {}, {}, []
    for model in models:
        labels[model] = registry.spec(model, profile).label
        settings = RunSettings(model=model, dataset=collection.name, profile=profile, protocol=protocol, corpus=corpus,
                               instructions=instructions)
        stored = None if every_query else obtain(bind(settings, collection, Path(runs_dir)), Reuse.ONLY)
        if stored is None and not every_query:
            stored = obtain(bind(replace(settings, queries=seed_queries), collection, Path(runs_dir)))
            seed_only.append(model)
        runs[model] = (stored or obtain(bind(settings, collection, Path(runs_dir)))).run
    return Explorer(data, collection, runs, labels, measure, tuple(seed_only))



def top_k(explorer: Explorer, model: str, qid: str, k: int = DEFAULT_K) -> pd.DataFrame:
    """A model's top k for a query: rank, doc, title, score, adjudicated grade, each annotator's grade
    (NaN for a document outside the judged pool, e.g. under the pooled protocol)."""
    run = explorer.runs[model].get(qid)
    if run is None:
        raise DataError("run", f"the run of {model} lacks query {qid}; rank every query")
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
