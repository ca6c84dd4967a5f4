"""The ``oracle`` family: PRP with the perfect judge from the collection's grades
(`evalkit.models.llm.OraclePRP`) over a first stage (the entry's ``first_stage``, else the
profile's): an upper bound for LLM reranking; it needs the collection's qrels."""

from __future__ import annotations

from evalkit.data.collection import Collection
from evalkit.models.base import Scorer
from evalkit.models.family import ALWAYS, Family


def build(settings: dict, profile: str, collection: Collection, first_stage: Scorer) -> Scorer:
    # lazy (start-up cost): a model family's modules load only when it is built
    from evalkit.models.llm import OraclePRP

    return OraclePRP(first_stage, collection.qrels, **settings)


FAMILY = Family("oracle", build, needs={"qrels"}, first_stage=ALWAYS, settings=("variant", "k", "depth"))
