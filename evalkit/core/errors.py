"""The kit's errors: each a single line naming the problem and the fix.

`KitError` is the one type front ends catch (the CLI prints it as one line and exits 2). Three
kinds below it say whose move the fix is:

- `RequestError`: a wrong request (an option, an argument, a notebook parameter). It carries the
  request's ``field`` by its one name (``permutations``, ``measures``, ``seeds``) and each front
  end spells that field its own way through `spell` (``--permutations`` on the command line,
  ``permutations=`` in Python, ``PERMUTATIONS`` in the notebooks and make, ``SEED`` on the explore
  page for its one seed), so the library never
  names a command-line flag and every front end refuses the same request with the same line,
  only the field spelled differently. Its text may name other fields as ``{field}``
  placeholders (``"give {seeds} or {queries}, not both"``), spelled the same way.
- `DataError`: bad data (a run file, a judgments file, a collection's files); ``source`` names it.
- `MissingPrerequisite`: something not installed or not downloaded; ``fix`` says how to get it.
- `DeclarationError`: a declaration that breaks its rules (a dataset scheme, a measure, a model
  family, as the "adding a ..." guides write them); ``declaration`` names it. The fix is the
  extender's, in their own code, so it is raised where the declaration is made, not when used.

`report` prints any of them as the kit's one error line.
"""

from __future__ import annotations

import re
import sys

API, CLI, NOTEBOOK, EXPLORE = "api", "cli", "notebook", "explore"  # the front ends that spell a field
FRONT_ENDS = (API, CLI, NOTEBOOK, EXPLORE)
_UPPER = (NOTEBOOK, EXPLORE)  # the front ends of papermill parameters and make variables: ``NAME=value``

# Fields a front end spells other than by its rule (`spell`): the CLI's and notebooks' own names.
_SPELLED = {
    CLI: {"runs_dir": "--runs-dir", "reference": "--runs", "queries": "--queries", "model": "--model",
          "variants": "--variant"},  # `evalkit run` takes one variant
    NOTEBOOK: {"reference": "REFERENCE_MODEL", "model": "MODELS", "variants": "INSTRUCTIONS",
               "runs_dir": "RUNS_DIR"},
}
# The explore page (notebooks/explore.ipynb, ``make explore SEED=...``) takes the notebooks' parameters, but one
# seed paper (``SEED``) and the documents shown per model and facet (``K``).
_SPELLED[EXPLORE] = {**_SPELLED[NOTEBOOK], "seeds": "SEED"}


def _check_front_end(front_end: str) -> None:
    if front_end not in FRONT_ENDS:
        raise ValueError(f"unknown front end {front_end!r}")


def spell(field: str, front_end: str = API) -> str:
    """How `front_end` names a request field: ``--k-name`` (CLI), ``name=`` (API), ``NAME``
    (the notebooks, the explore page and make), unless `_SPELLED` names it otherwise."""
    _check_front_end(front_end)
    own = _SPELLED.get(front_end, {}).get(field)
    if own is not None:
        return own
    if front_end == CLI:
        return "--" + field.replace("_", "-")
    if front_end in _UPPER:
        return field.upper()
    return f"{field}="


class KitError(Exception):
    """A user-facing problem (bad input, missing data); the CLI prints it as one line and exits 2."""

    def __reduce__(self):
        # pickled whole (its line and its fields), so an error raised in another process (a Ray
        # worker, a process pool) comes back as itself: the kinds below take their fields, not the line
        return _restored, (type(self), self.args, dict(self.__dict__))

    def for_front_end(self, front_end: str) -> KitError:
        """This error as `front_end` words it (a plain `KitError` names no field: itself)."""
        return self


def _restored(kind: type, args: tuple, fields: dict) -> KitError:
    """A `KitError` of `kind` with its line (`args`) and `fields`, as it was pickled (`__reduce__`)."""
    error = Exception.__new__(kind)
    Exception.__init__(error, *args)
    error.__dict__.update(fields)
    return error


def given(field: str, value: object, front_end: str = API) -> str:
    """A field with a value as `front_end` writes it: ``--depth 5``, ``depth=5``, ``DEPTH=5``."""
    name = spell(field, front_end)
    if front_end == CLI:
        return f"{name} {value}"
    if front_end in _UPPER:
        return f"{name}={value}"
    return f"{name}{value!r}"


# The request fields a message may name as a placeholder: ``{protocol}`` (the field as the front end
# spells it) or ``{protocol:released}`` (the field given that value). Only these names are
# replaced, so a message that quotes a user's text ("{query}", an id with braces) is left as it is.
FIELDS = frozenset({
    "model", "dataset", "name", "revision", "variants", "variant", "protocol", "profile", "reference",
    "instructions", "seeds", "queries", "query_template", "doc_template", "empty_instruction_template", "label",
    "role", "measures", "discount", "k", "aggregate", "runs_dir", "first_stage", "depth", "corpus", "test",
    "alpha", "permutations", "seed", "pmrr_ties", "runs", "format", "per_query", "index_dtype", "prompt", "recipe",
    "executor", "workers",
})
_PLACEHOLDER = re.compile(r"\{([a-z_]+)(?::([^{}]*))?\}")


def worded(text: str, front_end: str = API) -> str:
    """`text` with its ``{field}`` and ``{field:value}`` placeholders written as `front_end` writes them."""
    _check_front_end(front_end)

    def one(match: re.Match) -> str:
        field, value = match.group(1), match.group(2)
        if field not in FIELDS:
            return match.group(0)
        return spell(field, front_end) if value is None else given(field, value, front_end)

    return _PLACEHOLDER.sub(one, text)


class RequestError(KitError, ValueError):
    """A wrong request: `field` (the request's name for it), optionally the `value` given, and
    `problem` (what is wrong and the fix; ``{other_field}`` placeholders are spelled too). A
    ``ValueError``, so a request schema's rule may raise it (`evalkit.core.schema`).
    ``str()`` is the API's wording; `for_front_end` gives the CLI's or the notebooks'."""

    def __init__(self, field: str, problem: str, *, value: object = ..., front_end: str = API):
        self.field, self.problem, self.value, self.front_end = field, problem, value, front_end
        super().__init__(self._text())

    def _text(self) -> str:
        name = spell(self.field, self.front_end)
        problem = worded(self.problem, self.front_end)
        if self.value is not ...:
            return f"{given(self.field, self.value, self.front_end)}: {problem}"
        return f"{name} {problem}" if self.front_end == API else f"{name}: {problem}"  # seeds= ..., --seeds: ...

    def for_front_end(self, front_end: str) -> RequestError:
        return RequestError(self.field, self.problem, value=self.value, front_end=front_end)


class DataError(KitError):
    """Bad data: `source` (a file, a folder, a collection) and what is wrong with it, with the fix
    (``{field}`` placeholders spelled as in `RequestError`)."""

    def __init__(self, source: object, problem: str, *, front_end: str = API):
        self.source, self.problem, self.front_end = source, problem, front_end
        super().__init__(f"{source}: {worded(problem, front_end)}")

    def for_front_end(self, front_end: str) -> DataError:
        return DataError(self.source, self.problem, front_end=front_end)


class MissingPrerequisite(KitError):
    """Something the work needs is not installed or not downloaded: `what`, and `fix` (how to get it)."""

    def __init__(self, what: str, fix: str):
        self.what, self.fix = what, fix
        super().__init__(f"{what}; fix: {fix}")


class DeclarationError(KitError):
    """A declaration that breaks its rules: `declaration` (``scheme 'toy'``, ``measure 'Hits'``,
    ``family 'word-overlap'``) and `problem`, what is wrong and how to write it instead."""

    def __init__(self, declaration: str, problem: str):
        self.declaration, self.problem = declaration, problem
        super().__init__(f"{declaration}: {problem}")


def unknown_settings(owner: str, unknown, accepted) -> DataError:
    """The one line for settings nobody reads (a misspelled key in a model's registry entry, an
    LLM backend's options): `owner` names what was given them (``model X (family dense)``)."""
    named = ", ".join(repr(key) for key in sorted(unknown))
    return DataError(owner, f"no setting {named}; its settings are {', '.join(sorted(accepted))}; "
                            "fix the model's entry")


def kit_error_names() -> frozenset[str]:
    """The class names of `KitError` and every kind below it: how a kit error is known by name alone
    (a notebook's failure under papermill carries only the exception's class name)."""
    found, todo = set(), [KitError]
    while todo:
        kind = todo.pop()
        found.add(kind.__name__)
        todo += kind.__subclasses__()
    return frozenset(found)


def report(message: object) -> int:
    """Print `message` as the kit's one error line on stderr (line breaks joined); the exit status, 2."""
    print(f"evalkit: error: {' '.join(str(message).splitlines())}", file=sys.stderr)
    return 2
