"""The data of the explore page (`evalkit.pages.explore`): one CSFCube seed's views as DataFrames.

`Explorer` holds the data, the collection and the models' runs (`load`: made or reused through
`evalkit.pipeline.runner`) with their per-query values; the views read it:

- `top_k`: a model's top k for one query, with titles, the adjudicated grade and each
  annotator's grade;
- `movement`: the documents p-MRR scores between a seed's two instructions (relevant under
  the query's facet, not under the other), their ranks under each instruction and their
  per-document p-MRR (`evalkit.evaluation.measures.pair_score`, the same rule as `measures.p_mrr`);
- `query_scores`: the seed's per-query relevance measure and p-MRR beside the collection's
  per-facet and overall values.

The page asks for its figures as every front end does: `explore_request` fills an
`evalkit.evaluation.request.EvaluationRequest` (the protocol, the relevance measure and p-MRR,
the seed), `check_request` checks it and `evalkit.evaluation.outcome.evaluate_tables` evaluates
the runs (the per-query tables and their summaries), the one evaluation of the API and the CLI.
Every measure is x100 (the tables' scale). `check_seed` and `check_k` check the page's SEED and K
by the request's rules (`evalkit.data.collection.select_queries`,
`evalkit.evaluation.request.EvaluationRequest`'s ``k``); every rule's error names the parameter as the page
spells it (``SEED``, ``K``, ``PROTOCOL``: the explore front end of `evalkit.core.errors.spell`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TypeVar

import pandas as pd

from evalkit.core.errors import EXPLORE, DataError, KitError, RequestError
from evalkit.data.collection import Collection, select_queries
from evalkit.data.protocols import DEFAULT_PROTOCOL, protocol_collection
from evalkit.data.runs import Run, ranks
from evalkit.datasets import csfcube
from evalkit.datasets.csfcube import FACETS, CSFCube
from evalkit.evaluation.evaluate import PMRR
from evalkit.evaluation.measures import changed_documents, pair_score
from evalkit.evaluation.outcome import Outcome, evaluate_tables, score_runs
from evalkit.evaluation.request import EvaluationRequest, check_request

DEFAULT_K = 10
T = TypeVar("T")


def as_explore(check: Callable[..., T], *args, **kwargs) -> T:
    """`check(*args, **kwargs)`, a kit error worded as the explore page's parameters (``SEED``, ``K``)."""
    try:
        return check(*args, **kwargs)
    except KitError as exc:
        raise exc.for_front_end(EXPLORE) from None


def explore_request(protocol: str = DEFAULT_PROTOCOL, measure: str = "nDCG_csfcube@20",
                    seed: str | None = None) -> EvaluationRequest:
    """The evaluation the page shows: CSFCube under `protocol`, its relevance `measure` and p-MRR,
    aggregated as the tables are (folds); `seed`: the seed whose queries are asked for (None: every query)."""
    return EvaluationRequest(dataset=csfcube.SCHEME.name, protocol=protocol, measures=(measure, PMRR),
                             seeds=None if seed is None else (seed,))


@dataclass
class Explorer:
    """CSFCube, its collection, the runs of some models (base instructions) under `protocol`, and
    their per-query values and summaries (`outcome`: `explore_request` evaluated by `evaluate_tables`)."""

    data: CSFCube
    collection: Collection
    runs: dict[str, Run]
    labels: dict[str, str] = field(default_factory=dict)
    measure: str = "nDCG_csfcube@20"
    seed_only: tuple[str, ...] = ()  # models whose run covers one seed's queries: no collection values
    protocol: str = DEFAULT_PROTOCOL

    def __post_init__(self):
        self.scored = as_explore(protocol_collection, self.collection, self.protocol)  # as the protocol judges it
        checked = as_explore(lambda: check_request(explore_request(self.protocol, self.measure), self.scored))
        self.outcome: Outcome = evaluate_tables(self.scored, score_runs(self.scored, self.runs, checked), checked)
        self.tables = self.outcome.tables
        self.summaries = {m: self.outcome.summary(m) for m in self.tables if m not in self.seed_only}

    @property
    def seeds(self) -> list[str]:
        """Seed ids in collection order (paired seeds first is not imposed)."""
        return list(dict.fromkeys(q.seed for q in self.data.queries.values()))

    def facets(self, seed: str) -> list[str]:
        """The facets annotated for a seed, in FACETS order."""
        check_seed(self.collection, seed)
        return [f for f in FACETS if f"{seed}_{f}" in self.data.queries]

    def label(self, model: str) -> str:
        return self.labels.get(model, model)



def one_seed(seed: object) -> str:
    """SEED as one seed paper id (the page shows one seed); not yet checked against the data."""
    if not isinstance(seed, str | int) or isinstance(seed, bool) or not str(seed).strip() or "," in str(seed):
        raise RequestError("seeds", "give one seed paper id, e.g. {seeds:929877}", value=seed)
    return str(seed).strip()


def seed_queries(collection: Collection, seed: object) -> tuple[str, ...]:
    """The query ids of one seed paper (`one_seed`), by the rule of every front end
    (`evalkit.data.collection.select_queries`); an error names SEED."""
    return as_explore(lambda: select_queries(collection, seeds=(one_seed(seed),)))


def check_seed(collection: Collection, seed: object) -> str:
    """The seed id (`seed_queries`), or a one-line error listing the collection's seeds."""
    seed_queries(collection, seed)
    return one_seed(seed)


def check_models(explorer: Explorer, models) -> list[str]:
    """The models a view shows (None: every model with a run here), each one the page has a run of."""
    models = list(models or explorer.runs)
    unknown = [m for m in models if m not in explorer.runs]
    if unknown:
        raise RequestError("model", f"{unknown[0]} has no run here; choose among {', '.join(explorer.runs)}")
    return models


def check_k(k: object) -> int:
    """The documents shown per model and facet (K): the request's cut-off rule (its ``k``)."""
    return as_explore(lambda: EvaluationRequest(k=k).k)



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
    values are the full run's (each query is ranked on its own; only the last bits of a score may
    differ, its candidates being encoded in the seed's batches, not the collection index's), its
    collection values are not computed and the page says so."""
    # lazy (start-up cost): the runner and registry load only when a page is built
    from evalkit.models import registry
    from evalkit.pipeline.runner import Reuse, RunSettings, bind, obtain

    data = csfcube.load()
    collection = csfcube.to_collection(data)
    if seed is None and not every_query:
        raise RequestError("seed", "is needed when every_query is False: the seed whose queries to run")
    queries = None if seed is None else seed_queries(collection, seed)
    runs, labels, seed_only = {}, {}, []
    for model in models:
        labels[model] = registry.spec(model, profile).label
        settings = RunSettings(model=model, dataset=collection.name, profile=profile, protocol=protocol, corpus=corpus,
                               instructions=instructions)
        stored = None if every_query else obtain(bind(settings, collection, Path(runs_dir)), Reuse.ONLY)
        if stored is None and not every_query:
            stored = obtain(bind(replace(settings, queries=queries), collection, Path(runs_dir)))
            seed_only.append(model)
        runs[model] = (stored or obtain(bind(settings, collection, Path(runs_dir)))).run
    return Explorer(data, collection, runs, labels, measure, tuple(seed_only), protocol)



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
    collection = explorer.scored  # as p-MRR counts it under the protocol: pool's excluded seed is not judged
    other = collection.pairs.get(qid)
    columns = ["doc", "title", "grade", "grade_other", "rank", "rank_other", "moved", "p-MRR"]
    if other is None:
        return pd.DataFrame(columns=columns)
    run = explorer.runs[model]
    rank_i, rank_o = ranks(run[qid]), ranks(run[other])
    rows = []
    judged = collection.judged
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
