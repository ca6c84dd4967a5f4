"""The ``paper-cls`` family: SciNCL ([CLS] of title [SEP] abstract) and, with ``adapter``, Specter2
(`evalkit.models.paper.build_paper_cls`, `evalkit.encoders`; the shared declaration:
`evalkit.models.paper_families`)."""

from __future__ import annotations

from evalkit.models.paper_families import paper_encoder

# What `build_paper_cls` reads of an entry.
FAMILY = paper_encoder("paper-cls", "build_paper_cls", gpu_dtype="float32",
                       settings=("model", "revision", "device", "max_length", "batch_size", "doc_template", "metric",
                                 "adapter", "adapter_revision"))
