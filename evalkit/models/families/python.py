"""The ``python`` family: a user's Python model object (`evalkit.models.adhoc.PythonModel`,
`evalkit.models.objects`), held by the model spec a run binds (`evalkit.models.registry.Registry.with_object`);
it has no registry entry: its identity keys its runs."""

from __future__ import annotations

from evalkit.core.errors import RequestError
from evalkit.data.collection import Collection
from evalkit.models import adhoc
from evalkit.models.base import Scorer
from evalkit.models.family import Family


def build(settings: dict, profile: str, collection: Collection) -> Scorer:
    # lazy (start-up cost): a model family's modules load only when it is built
    from evalkit.models.objects import as_scorer

    found = settings.get("object")
    if not isinstance(found, adhoc.PythonModel):  # a spec without its object: read back from a sidecar
        raise RequestError("model", f"model {found} is a Python object of another process; pass the object again")
    return as_scorer(found.model, found.name, found.identity, found.templates)


FAMILY = Family(adhoc.PYTHON_FAMILY, build, settings=("object", "query_template", "doc_template",
                                                             "empty_instruction_template"))
