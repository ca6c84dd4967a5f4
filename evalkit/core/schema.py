"""A request's declared schema (pydantic): each field once, with its type, its rule and the
problem its one-line error states, refused as the kit's `RequestError` (so every front end
spells the field its own way: `evalkit.core.errors.spell`).

A field's rule is its annotation (``Literal[...]``, ``StrictInt`` with ``ge``/``le``) with a
`Problem` per kind of pydantic error, or a validator raising `RequestError` itself (a
``ValueError``, so pydantic records it, and it is given back as raised). A rule over two fields
is a validator of the later field reading the earlier one (``info.data``), so the first error
of a request is the one its fields' order states. `RequestSchema` maps pydantic's errors
back: the first in `RequestSchema.ORDER` (default the fields' order) is the request's one line.
The model registry file's schema states its fields' problems the same way (`stated`:
`evalkit.models.registry_file`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, get_args

from pydantic import BaseModel, ConfigDict, TypeAdapter, ValidationError

from evalkit.core.errors import RequestError


@dataclass(frozen=True)
class Problem:
    """What a field's error says when pydantic refuses its value with one of `types` (pydantic's
    error types, e.g. ``int_type``, ``less_than_equal``; any when empty): `text`, after the value
    as `shown` writes it (default: as given)."""

    text: str
    types: tuple[str, ...] = ()
    shown: Callable[[Any], Any] | None = None


WHOLE = Problem("give a whole number", ("int_type",))  # a whole-number field given a bool, a float or text


def stated(metadata: Sequence, error: dict) -> Problem | None:
    """The `Problem` among a field's annotation `metadata` for pydantic's `error` (by its type), if any."""
    return next((p for p in metadata if isinstance(p, Problem) and (not p.types or error["type"] in p.types)), None)


def refused(field: str, metadata: Sequence, error: dict) -> RequestError:
    """The kit's line for pydantic's `error` of `field`: the `RequestError` a rule raised, else
    the field's `Problem` (from its annotation's `metadata`) for the error's type."""
    raised = (error.get("ctx") or {}).get("error")
    if isinstance(raised, RequestError):
        return raised
    problem = stated(metadata, error)
    value = error["input"]
    if problem is None:  # a plain type (``str | None``): pydantic's words ("Input should be a valid string")
        return RequestError(field, error["msg"][:1].lower() + error["msg"][1:], value=value)
    return RequestError(field, problem.text, value=value if problem.shown is None else problem.shown(value))


class RequestSchema(BaseModel):
    """A request built by keyword and checked as it is built: a refused field is one `RequestError`."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    ORDER: ClassVar[tuple[str, ...]] = ()  # every field, in the order of the rules, when not the fields' own

    def __init__(self, **fields):
        try:
            super().__init__(**fields)
        except ValidationError as exc:
            raise self.refusal(exc) from None

    @classmethod
    def refusal(cls, exc: ValidationError) -> RequestError:
        """The one line of `exc`: its first error in the order of the fields' rules."""
        order = cls.ORDER or tuple(cls.model_fields)
        error = min(exc.errors(), key=lambda e: order.index(e["loc"][0]) if e["loc"] and e["loc"][0] in order
                    else len(order))
        field = error["loc"][0]
        if field not in cls.model_fields:
            return RequestError(field, f"is no field of {cls.__name__}; give one of {', '.join(order)}")
        return refused(field, cls.model_fields[field].metadata, error)

    def checked(self):
        """This request checked again, field by field (a copy made by ``model_copy(update=...)`` is not)."""
        return type(self)(**dict(self))


def check_value(field: str, annotation: Any, value: object) -> Any:
    """`value` under one annotated field type of a schema (its rule and `Problem`s), `field` naming it."""
    try:
        return TypeAdapter(annotation).validate_python(value)
    except ValidationError as exc:
        raise refused(field, get_args(annotation)[1:], exc.errors()[0]) from None
