"""``RR@k`` / ``RR``: trec_eval's reciprocal rank of the first relevant document (grade >= the level)."""

from __future__ import annotations

import ir_measures

from evalkit.evaluation.measures.base import OPTIONAL, MeasureSpec

RR = MeasureSpec("RR", "RR[@k]", cutoff=OPTIONAL, binary=True, library=ir_measures.RR, ranx="mrr")
