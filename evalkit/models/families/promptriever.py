"""The ``promptriever`` family: Promptriever (a LoRA over Llama-2) as its authors' tevatron code
embeds (`evalkit.models.paper.build_promptriever`; the shared declaration:
`evalkit.models.paper_families`)."""

from __future__ import annotations

from evalkit.models.paper_families import paper_encoder

# What `build_promptriever` reads of an entry.
FAMILY = paper_encoder("promptriever", "build_promptriever", gpu_dtype="bfloat16",
                       settings=("model", "revision", "device", "max_length", "batch_size", "dtype", "doc_template",
                                 "base", "base_revision", "query_max_length", "passage_max_length"))
