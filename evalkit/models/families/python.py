"""The ``python`` family: a Python model object registered by the API in this process
(`evalkit.models.adhoc`, `evalkit.models.objects`); it has no registry entry: its identity keys
its runs."""

from __future__ import annotations

from evalkit.core.errors import KitError
from evalkit.data.collection import Collection
from evalkit.models import adhoc
from evalkit.models.base import Scorer
from evalkit.models.family import Family


def build(settings: dict, profile: str, collection: Collection) -> Scorer:
    # lazy (start-up cost): a model family's modules load only when it is built
    from evalkit.models.objects import as_scorer

    settings = dict(settings)
    name = settings.pop("object")
    found = adhoc.registered(name)
    if found is None:
        raise KitError(f"model {name} is a Python object registered in another process; pass the object again")
    model, identity, _, _, templates = found
    return as_scorer(model, name, identity, templates)


FAMILY = Family(adhoc.PYTHON_FAMILY, build, settings=("object", "query_template", "doc_template",
                                                             "empty_instruction_template"))
