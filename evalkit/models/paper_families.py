"""The one declaration of the paper's instructed bi-encoder families (``gritlm``, ``promptriever``,
``paper-cls``: one module each in `evalkit.models.families`): each is built by a function of
`evalkit.models.paper` (loaded only when a model of it is built), loads weights, reranks an
optional first stage's top ``depth`` and takes the facet hybrid (`evalkit.models.hybrid`);
they differ only in their builder, the settings it reads and the dtype they load in on a GPU."""

from __future__ import annotations

from collections.abc import Iterable

from evalkit.data.collection import Collection
from evalkit.models.base import Scorer
from evalkit.models.family import ENCODING, OPTIONAL, Family


def paper_encoder(name: str, builder: str, settings: Iterable[str], gpu_dtype: str) -> Family:
    """The `Family` `name`, built by ``evalkit.models.paper.<builder>(settings, first_stage)``,
    which reads `settings` of an entry."""

    def build(entry: dict, profile: str, collection: Collection, first_stage: Scorer | None,
              depth: int | None) -> Scorer:
        # lazy (start-up cost): a model family's modules load only when it is built
        from evalkit.models import paper

        return getattr(paper, builder)({**entry, "depth": depth}, first_stage)

    return Family(name, build, weighted=True, first_stage=OPTIONAL, work=ENCODING, hybrid=True,
                  gpu_dtype=gpu_dtype, settings=tuple(settings))
