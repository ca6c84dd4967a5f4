"""``AP@k`` / ``AP``: trec_eval's average precision at ``rel=`` the collection's relevance level.

It divides by every relevant judged document of the query (a relevant document the run leaves
out counts as missed), unlike the release's ``MAP_csfcube``.
"""

from __future__ import annotations

import ir_measures

from evalkit.evaluation.measures.base import OPTIONAL, MeasureSpec

AP = MeasureSpec("AP", "AP[@k]", cutoff=OPTIONAL, binary=True, library=ir_measures.AP, ranx="map")
