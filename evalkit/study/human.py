"""The Human reference row: each annotator's grades used as a ranking, on a collection whose
scheme gives its annotators' grades (`evalkit.datasets.scheme.Scheme.human`: CSFCube's).

Two recipes (`RECIPES`); the paper does not publish its own:

- ``pool``: for each query, rank its judged pool (the seed excluded, as for every model) by
  one annotator's grades;
- ``protocol``: rank, by one annotator's grades, the same first-stage list the models rerank
  under a protocol (`evalkit.pipeline.runner.candidates_for`: pool = the judged pool, pooled = the
  profile's first stage over the collection's documents, full = over the corpus file, CSFCube's
  ~800k abstracts);
  a listed document the annotator did not grade gets `UNJUDGED` (0, as unjudged documents
  count as non-relevant); judged documents the list misses are not in the run, so they rank
  after it, as for models. On the pool protocol this is the pool recipe.

Either way: ties by the kit's rule (document id), the ranking scored against the adjudicated
grades, and per-query values averaged over the query's two annotators ("first" and "second"
in annotator order). p-MRR pairs the same annotator slot across a query pair (CSFCube: a seed's
two facets).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pandas as pd

from evalkit.core.errors import RequestError
from evalkit.data.collection import Collection
from evalkit.data.protocols import check_protocol, protocol_collection
from evalkit.data.runs import Run
from evalkit.datasets.scheme import Annotators
from evalkit.evaluation.evaluate import per_query
from evalkit.models import registry
from evalkit.pipeline.runner import RunSettings, candidates_for, first_stage_of, run_collection, selected_queries

RECIPES = ("pool", "protocol")
UNJUDGED = 0.0  # an annotator's score for a listed document they did not grade
POOL_LABEL = "Human (annotators vs adjudication)"
Lists = Mapping[str, Sequence[str]]  # qid -> document ids a recipe ranks


def protocol_label(protocol: str) -> str:
    return f"Human (annotators rank the {protocol} list)"


def pool_lists(collection: Collection, queries: Sequence[str] | None = None) -> dict[str, list[str]]:
    """Each query's judged pool, its seed excluded (the pool protocol's candidate list)."""
    qids = list(queries) if queries is not None else list(collection.queries)
    return {qid: [d.doc_id for d in collection.candidates_of(qid)] for qid in qids}


def protocol_lists(collection: Collection, protocol: str, profile: str = "offline", corpus: str | None = None,
                   queries: Sequence[str] | None = None, first_stage: str | None = None,
                   depth: int | None = None) -> tuple[dict[str, list[str]], dict]:
    """The lists the models rerank under `protocol` (`runner.candidates_for`, base instructions),
    and the protocol's description (first stage, depth, corpus)."""
    check_protocol(protocol)
    if protocol == "full" and not corpus:
        raise RequestError("corpus", "the full protocol needs {corpus} (abstracts-preds.zip from figshare 14796339)")
    settings = RunSettings(model="human", dataset=collection.name, profile=profile, protocol=protocol,
                           first_stage=first_stage, depth=depth,
                           queries=tuple(queries) if queries is not None else None, corpus=corpus)
    first, kept = first_stage_of(settings, registry.current())  # "human" is no model: nothing else is bound
    seen = run_collection(settings, collection)  # as the protocol ranks it (released: the seed too)
    chosen, described = candidates_for(settings, seen, selected_queries(settings, seen), first, kept)
    return {qid: [d.doc_id for d in docs] for qid, docs in chosen.items()}, described


def annotator_run(annotators: Annotators, slot: int, lists: Lists | None = None) -> Run:
    """A run whose scores are the grades of each query's `slot`-th annotator (0 or 1) over the
    query's list (default: every document the annotator graded); ungraded listed documents score
    `UNJUDGED`."""
    run = {}
    for qid, graded in annotators.items():
        grades = graded[slot]
        if lists is None:
            run[qid] = {doc: float(g) for doc, g in grades.items()}
        elif qid in lists:
            run[qid] = {doc: float(grades.get(doc, UNJUDGED)) for doc in lists[qid]}
    return run


def human_per_query(annotators: Annotators, measures: Sequence[str], collection: Collection,
                    recipe: str = "pool", protocol: str = "pool", profile: str = "offline",
                    corpus: str | None = None, queries: Sequence[str] | None = None,
                    lists: Lists | None = None) -> pd.DataFrame:
    """Per-query values of the Human reference on `collection` under `recipe` (module docstring),
    by each query's `annotators` (`Scheme.human`): the mean over the two annotator slots.
    `lists` (qid -> document ids) overrides the recipe's lists."""
    if recipe not in RECIPES:
        raise RequestError("recipe", f"unknown Human recipe {recipe!r}; choose one of {', '.join(RECIPES)}")
    if recipe == "pool" and protocol != "pool":
        raise RequestError("recipe", f"ranks the judged pool whatever the protocol; use {{recipe:protocol}} for the "
                                     f"{protocol} list", value="pool")
    collection = protocol_collection(collection, protocol)
    if lists is None:
        lists = pool_lists(collection, queries) if recipe == "pool" else \
            protocol_lists(collection, protocol, profile, corpus, queries)[0]
    first, second = (per_query(collection, annotator_run(annotators, slot, lists), measures) for slot in (0, 1))
    numeric = first.columns.difference(["stratum", "fold"])
    averaged = first.copy()
    averaged[numeric] = (first[numeric] + second[numeric]) / 2
    return averaged
