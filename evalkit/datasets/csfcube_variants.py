"""CSFCube's instruction variants: the query each variant makes of a seed and a facet.

Every variant but ``aspect-subset`` queries with the seed's title and abstract and the
facet's instruction text of that variant (`config/instructions.yaml`); ``aspect-subset``
queries with only the seed's sentences of the requested facet (all its sentences if it
has none) and the facet's short ``aspect_subset`` instruction.
"""

from __future__ import annotations

from dataclasses import replace
from functools import cache
from pathlib import Path

import yaml

from evalkit.collection import Query
from evalkit.datasets.csfcube import FACETS
from evalkit.errors import KitError

INSTRUCTIONS_FILE = Path(__file__).resolve().parents[1] / "config" / "instructions.yaml"
VARIANTS = ("base", "generic", "definition", "paraphrase-1", "paraphrase-2", "paraphrase-3", "aspect-subset")


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


def make_variant(query: Query, variant: str) -> Query:
    """The query of `query`'s seed and facet under an instruction variant."""
    text = query.facet_text if variant == "aspect-subset" else query.seed.full_text
    return replace(query, text=text, instruction=instruction_text(query.facet, variant))
