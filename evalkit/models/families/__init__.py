"""The kit's model families, one module each (its builder and its `Family` declaration,
`evalkit.models.family`), and their registration list, which the registry reads
(`evalkit.models.registry`; families from outside the kit: `registry.register_family`).

Adding a family to the kit: one module here, one line in `ALL`, and entries naming it in
``config/models.yaml`` (docs/adding-a-model.md)."""

from __future__ import annotations

from evalkit.models.families import (
    aspire,
    bm25,
    dense,
    gritlm,
    llm,
    multivector,
    oracle,
    paper_cls,
    promptriever,
    python,
)
from evalkit.models.family import Family

ALL: tuple[Family, ...] = (bm25.FAMILY, dense.FAMILY, multivector.FAMILY, gritlm.FAMILY, promptriever.FAMILY,
                           paper_cls.FAMILY, aspire.FAMILY, llm.FAMILY, oracle.FAMILY, python.FAMILY)
