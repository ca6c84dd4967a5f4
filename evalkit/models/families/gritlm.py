"""The ``gritlm`` family: GritLM-7B (and E5-Mistral-style instructed embedders) as GritLM's code
embeds (`evalkit.models.paper.build_gritlm`; the shared declaration: `evalkit.models.paper_families`)."""

from __future__ import annotations

from evalkit.models.paper_families import paper_encoder

# What `build_gritlm` reads of an entry; bfloat16: the checkpoint's own dtype ("auto").
FAMILY = paper_encoder("gritlm", "build_gritlm", gpu_dtype="bfloat16",
                       settings=("model", "revision", "device", "max_length", "batch_size", "dtype", "doc_template"))
