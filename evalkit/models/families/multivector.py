"""The ``multivector`` family: a sentence-transformers model's sentence vectors matched by optimal
transport or max-sim (`evalkit.models.dense.MultiVector`); queries must be documents split into
sentences."""

from __future__ import annotations

from evalkit.data.collection import Collection
from evalkit.models.base import Scorer
from evalkit.models.dense import MultiVector
from evalkit.models.families.dense import ENCODER_SETTINGS, encoder
from evalkit.models.family import ENCODING, Family


def build(settings: dict, profile: str, collection: Collection) -> Scorer:
    return MultiVector(encoder(settings), settings.get("matching", "ot"))


FAMILY = Family("multivector", build, weighted=True, needs={"sentences"}, work=ENCODING,
                settings=(*ENCODER_SETTINGS, "matching"))
