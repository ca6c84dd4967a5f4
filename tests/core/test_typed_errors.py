"""Every error the library raises is of a typed kind (`evalkit.core.errors`): a wrong request
(`RequestError`, its field), bad data (`DataError`, its source), a missing prerequisite
(`MissingPrerequisite`, its fix) or a broken declaration (`DeclarationError`). No module raises a
bare `KitError(...)`, except the few that pass on another error's text, whose kind they cannot
know (`ALLOWED`)."""

from __future__ import annotations

import ast
import pickle
from pathlib import Path

import pytest

from evalkit.core import errors
from evalkit.core.errors import (
    CLI,
    NOTEBOOK,
    DataError,
    DeclarationError,
    KitError,
    MissingPrerequisite,
    RequestError,
)

ROOT = Path(__file__).resolve().parents[2] / "evalkit"

# (module, the text of what is raised): each passes on the text of an error raised elsewhere.
ALLOWED = {
    # a notebook's failure under papermill: only the exception's class name and text come back
    ("make/launch.py", "KitError(_error_line(exc.ename, exc.evalue, name, kept))"),
    # a model of MODELS or REFERENCE_MODEL the registry refuses: the parameter before its line
    ("make/launch.py", "KitError(f'{parameter}: {(exc.problem if isinstance(exc, RequestError) else exc)}')"),
    # a recipe row's error, with the rows kept so far
    ("promptriever/recipe.py",
     "KitError(f'{exc} ({len(rows)} finished rows kept in {out}; a rerun reuses their runs)')"),
}


def _bare_raises(path: Path):
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if (isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call)
                and isinstance(node.exc.func, ast.Name) and node.exc.func.id == "KitError"):
            yield node.lineno, ast.unparse(node.exc)


def _modules() -> list[Path]:
    return sorted(p for p in ROOT.rglob("*.py") if p != ROOT / "core" / "errors.py")


def test_the_library_raises_no_bare_kit_error():
    found = {(str(path.relative_to(ROOT)), text): line
             for path in _modules() for line, text in _bare_raises(path)}
    bare = sorted(f"{module}:{line}: raise {text}" for (module, text), line in found.items()
                  if (module, text) not in ALLOWED)
    assert bare == [], "raise a RequestError, DataError, MissingPrerequisite or DeclarationError:\n" + "\n".join(bare)


def test_the_allow_list_names_only_raises_that_exist():
    """An entry whose raise is gone is dropped, so the list stays the few it must be."""
    found = {(str(path.relative_to(ROOT)), text) for path in _modules() for _, text in _bare_raises(path)}
    assert ALLOWED <= found, sorted(ALLOWED - found)


def test_the_walk_finds_a_bare_raise(tmp_path):
    module = tmp_path / "m.py"
    module.write_text("def f():\n    raise KitError('x: y')\n\ndef g():\n    raise DataError('x', 'y')\n")
    assert list(_bare_raises(module)) == [(2, "KitError('x: y')")]


def test_a_request_error_carries_its_field_and_value_for_every_front_end():
    error = RequestError("runs_dir", "is a file; give a folder for the run store", value="/x")
    assert isinstance(error, KitError) and (error.field, error.value) == ("runs_dir", "/x")
    assert str(error) == "runs_dir='/x': is a file; give a folder for the run store"
    assert str(error.for_front_end(CLI)) == "--runs-dir /x: is a file; give a folder for the run store"
    assert str(error.for_front_end(NOTEBOOK)) == "RUNS_DIR=/x: is a file; give a folder for the run store"


def test_a_data_error_carries_its_source():
    error = DataError(Path("run.trec"), "duplicate candidate a for query q; list each candidate once")
    assert isinstance(error, KitError) and error.source == Path("run.trec")
    assert str(error) == "run.trec: duplicate candidate a for query q; list each candidate once"
    assert str(error.for_front_end(CLI)) == str(error)  # names no field: the same line everywhere


def test_a_missing_prerequisite_carries_what_and_its_fix():
    error = MissingPrerequisite("peft is not installed", "pip install peft")
    assert isinstance(error, KitError) and (error.what, error.fix) == ("peft is not installed", "pip install peft")
    assert str(error) == "peft is not installed; fix: pip install peft"
    assert error.for_front_end(CLI) is error


def test_a_declaration_error_carries_its_declaration():
    error = DeclarationError("figure fig-1", "give it a caption (what it shows and the setting)")
    assert isinstance(error, KitError) and error.declaration == "figure fig-1"
    assert str(error) == "figure fig-1: give it a caption (what it shows and the setting)"


def _path_part():
    from evalkit.data.runstore import check_path_part
    check_path_part("profile", "../x")


def _measure():
    from evalkit.evaluation.measures import parse
    parse("nDCG@0")


def _revision():
    from evalkit.models.identity import identity_and_reason
    identity_and_reason(len, revision=" ")


def _missing_file():
    from evalkit.datasets.io import read_jsonl
    read_jsonl(Path("no-such-folder") / "queries.jsonl", ("_id",), "give the folder's file")


@pytest.mark.parametrize("raise_it, kind, carried", [
    (_path_part, DataError, ("source", "profile")),
    (_measure, RequestError, ("field", "measures")),
    (_revision, RequestError, ("field", "revision")),
    (_missing_file, DataError, ("source", Path("no-such-folder") / "queries.jsonl")),
])
def test_the_library_raises_the_typed_kinds(raise_it, kind, carried):
    with pytest.raises(kind) as raised:
        raise_it()
    assert getattr(raised.value, carried[0]) == carried[1]


def test_every_kind_of_kit_error_survives_pickling_with_its_line_and_fields():
    """An error raised in a Ray worker or another process reaches the driver as itself (Ray pickles
    it; a kind whose constructor takes fields, not the line, failed to unpickle before)."""
    made = [errors.KitError("plain line"), errors.RequestError("workers", "must be positive", value=0),
            errors.DataError("run.trec", "has no rows"), errors.MissingPrerequisite("ray", "pip install ray"),
            errors.DeclarationError("measure 'Hits'", "needs a name")]
    kinds = {type(e) for e in made}
    assert all(issubclass(k, errors.KitError) for k in kinds)
    for error in made:
        back = pickle.loads(pickle.dumps(error))
        assert type(back) is type(error) and str(back) == str(error) and back.__dict__ == error.__dict__
