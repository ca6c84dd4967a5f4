"""Models without a registry entry: ``st:`` specs (CLI, notebooks' MODELS lists) and Python
objects the API hands a registry value (`evalkit.api`, `evalkit.models.registry.Registry.with_object`),
each with the identity that keys its runs.

An ``st:`` spec names a sentence-transformers model by hub id or local folder, with optional
``;key=value`` parts::

    st:LOCATION[;query=TEMPLATE][;doc=TEMPLATE][;empty=TEMPLATE][;revision=REV][;role=ROLE][;label=LABEL]

``query`` is the query template (fields ``{instruction}``, ``{query}``; default ``{query}``),
``doc`` the document template (``{text}`` = title + " " + abstract, ``{title}``,
``{abstract}``; default ``{text}``), ``empty`` the template for a blank instruction (``{query}``
only), ``revision`` a hub revision, ``role`` a registry role (default: ``instructed`` when the
query template reads ``{instruction}``, else ``agnostic``), ``label`` the name tables, figures
and the report show (default ``st:`` and the folder's or hub id's last part). It builds the registry's ``dense``
family. Its identity: a local folder's file sha256 (weights included), else the revision
given; a hub id without a revision has none, so its runs are never reused.

A run name must be one TREC field and a folder name (`evalkit.data.runstore.check_run_name`), so an
``st:`` model's run name is a slug of its location plus 8 hex digits of the whole spec.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from evalkit.core.errors import RequestError
from evalkit.core.names import labelled, run_part
from evalkit.data.runstore import is_storable
from evalkit.models.identity import folder_identity

PREFIX = "st:"
KEYS = {"query": "query_template", "doc": "doc_template", "empty": "empty_instruction_template",
        "revision": "revision", "role": "role", "label": "label"}
PYTHON_FAMILY = "python"  # the family of the Python objects the API registers
ST_FAMILY = "dense"  # the family an st: spec builds (a sentence-transformers bi-encoder)



@dataclass(frozen=True, eq=False)
class PythonModel:
    """A user's Python model object under a name, with the identity that keys its runs, its label,
    role and text templates. A registry value carries it (`evalkit.models.registry.Registry.with_object`)
    and the model spec a run binds holds it, so the ``python`` family builds this very object: two
    objects under one name in one process each rank with their own."""

    name: str
    model: object = field(repr=False)
    identity: dict | None
    label: str
    role: str
    templates: dict


def is_st(name: str) -> bool:
    return isinstance(name, str) and name.startswith(PREFIX)


def st_spec(location: str, query_template: str | None = None, doc_template: str | None = None,
            empty_instruction_template: str | None = None, revision: str | None = None,
            role: str | None = None, label: str | None = None) -> str:
    """The ``st:`` spec string of a location and options (the CLI's --query-template etc.)."""
    parts = [f"{PREFIX}{location}"]
    for key, value in (("query", query_template), ("doc", doc_template), ("empty", empty_instruction_template),
                       ("revision", revision), ("role", role), ("label", label)):
        if value is not None:
            if ";" in value:
                raise RequestError("model", f"{key} {value!r} contains ';', which separates the parts of an st: model; "
                                            "remove it")
            parts.append(f"{key}={value}")
    return ";".join(parts)


def parse_st(name: str) -> tuple[str, dict]:
    """(location, {setting: value}) of an ``st:`` spec."""
    location, *parts = name[len(PREFIX):].split(";")
    if not location.strip():
        raise RequestError("model", "names no location; write st:HUB_ID or st:FOLDER", value=name)
    settings: dict = {}
    for part in parts:
        key, equals, value = part.partition("=")
        if not equals or key.strip() not in KEYS:
            raise RequestError("model", f"part {part!r} is not KEY=VALUE with KEY one of {', '.join(KEYS)}", value=name)
        settings[KEYS[key.strip()]] = value
    return location.strip(), settings


def st_settings(name: str) -> tuple[dict, str, str, dict | None]:
    """(dense family settings, label, role, identity) of an ``st:`` spec."""
    location, settings = parse_st(name)
    role = settings.pop("role", None)
    label = settings.pop("label", None)
    if label is not None and not label.strip():
        raise RequestError("model", "label= is empty; give the name tables should show, or leave it out", value=name)
    query = settings.get("query_template", "{query}")
    role = role or ("instructed" if "{instruction}" in query else "agnostic")
    folder = Path(location).expanduser()
    if folder.is_dir():
        location = str(folder.resolve())
        identity = folder_identity(folder)
    elif "/" in location and (location.startswith((".", "/", "~")) or folder.suffix):
        raise RequestError("model", f"folder {location} not found; give a sentence-transformers folder or a hub id",
                           value=name)
    else:
        identity = {"hub_id": location, "revision": settings["revision"]} if settings.get("revision") else None
    return ({"model": location, **settings}, label.strip() if label else f"{PREFIX}{Path(location).name or location}",
            role, identity)


def run_name_of(name: str) -> str:
    """A model's part of a run name: its registry name by the parts' rule (`evalkit.core.names.run_part`:
    itself when plain, without ``--`` and not ending as a derived name), or for an ``st:`` spec
    ``st-`` and a slug of its location and a digest of the whole spec (a registry name of that form is
    derived again by `run_part`, so the two never meet). A name no folder can hold (``bm 25``, ``a/b``)
    stays as it is: the run store refuses it in one line when the run is bound, before any work."""
    if not is_st(name):
        return run_part(name) if is_storable(name) else name
    location, _ = parse_st(name)
    return "st-" + labelled(Path(location).name or location, name, "model")  # the kit's one naming rule
