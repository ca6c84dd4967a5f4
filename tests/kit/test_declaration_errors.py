"""Every kind of declaration (a dataset scheme, a measure, a model family, as the "adding a ..."
guides write them) refuses a broken declaration with a `DeclarationError`: one line naming the
declaration and the fix, a `KitError` the CLI prints as its one line, never a ValueError or TypeError."""

from __future__ import annotations

import pytest

from evalkit import datasets
from evalkit.core.errors import DeclarationError, KitError
from evalkit.datasets.scheme import FOLDER, Scheme
from evalkit.evaluation.measures import MeasureSpec, registry
from evalkit.models import registry as model_registry
from evalkit.models.family import Family


def _overlap(query, documents):
    return [0.0 for _ in documents]


BROKEN = {
    "scheme, upper-case name": lambda: Scheme("Toy", FOLDER, lambda folder: None, help="toy", argument="FOLDER"),
    "scheme, name not a string": lambda: Scheme(3, FOLDER, lambda folder: None, help="toy", argument="FOLDER"),
    "scheme, loader not callable": lambda: Scheme("toy", FOLDER, "load", help="toy", argument="FOLDER"),
    "scheme, no help": lambda: Scheme("toy", FOLDER, lambda folder: None, help=None, argument="FOLDER"),
    "register a non-scheme": lambda: datasets.register("toy:FOLDER"),
    "register a scheme under a kit name": lambda: datasets.register(
        Scheme("csfcube", FOLDER, lambda folder: None, help="another", argument="FOLDER")),
    "measure, two ways to compute": lambda: MeasureSpec("Twice", "twice", library="P", value=len),
    "register a non-measure": lambda: registry.register("Hits@k"),
    "family, builder not callable": lambda: Family("word-overlap", "build"),
    "family, unknown trait": lambda: Family("word-overlap", _overlap, work="juggling"),
    "register a non-family": lambda: model_registry.register_family("word-overlap"),
    "register a kit family's name": lambda: model_registry.register_family(Family("bm25", _overlap)),
}


@pytest.mark.parametrize("case", sorted(BROKEN))
def test_a_broken_declaration_is_one_declaration_error(case):
    with pytest.raises(DeclarationError) as caught:
        BROKEN[case]()
    error = caught.value
    assert isinstance(error, KitError) and "\n" not in str(error)
    assert str(error).startswith(f"{error.declaration}: ") and error.problem
