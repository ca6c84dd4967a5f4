"""CSFCube's instruction variants: the query each variant makes of a seed and a facet.

Every variant but ``aspect-subset`` queries with the seed's title and abstract and the
facet's instruction text of that variant (`config/instructions.yaml`); ``aspect-subset``
queries with only the seed's sentences of the requested facet (all its sentences if it
has none) and the facet's short ``aspect_subset`` instruction.

An instruction file maps each facet (background, method, result) to its variants: a key
with a text is a variant of that name (``_`` written ``-``), ``paraphrases`` a list of texts
(variants ``paraphrase-1``, ``paraphrase-2``, ...), ``aspect_subset`` the Aspect-subset
variant's text. The kit's own file has the study's seven variants (`VARIANTS`); a user's file
(``--instructions``, ``INSTRUCTIONS``, the API's ``instructions``) may name any variants, the
same ones for every facet. `load_instructions` checks the shape and reports a problem in one
line.
"""

from __future__ import annotations

import re
from dataclasses import replace
from functools import cache
from pathlib import Path

import yaml

from evalkit.core import configfile
from evalkit.core.errors import DataError, RequestError
from evalkit.data.collection import Query
from evalkit.datasets.csfcube_facets import FACETS

INSTRUCTIONS_FILE = Path(__file__).resolve().parents[1] / "config" / "instructions.yaml"
VARIANTS = ("base", "generic", "definition", "paraphrase-1", "paraphrase-2", "paraphrase-3", "aspect-subset")
ASPECT_SUBSET = "aspect-subset"
_VARIANT_NAME = re.compile(r"[a-z0-9][a-z0-9-]*")


def load_instructions(path: Path = INSTRUCTIONS_FILE) -> dict[str, dict[str, str]]:
    """{facet: {variant: instruction text}} of an instruction file, its shape checked."""
    path = Path(path)
    try:
        text = configfile.read_text(path)
    except (OSError, UnicodeDecodeError) as exc:
        raise DataError(path, f"cannot read instructions ({getattr(exc, 'strerror', None) or exc}); "
                        "give a readable YAML file") from None
    return _parse(str(path), text)


@cache
def _parse(where: str, text: str) -> dict[str, dict[str, str]]:
    try:
        table = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise DataError(where, f"not valid YAML ({' '.join(str(exc).split())[:120]}); fix the file") from None
    if not isinstance(table, dict):
        raise DataError(where, f"must map each facet ({', '.join(FACETS)}) to its variants, as "
                        "evalkit/config/instructions.yaml")
    unknown = next((k for k in table if k not in FACETS), None)
    if unknown is not None:
        raise DataError(where, f"unknown facet {unknown!r}; the facets are {', '.join(FACETS)}")
    out = {facet: _facet_variants(where, facet, table.get(facet)) for facet in FACETS}
    first = FACETS[0]
    for facet in FACETS[1:]:
        if list(out[facet]) != list(out[first]):
            raise DataError(where, f"facet {facet} defines variants {', '.join(out[facet])} but {first} defines "
                            f"{', '.join(out[first])}; give every facet the same variants")
    return out


def _facet_variants(where: str, facet: str, entry) -> dict[str, str]:
    if not isinstance(entry, dict) or not entry:
        raise DataError(where, f"facet {facet} is missing or not a mapping of variant names to instruction texts")
    variants: dict[str, str] = {}
    for key, value in entry.items():
        if key == "paraphrases":
            if not isinstance(value, list) or not value:
                raise DataError(where, f"{facet}.paraphrases must be a list of instruction texts")
            named = {f"paraphrase-{i}": text for i, text in enumerate(value, start=1)}
        else:
            named = {str(key).replace("_", "-"): value}
        for name, text in named.items():
            if not _VARIANT_NAME.fullmatch(name):
                raise DataError(where, f"{facet}: variant name {name!r} must be lower-case letters, digits and -")
            if not isinstance(text, str) or not text.strip():
                raise DataError(where, f"{facet}.{key}: the instruction must be a non-empty text")
            if name in variants:
                raise DataError(where, f"{facet} names variant {name} twice; name each variant once")
            variants[name] = text
    return variants


def variants_of(path: Path = INSTRUCTIONS_FILE) -> tuple[str, ...]:
    """The variant names an instruction file defines, in file order."""
    return tuple(load_instructions(path)[FACETS[0]])


def instruction_text(facet: str, variant: str, path: Path = INSTRUCTIONS_FILE) -> str:
    table = load_instructions(path)[facet]
    if variant not in table:
        raise RequestError("variant",
                           f"unknown variant {variant!r} in {Path(path).name}; choose one of {', '.join(table)}")
    return table[variant]


def make_variant(query: Query, variant: str, path: Path = INSTRUCTIONS_FILE) -> Query:
    """The query of `query`'s seed and facet under an instruction variant (of the file `path`)."""
    text = query.facet_text if variant == ASPECT_SUBSET else query.seed.full_text
    return replace(query, text=text, instruction=instruction_text(query.facet, variant, path))


def from_file(path: Path):
    """(variants, make_variant) of an instruction file: CSFCube's `Collection.instructions_from`."""
    path = Path(path)
    return variants_of(path), lambda query, variant: make_variant(query, variant, path)
