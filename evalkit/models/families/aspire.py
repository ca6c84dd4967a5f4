"""The ``aspire`` family: otAspire, the paper's multi-vector model (`evalkit.models.paper`,
`evalkit.encoders.aspire`): the seed's facet sentences against every candidate sentence by
optimal transport; queries must be documents split into sentences. A first-stage model: it
reranks nothing."""

from __future__ import annotations

from evalkit.core.errors import DataError
from evalkit.data.collection import Collection
from evalkit.models import hybrid
from evalkit.models.base import Scorer
from evalkit.models.family import ENCODING, OPTIONAL, Family


def build(settings: dict, profile: str, collection: Collection, first_stage: Scorer | None,
          depth: int | None) -> Scorer:
    # lazy (start-up cost): a model family's modules load only when it is built
    from evalkit.models import paper

    if first_stage is not None:
        raise DataError("model settings", "family aspire takes no first_stage; it is a first-stage model of the paper")
    settings, _ = hybrid.split(settings)  # otAspire has no facet hybrid: its keys are dropped, as ever
    return paper.build_aspire(settings)


# first_stage OPTIONAL so that the registry takes `first_stage` and `depth` off the entry and the
# builder refuses a first stage in one line (as the other paper families accept one).
# What `evalkit.models.paper.build_aspire` reads of an entry, and the facet hybrid's keys it drops.
SETTINGS = ("model", "revision", "device", "max_tokens", "batch_size", "solver", "diameter", *hybrid.SETTINGS)

FAMILY = Family("aspire", build, weighted=True, needs={"sentences"}, first_stage=OPTIONAL, work=ENCODING,
                settings=SETTINGS)
