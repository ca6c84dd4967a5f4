"""``nDCG@k`` / ``nDCG``: trec_eval's ndcg_cut (pytrec_eval, through ir_measures).

Gain = grade, discount 1/log2(rank + 1), the ideal DCG from every judged document of the query;
graded (it reads the grades, not the collection's relevance level).
"""

from __future__ import annotations

import ir_measures

from evalkit.evaluation.measures.base import OPTIONAL, MeasureSpec

NDCG = MeasureSpec("nDCG", "nDCG@k", cutoff=OPTIONAL, library=ir_measures.nDCG, ranx="ndcg")
