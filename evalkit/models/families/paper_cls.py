"""The ``paper-cls`` family: SciNCL ([CLS] of title [SEP] abstract) and, with ``adapter``, Specter2
(`evalkit.models.paper`, `evalkit.encoders`). With ``first_stage`` it reranks that model's top
``depth``; with ``hybrid_alpha``, the registry puts the facet hybrid over it
(`evalkit.models.hybrid`)."""

from __future__ import annotations

from evalkit.data.collection import Collection
from evalkit.models.base import Scorer
from evalkit.models.family import ENCODING, OPTIONAL, Family


def build(settings: dict, profile: str, collection: Collection, first_stage: Scorer | None,
          depth: int | None) -> Scorer:
    # lazy (start-up cost): a model family's modules load only when it is built
    from evalkit.models import paper

    return paper.build_paper_cls({**settings, "depth": depth}, first_stage)


# What `evalkit.models.paper.build_paper_cls` reads of an entry.
SETTINGS = ("model", "revision", "device", "max_length", "batch_size", "doc_template", "metric", "adapter",
            "adapter_revision")

FAMILY = Family("paper-cls", build, weighted=True, first_stage=OPTIONAL, work=ENCODING, hybrid=True,
                gpu_dtype="float32", settings=SETTINGS)
