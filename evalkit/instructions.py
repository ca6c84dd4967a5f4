"""Instruction variants and the requests models score.

A `Request` is what every model sees: the seed paper, the facet, the instruction
text and the query text. For every variant but ``aspect-subset`` the query text is
the seed's title and abstract; for ``aspect-subset`` it is only the seed's
sentences of the requested facet (all sentences if it has none) and the
instruction is the facet's short ``aspect_subset`` text.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from pathlib import Path

import yaml

from evalkit.csfcube import FACETS, Paper
from evalkit.errors import KitError

INSTRUCTIONS_FILE = Path(__file__).parent / "config" / "instructions.yaml"
VARIANTS = ("base", "generic", "definition", "paraphrase-1", "paraphrase-2", "paraphrase-3", "aspect-subset")


@dataclass(frozen=True)
class Request:
    seed: Paper
    facet: str
    instruction: str
    query_text: str


@cache
def load_instructions(path: Path = INSTRUCTIONS_FILE) -> dict[str, dict]:
    try:
        table = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise KitError(f"{path}: cannot read instructions ({exc}); restore the file") from None
    for facet in FACETS:
        entry = table.get(facet) if isinstance(table, dict) else None
        if not entry or len(entry.get("paraphrases", [])) != 3:
            raise KitError(f"{path}: facet {facet} needs base, generic, definition, 3 paraphrases, aspect_subset")
    return table


def check_variant(variant: str) -> None:
    if variant not in VARIANTS:
        raise KitError(f"unknown variant {variant!r}; choose one of {', '.join(VARIANTS)}")


def instruction_text(facet: str, variant: str) -> str:
    check_variant(variant)
    entry = load_instructions()[facet]
    if variant.startswith("paraphrase-"):
        return entry["paraphrases"][int(variant[-1]) - 1]
    return entry[variant.replace("-", "_")]


def make_request(seed: Paper, facet: str, variant: str) -> Request:
    """The request for one seed, facet and instruction variant."""
    instruction = instruction_text(facet, variant)
    query_text = seed.text
    if variant == "aspect-subset":
        query_text = " ".join(seed.facet_sentences(facet)) or seed.text
    return Request(seed, facet, instruction, query_text)
