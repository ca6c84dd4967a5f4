"""``P@k``: trec_eval's precision at k (relevant: grade >= the level), divided by k."""

from __future__ import annotations

import ir_measures

from evalkit.evaluation.measures.base import NEEDS, MeasureSpec

P = MeasureSpec("P", "P@k", cutoff=NEEDS, binary=True, library=ir_measures.P, ranx="precision")
