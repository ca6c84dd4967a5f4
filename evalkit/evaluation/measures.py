"""Per-query measures on plain data, for any collection (definitions: docs/design.md, section 3).

Inputs are plain dicts: qrels ``{qid: {doc: grade}}`` and a run ``{qid: {doc: score}}``
(higher scores first). ``relevance_level`` is the collection's binary threshold: a document
is relevant when its grade is >= the level (CSFCube 2, FollowIR / BEIR 1).

Ties: every measure sees the kit's ranking (`evalkit.data.runs.ranked`: score descending, then
document id ascending). Before any library sees a run, `rank_scores` replaces each query's
scores by strictly decreasing ones (n, n-1, ..., 1) along that ranking, so library tie
rules (trec_eval / pytrec_eval: doc id descending) never apply and the input order of a run
never matters.

Measures (ir_measures-style names, one evaluator: `ir_measures.iter_calc`):

- ``nDCG@k`` / ``nDCG``: trec_eval's ndcg_cut (pytrec_eval): gain = grade, discount
  1/log2(rank+1), ideal DCG from every judged document of the query.
- ``AP@k`` / ``AP``, ``RR@k`` / ``RR``, ``P@k``, ``R@k``: trec_eval conventions with
  ``rel=relevance_level``; AP and R divide by every relevant judged document, P@k by k.
- ``nDCG_csfcube@k``: the official CSFCube script, a custom ir_measures measure
  (`ir_measures.define`): ranks 1 and 2 weigh 1, rank r >= 2 weighs 1/log2(r);
  the ideal DCG comes from the grades of the documents the run ranked (unjudged = 0), all of
  them, not only the top k. No library implements it.
- ``nDCG_csfcube%p``: the same NDCG cut at ``int(p / 100 * n)`` for a run that ranks n
  documents for the query (the release's ``ndcg%20`` is p = 20); 0 when the cut is 0.
- ``MAP_csfcube``: the release's ``average_precision`` per query (its MAP once aggregated):
  the mean of precision@r over the ranks r of the relevant documents in the run's ranked
  list (grade >= ``relevance_level``), 0 when the list holds none. Unlike trec_eval's AP it
  divides by the relevant documents the run ranked, not by every judged one.

A run query without judgments (absent from qrels or with an empty qrels entry) gets NaN
for every measure; a judged query the run ranks no document for gets 0.

Instruction following and robustness:

- ``p_mrr`` (FollowIR, as mteb): for a pair i -> i', over the documents relevant under i
  (grade >= level) and not relevant under i' (the changed documents), with R_i, R_i' the
  1-based ranks (tie rule above) in the runs of i and i': ``R_i'/R_i - 1`` if R_i > R_i'
  else ``1 - R_i/R_i'``; a document missing from a run ranks right after that run's last
  document; mean over the changed documents, NaN when there are none. A run that lacks i
  or i' is an error (KitError): restrict the pairs explicitly if that is intended. Equal
  to mteb's ``calculate_pmrr`` on runs without ties (tests pin mteb's values); on ties
  mteb >= 2.19.5 ranks by doc id descending (older mteb: by dict insertion order).
- ``robustness`` (InstructIR robustness@k): mean over groups of the minimum per-instance
  value; every instance needs a value.

Aggregation over queries lives in `evalkit.evaluation.aggregate`.
"""

from __future__ import annotations

import math
import numbers
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from functools import cache
from itertools import groupby
from operator import itemgetter

import ir_measures
import pandas as pd

from evalkit.core.errors import KitError
from evalkit.data.runs import ranked, ranks

Qrels = Mapping[str, Mapping[str, int]]
RunScores = Mapping[str, Mapping[str, float]]

CSFCUBE_NDCG = "nDCG_csfcube"
CSFCUBE_MAP = "MAP_csfcube"
_NAME = re.compile(r"(nDCG_csfcube|MAP_csfcube|nDCG|AP|RR|P|R)(?:([@%])(\d+))?")
_NEEDS_CUTOFF = {"P", "R", CSFCUBE_NDCG}
_BINARY = {"AP", "RR", "P", "R"}
MAX_K = 1_000_000  # no collection ranks more candidates per query; beyond it numpy's integers overflow
_NO_CUTOFF = {CSFCUBE_MAP}
MEASURE_HELP = "nDCG@k, nDCG_csfcube@k, nDCG_csfcube%p, MAP_csfcube, AP[@k], RR[@k], P@k or R@k"


# --- ranking: the kit's tie rule ------------------------------------------------------------


def rank_scores(run: RunScores) -> dict[str, dict[str, float]]:
    """Strictly decreasing scores (n, n-1, ..., 1) along the kit's ranking of each query."""
    return {qid: dict(zip(ranked(scores), map(float, range(len(scores), 0, -1)))) for qid, scores in run.items()}


# --- nDCG, csfcube discount -------------------------------------------------------------------


@cache
def _csfcube_weights(k: int) -> tuple[float, ...]:
    """Rank weights of the official script: 1 for ranks 1 and 2, 1/log2(r) from rank 2 on."""
    return tuple(1.0 if r == 1 else 1.0 / math.log2(r) for r in range(1, k + 1))


def ndcg_csfcube(ranked_grades: Sequence[float], k: int) -> float:
    """NDCG@k as the official CSFCube script: the ideal order from the same ranked grades."""
    weights = _csfcube_weights(k)
    ideal = sum(g * w for g, w in zip(sorted(ranked_grades, reverse=True), weights))
    return sum(g * w for g, w in zip(ranked_grades, weights)) / ideal if ideal > 0 else 0.0


def _ranked_lists(qrels: pd.DataFrame, run: pd.DataFrame) -> Iterator[tuple[str, list[int]]]:
    """Per run query, the grades (unjudged = 0) of the documents the run ranked, best first."""
    grades = dict(zip(zip(qrels["query_id"].tolist(), qrels["doc_id"].tolist()), qrels["relevance"].tolist()))
    rows = sorted(zip(run["query_id"].tolist(), run["score"].tolist(), run["doc_id"].tolist()),
                  key=lambda row: (row[0], -row[1]))
    for qid, group in groupby(rows, key=itemgetter(0)):
        yield qid, [grades.get((qid, doc), 0) for _, _, doc in group]


def _whole_list_measure(name: str, value: Callable[[list[int]], float]) -> ir_measures.Measure:
    """A custom ir_measures measure of each query's whole ranked grade list.

    Defined without ir_measures' cut-off parameter, which would truncate the run to its top
    k before the measure sees it; the official measures need every ranked grade. The
    implementation takes all queries at once (`define`, not `define_byquery`, whose
    per-query DataFrame filtering took about 4x longer on the benchmark run).
    """

    def impl(qrels: pd.DataFrame, run: pd.DataFrame) -> Iterator[tuple[str, float]]:
        for qid, grades in _ranked_lists(qrels, run):
            yield qid, value(grades)

    return ir_measures.define(impl, name=name, support_cutoff=False)


@cache
def csfcube_measure(k: int) -> ir_measures.Measure:
    """``nDCG_csfcube@k`` as an ir_measures custom measure."""
    return _whole_list_measure(f"{CSFCUBE_NDCG}@{k}", lambda grades: ndcg_csfcube(grades, k))


def percent_cut(n: int, percent: int) -> int:
    """The release's ``int(0.20 * len(ranked list))`` for p = 20: the cut of ``nDCG_csfcube%p``."""
    return int(percent / 100 * n)


def ndcg_csfcube_percent(ranked_grades: Sequence[float], percent: int) -> float:
    """``nDCG_csfcube%p``: the official NDCG cut at p percent of the ranked list; 0 for a cut of 0."""
    k = percent_cut(len(ranked_grades), percent)
    return ndcg_csfcube(ranked_grades, k) if k > 0 else 0.0


@cache
def csfcube_percent_measure(percent: int) -> ir_measures.Measure:
    """``nDCG_csfcube%p`` as an ir_measures custom measure."""
    return _whole_list_measure(f"{CSFCUBE_NDCG}%{percent}", lambda grades: ndcg_csfcube_percent(grades, percent))


def average_precision_listed(ranked_relevant: Sequence[bool]) -> float:
    """The release's average precision: mean precision@r at the relevant ranks r of the list; 0 without any."""
    hits, total = 0, 0.0
    for rank, relevant in enumerate(ranked_relevant, start=1):
        if relevant:
            hits += 1
            total += hits / rank
    return total / hits if hits else 0.0


@cache
def csfcube_map_measure(relevance_level: int) -> ir_measures.Measure:
    """``MAP_csfcube`` (per query: `average_precision_listed`) as an ir_measures custom measure."""
    return _whole_list_measure(
        CSFCUBE_MAP, lambda grades: average_precision_listed([g >= relevance_level for g in grades]))


# --- per-query table ----------------------------------------------------------------------------


def parse_measure(name: str, relevance_level: int) -> ir_measures.Measure:
    """The ir_measures measure for a kit measure name; binary measures get ``rel=relevance_level``."""
    match = _NAME.fullmatch(name)
    if match is None:
        raise KitError(f"unknown measure {name!r}; use {MEASURE_HELP}")
    family, kind, cutoff = match.groups()
    if cutoff is not None and family in _NO_CUTOFF:
        raise KitError(f"measure {name!r} takes no cut-off (it reads the whole ranked list); write {family}")
    if kind == "%" and family != CSFCUBE_NDCG:
        raise KitError(f"measure {name!r}: only {CSFCUBE_NDCG} takes a percentage cut-off; write {family}@k")
    if cutoff is None and family in _NEEDS_CUTOFF:
        raise KitError(f"measure {name!r} needs a cut-off; write e.g. {family}@20")
    k = None if cutoff is None else check_cutoff(name, cutoff)
    if kind == "%":
        if k > 100:
            raise KitError(f"measure {name!r}: a percentage cut-off is at most 100; write e.g. {family}%20")
        return csfcube_percent_measure(k)
    if family == CSFCUBE_MAP:
        return csfcube_map_measure(relevance_level)
    if family == CSFCUBE_NDCG:
        return csfcube_measure(k)
    measure = getattr(ir_measures, family)
    if family in _BINARY:
        measure = measure(rel=relevance_level)
    return measure if k is None else measure @ k


def check_cutoff(name: str, digits: str) -> int:
    """The cut-off written in a measure name: a positive integer of at most `MAX_K` (as ``--k``)."""
    if digits.startswith("0") and digits.strip("0"):
        raise KitError(f"measure {name!r}: write the cut-off without leading zeros ({digits.lstrip('0')}), so that "
                       "one measure has one name")
    k = int(digits) if len(digits) <= len(str(MAX_K)) else MAX_K + 1
    if k < 1:
        raise KitError(f"measure {name!r}: cut-off k={k} must be a positive integer")
    if k > MAX_K:
        raise KitError(f"measure {name[:40]!r}: cut-off is absurdly large; give at most {MAX_K:,}")
    return k


def _check_level(relevance_level: int) -> None:
    if isinstance(relevance_level, bool) or not isinstance(relevance_level, numbers.Integral) or relevance_level < 1:
        raise KitError(f"relevance_level={relevance_level!r} must be a positive integer grade "
                       "(e.g. 1, or 2 for CSFCube)")


def per_query(qrels: Qrels, run: RunScores, measures: Sequence[str], relevance_level: int) -> pd.DataFrame:
    """One row per run query (index ``qid``, sorted), one column per measure name as given.

    NaN for run queries without judgments. The run is ranked with the kit's tie rule first.
    """
    names = list(measures)
    _check_level(relevance_level)
    if len(set(names)) < len(names):
        raise KitError(f"measure names repeat in {names}; list each measure once")
    by_measure = {parse_measure(name, relevance_level): name for name in names}
    table = pd.DataFrame(index=pd.Index(sorted(run), name="qid"), columns=names, dtype=float)
    judged = {qid: dict(qrels[qid]) for qid in run if qrels.get(qid)}  # libraries score every qrels query
    if not judged or not names:
        return table
    scored = rank_scores({qid: run[qid] for qid in judged})
    values: dict[str, dict[str, float]] = {name: {} for name in names}
    for metric in ir_measures.iter_calc(list(by_measure), judged, scored):
        values[by_measure[metric.measure]][metric.query_id] = float(metric.value)
    for name, column in values.items():
        table[name] = pd.Series(column, dtype=float).reindex(table.index)
    return table


# --- p-MRR ------------------------------------------------------------------------------------


def pair_score(rank_i: int, rank_other: int) -> float:
    """p-MRR term of one changed document: ``R_i'/R_i - 1`` if R_i > R_i' (it ranks worse under
    its own instruction: a penalty), else ``1 - R_i/R_i'`` (a reward); 0 for equal ranks."""
    if rank_i > rank_other:
        return rank_other / rank_i - 1.0
    return 1.0 - rank_i / rank_other


def changed_documents(grades_i: Mapping[str, int], grades_other: Mapping[str, int], relevance_level: int) -> set[str]:
    """Documents relevant under i and not relevant under i' (unjudged under i' = not relevant)."""
    return {doc for doc, g in grades_i.items() if g >= relevance_level and grades_other.get(doc, 0) < relevance_level}


def _mean_pair_score(changed: Iterable[str], rank_i: Mapping[str, int], rank_other: Mapping[str, int]) -> float:
    """Mean `pair_score`; a document missing from a run ranks right after its last document."""
    terms = [pair_score(rank_i.get(doc, len(rank_i) + 1), rank_other.get(doc, len(rank_other) + 1))
             for doc in sorted(changed)]
    return sum(terms) / len(terms) if terms else math.nan


PMRR_TIES = ("kit", "mteb")


def ranks_ids_descending(scores: Mapping[str, float]) -> dict[str, int]:
    """1-based ranks by score descending, then document id descending: mteb's p-MRR order
    (`get_rank_from_dict` in mteb._evaluators.retrieval_metrics since mteb 2.19.5, as trec_eval)."""
    by_id = sorted(scores, reverse=True)
    return {doc: i for i, doc in enumerate(sorted(by_id, key=scores.__getitem__, reverse=True), start=1)}


def p_mrr(qrels: Qrels, run: RunScores, pairs: Mapping[str, str], relevance_level: int,
          ties: str = "kit") -> pd.Series:
    """p-MRR per pair i -> i' (`pairs`), indexed by i (sorted); NaN where no document changed.

    `ties` orders tied scores: ``kit`` (the kit's rule everywhere, document id ascending) or
    ``mteb`` (id descending, as mteb's evaluator; `ranks_ids_descending`). Without ties the
    two are equal. Raises KitError when the run lacks i or i' of a pair: pass only the pairs
    the run covers.
    """
    _check_level(relevance_level)
    if ties not in PMRR_TIES:
        raise KitError(f"p-MRR tie order {ties!r} is not one of {', '.join(PMRR_TIES)}; choose one")
    rank_of = ranks if ties == "kit" else ranks_ids_descending
    rank_maps: dict[str, dict[str, int]] = {}
    values = {}
    for qid, other in pairs.items():
        for needed in (qid, other):
            if needed not in run:
                raise KitError(f"the run lacks query {needed} of the p-MRR pair {qid} -> {other}; rank the "
                               "candidates under both instructions, or pass only the pairs the run covers")
            if needed not in rank_maps:
                rank_maps[needed] = rank_of(run[needed])
        changed = changed_documents(qrels.get(qid, {}), qrels.get(other, {}), relevance_level)
        values[qid] = _mean_pair_score(changed, rank_maps[qid], rank_maps[other])
    series = pd.Series(values, dtype=float, name="p-MRR").sort_index()
    series.index.name = "qid"
    return series


# --- robustness@k ------------------------------------------------------------------------------


def robustness(values: Mapping[str, float], groups: Mapping[str, Sequence[str]]) -> float:
    """InstructIR robustness: mean over groups of the minimum per-instance value; NaN without groups."""
    minima = []
    for group, qids in groups.items():
        scores = [values.get(q, math.nan) for q in qids]
        missing = [q for q, s in zip(qids, scores) if s is None or math.isnan(s)]
        if missing or not qids:
            what = f"instance {missing[0]}" if missing else "any instance"
            raise KitError(f"no value for {what} of query {group!r}; evaluate every instance")
        minima.append(min(scores))
    return sum(minima) / len(minima) if minima else math.nan
