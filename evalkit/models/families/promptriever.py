"""The ``promptriever`` family: Promptriever (a LoRA over Llama-2) as its authors' tevatron code embeds
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

    return paper.build_promptriever({**settings, "depth": depth}, first_stage)


# What `evalkit.models.paper.build_promptriever` reads of an entry.
SETTINGS = ("model", "revision", "device", "max_length", "batch_size", "dtype", "doc_template", "base",
            "base_revision", "query_max_length", "passage_max_length")

FAMILY = Family("promptriever", build, weighted=True, first_stage=OPTIONAL, work=ENCODING, hybrid=True,
                gpu_dtype="bfloat16", settings=SETTINGS)
