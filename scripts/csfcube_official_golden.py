"""Golden figures of the CSFCube release's own evaluation script, for tests/evaluation/test_official_measures.py.

The release's ``eval_scripts/ranking_eval.py`` (iesl/CSFCube) computes MAP and NDCG%20, the
measures every published CSFCube row reports; the kit reimplements them (`MAP_csfcube`,
`nDCG_csfcube%20` in `evalkit.evaluation.measures`) and never ships the script. This script imports it
from a checkout of the release (its ``rank_metrics.py`` calls ``np.asfarray``, so it needs
numpy < 2: run it in a separate venv) and prints, as JSON, the test-split aggregates
(`aggregate_metrics_crossval`) per facet and over "all" of:

- ``specter``: the release's SPECTER sample (``sample_ranked_pools``) as given;
- ``thinned``: the same rankings with every third candidate (0-based positions 1, 4, 7, ...)
  left out, so the runs omit judged papers, relevant ones included, and the NDCG%20 cut
  ``int(0.2 * len)`` moves with the shorter lists.

How the committed goldens were produced::

    python3 -m venv /tmp/csfr && /tmp/csfr/bin/pip install 'numpy<2'     # numpy 1.26.4
    /tmp/csfr/bin/python scripts/csfcube_official_golden.py RELEASE_CHECKOUT

RELEASE_CHECKOUT: a checkout of iesl/CSFCube (commit 7ffe012c, the kit's pinned release).
"""

from __future__ import annotations

import contextlib
import json
import sys
import tempfile
from pathlib import Path

FACETS = ("background", "method", "result")
MEASURES = {"MAP_csfcube": "mean_av_precision", "nDCG_csfcube%20": "ndcg%20"}


def thinned(ranking: dict) -> dict:
    return {seed: [pair for i, pair in enumerate(pairs) if i % 3 != 1] for seed, pairs in ranking.items()}


def main(release: Path) -> None:
    sys.path.insert(0, str(release / "eval_scripts"))
    import ranking_eval  # the release's own script, from the checkout given

    sample = release / "eval_scripts" / "sample_ranked_pools"
    golden = {}
    with tempfile.TemporaryDirectory() as scratch, contextlib.redirect_stdout(sys.stderr):  # the script's prints
        for facet in FACETS:
            name = f"test-pid2pool-csfcube-specter-{facet}-ranked.json"
            ranking = json.loads((sample / name).read_text())
            (Path(scratch) / name).write_text(json.dumps(ranking))
            (Path(scratch) / name.replace("-specter-", "-thinned-")).write_text(json.dumps(thinned(ranking)))
        for method in ("specter", "thinned"):
            parts = {}
            for facet in (*FACETS, "all"):
                if facet == "all":
                    grades = ranking_eval.read_all_facet_relevances(str(release), scratch, "csfcube", method,
                                                                    list(FACETS))
                else:
                    grades = ranking_eval.read_facet_specific_relevances(str(release), scratch, "csfcube", facet,
                                                                         method)
                per_query = {q: ranking_eval.compute_metrics(g, pr_atk=20, threshold_grade=2)
                             for q, g in grades.items()}
                parts[facet] = ranking_eval.aggregate_metrics_crossval(per_query, "test", facet)
            golden[method] = {kit: {f: parts[f][theirs] for f in parts} for kit, theirs in MEASURES.items()}
    print(json.dumps(golden, indent=1))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
