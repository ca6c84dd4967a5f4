"""Typed errors: one field, spelled by each front end through one mapping (`evalkit.core.errors`)."""

from __future__ import annotations

import pytest

from evalkit.core import errors
from evalkit.core.errors import CLI, NOTEBOOK, DataError, KitError, RequestError, kit_error_names, spell, worded


def test_each_front_end_spells_a_field_its_own_way():
    assert [spell("pmrr_ties", f) for f in ("api", CLI, NOTEBOOK)] == ["pmrr_ties=", "--pmrr-ties", "PMRR_TIES"]
    assert spell("reference", NOTEBOOK) == "REFERENCE_MODEL"
    with pytest.raises(ValueError):
        spell("k", "gui")


def test_a_request_error_is_one_line_per_front_end_with_its_field_and_value():
    error = RequestError("permutations", "give between 100 and 10,000,000", value=3)
    assert isinstance(error, KitError)
    assert str(error) == "permutations=3: give between 100 and 10,000,000"
    assert str(error.for_front_end(CLI)) == "--permutations 3: give between 100 and 10,000,000"
    assert str(error.for_front_end(NOTEBOOK)) == "PERMUTATIONS=3: give between 100 and 10,000,000"
    both = RequestError("seeds", "give {seeds} or {queries}, not both")
    assert str(both) == "seeds= give seeds= or queries=, not both"
    assert str(both.for_front_end(CLI)) == "--seeds: give --seeds or --queries, not both"


def test_placeholders_name_only_request_fields_so_user_text_stays_as_written():
    assert worded("give {protocol:released}", CLI) == "give --protocol released"
    assert worded("give {protocol:released}") == "give protocol='released'"
    assert worded("template {query} and {x}") == "template {query} and {x}"  # not fields: left alone
    error = DataError("run.trec", "ranks {doc}; give {protocol:released}")
    assert str(error.for_front_end(CLI)) == "run.trec: ranks {doc}; give --protocol released"


def test_every_kind_of_kit_error_is_known_by_name():
    """Every kind the errors module defines, and a kind defined later below one of them."""
    defined = {v.__name__ for v in vars(errors).values() if isinstance(v, type) and issubclass(v, errors.KitError)}
    assert {"KitError", "RequestError", "DataError", "MissingPrerequisite", "DeclarationError"} <= defined
    assert kit_error_names() == defined

    class LaterKind(errors.DataError):
        pass

    assert kit_error_names() == defined | {"LaterKind"}
