"""``R@k``: trec_eval's recall at k (relevant: grade >= the level) over every relevant judged document."""

from __future__ import annotations

import ir_measures

from evalkit.evaluation.measures.base import NEEDS, MeasureSpec

R = MeasureSpec("R", "R@k", cutoff=NEEDS, binary=True, library=ir_measures.R, ranx="recall")
