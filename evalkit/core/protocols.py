"""The evaluation protocols: which documents a run ranks and which the measures judge.

- ``pool``: each query's judged pool, its excluded document (CSFCube's seed) left out;
- ``released``: the pools as released, nothing excluded (`Collection.including_excluded`);
- ``pooled``: a first stage over the whole corpus, reranked to a depth, judged on the pools;
- ``full``: the whole corpus (CSFCube: its ~800k abstracts) ranked by the model itself.

One definition, imported by the runner, evaluation, the study notebooks, the API and the CLI.
"""

from __future__ import annotations

PROTOCOLS = ("pool", "released", "pooled", "full")
POOL_PROTOCOLS = ("pool", "released")  # each query's given candidates, no first stage
RELEASED = "released"  # the protocol that ranks and judges a collection as released, nothing excluded
DEFAULT_PROTOCOL = "pool"
