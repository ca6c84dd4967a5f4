"""The ``dense`` family: a sentence-transformers bi-encoder (`evalkit.models.dense.BiEncoder`),
the offline profile's embedders and every ``st:`` model. With ``first_stage`` it reranks that
model's top ``depth``; with ``hybrid_alpha``, the registry puts the facet hybrid over it
(`evalkit.models.hybrid`)."""

from __future__ import annotations

from evalkit.core.errors import DataError
from evalkit.data.collection import Collection
from evalkit.models.base import Scorer
from evalkit.models.dense import BiEncoder
from evalkit.models.family import ENCODING, OPTIONAL, Family
from evalkit.models.locations import resolve_location


def encoder(settings: dict):
    """The sentence-transformers encoder of a ``dense`` or ``multivector`` entry (`evalkit.retrieval.embeddings`)."""
    # lazy (start-up cost): a model family's modules load only when it is built
    from evalkit.retrieval.embeddings import Encoder

    if settings.get("adapter"):
        raise DataError(f"adapter {settings['adapter']}", "the dense family (sentence-transformers) takes no adapter; "
                        "use family paper-cls for a BERT model with an AdapterHub adapter (Specter2)")
    return Encoder(resolve_location(settings["model"]), revision=settings.get("revision"),
                   max_seq_length=settings.get("max_seq_length"), batch_size=settings.get("batch_size", 32),
                   devices=settings.get("devices"), backend=settings.get("backend", "torch"),
                   threads=settings.get("threads"), name=settings["model"])


def build(settings: dict, profile: str, collection: Collection, first_stage: Scorer | None,
          depth: int | None) -> Scorer:
    return BiEncoder(encoder(settings), settings.get("query_template", "{query}"),
                     settings.get("doc_template", "{text}"),
                     settings.get("empty_instruction_template", "{query}"), first_stage, depth)


# What `encoder` reads of an entry (``adapter`` only to refuse it with the way to a family that takes one).
ENCODER_SETTINGS = ("model", "revision", "max_seq_length", "batch_size", "devices", "backend", "threads", "adapter")
SETTINGS = (*ENCODER_SETTINGS, "query_template", "doc_template", "empty_instruction_template")

FAMILY = Family("dense", build, weighted=True, first_stage=OPTIONAL, work=ENCODING, hybrid=True, settings=SETTINGS)
