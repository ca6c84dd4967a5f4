"""Per-query measures on plain data, for any collection (definitions: docs/design.md, section 3).

Each measure family declares itself in a module of its own: a `MeasureSpec` (`base`) saying the
names it parses, its cut-off rule, whether it reads binary grades, how it is computed and how
it aggregates. `registry.BUILT_IN` is the registration list the parser reads; `register` adds a
user's own. The families:

- ``nDCG@k`` / ``nDCG`` (`ndcg`): trec_eval's ndcg_cut (pytrec_eval): gain = grade, discount
  1/log2(rank+1), ideal DCG from every judged document of the query.
- ``AP@k`` / ``AP`` (`ap`), ``RR@k`` / ``RR`` (`rr`), ``P@k`` (`precision`), ``R@k`` (`recall`):
  trec_eval conventions with ``rel=relevance_level``; AP and R divide by every relevant judged
  document, P@k by k.
- ``nDCG_csfcube@k`` and ``nDCG_csfcube%p`` (`csfcube_ndcg`): the official CSFCube script's
  NDCG, custom ir_measures measures; ``MAP_csfcube`` (`csfcube_map`): the release's average
  precision over the run's ranked list.
- ``p-MRR`` (`pmrr`, FollowIR as mteb): a per-query column over the collection's instruction
  pairs, aggregated as the mean of the stratum means.
- ``robustness@k`` (`robustness_k`, InstructIR): the mean over query groups of the minimum
  per-instance nDCG@k; one value per table.

Inputs are plain dicts: qrels ``{qid: {doc: grade}}`` and a run ``{qid: {doc: score}}``
(higher scores first). ``relevance_level`` is the collection's binary threshold: a document
is relevant when its grade is >= the level (CSFCube 2, FollowIR / BEIR 1).

Ties: every measure sees the kit's ranking (`evalkit.data.runs.ranked`: score descending, then
document id ascending). Before any library sees a run, `rank_scores` replaces each query's
scores by strictly decreasing ones (n, n-1, ..., 1) along that ranking, so library tie
rules (trec_eval / pytrec_eval: doc id descending) never apply and the input order of a run
never matters.

A run query without judgments (absent from qrels or with an empty qrels entry) gets NaN
for every ranking measure; a judged query the run ranks no document for gets 0.

Aggregation over queries lives in `evalkit.evaluation.aggregate`; the evaluator that reads the
declarations (per-query table, summary) in `evalkit.evaluation.evaluate`.
"""

from evalkit.evaluation.measures.base import (
    FORBIDS,
    MAX_K,
    NEEDS,
    ONE_VALUE,
    OPTIONAL,
    PAIR,
    QUERY,
    QUERY_MEAN,
    STRATUM_MEAN,
    MeasureSpec,
    Parsed,
    Qrels,
    RunScores,
    check_cutoff,
    check_level,
    rank_scores,
    whole_list_measure,
)
from evalkit.evaluation.measures.csfcube_map import CSFCUBE_MAP, average_precision_listed, csfcube_map_measure
from evalkit.evaluation.measures.csfcube_ndcg import (
    CSFCUBE_NDCG,
    csfcube_measure,
    csfcube_percent_measure,
    ndcg_csfcube,
    ndcg_csfcube_percent,
    percent_cut,
)
from evalkit.evaluation.measures.evaluator import judged_values, parse_measure
from evalkit.evaluation.measures.pmrr import (
    P_MRR,
    PMRR,
    PMRR_TIES,
    changed_documents,
    p_mrr,
    pair_score,
    ranks_ids_descending,
)
from evalkit.evaluation.measures.registry import (
    BUILT_IN,
    MEASURE_HELP,
    declarations,
    find,
    measure_help,
    parse,
    register,
    registered,
    unregister,
)
from evalkit.evaluation.measures.robustness_k import ROBUSTNESS_AT_K, robustness

__all__ = [
    "BUILT_IN", "CSFCUBE_MAP", "CSFCUBE_NDCG", "FORBIDS", "MAX_K", "MEASURE_HELP", "MeasureSpec", "NEEDS",
    "ONE_VALUE", "OPTIONAL", "PAIR", "PMRR", "PMRR_TIES", "P_MRR", "Parsed", "QUERY", "QUERY_MEAN", "Qrels",
    "ROBUSTNESS_AT_K", "RunScores", "STRATUM_MEAN", "average_precision_listed", "changed_documents", "check_cutoff",
    "check_level", "csfcube_map_measure", "csfcube_measure", "csfcube_percent_measure", "declarations", "find",
    "judged_values", "measure_help", "ndcg_csfcube", "ndcg_csfcube_percent", "p_mrr", "pair_score", "parse",
    "parse_measure", "percent_cut", "rank_scores", "ranks_ids_descending", "register", "registered", "robustness",
    "unregister", "whole_list_measure",
]
