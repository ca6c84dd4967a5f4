"""One registry pattern (`evalkit.core.declarations`) for measures, collections and model families,
as a property of every registered item of the three: each of the kit's is a value declared in a
module of its package and listed once; each is found by its key and read by the parts that use
it; registering it again does nothing; another value under its key, or unregistering it, is one
`DeclarationError` line; a user's declaration joins last and leaves again."""

from __future__ import annotations

import dataclasses
import importlib
import pkgutil

import pytest

from evalkit import datasets
from evalkit.core.errors import DeclarationError
from evalkit.datasets.scheme import Scheme
from evalkit.evaluation.measures import BUILT_IN, MeasureSpec, parse
from evalkit.evaluation.measures import registry as measure_registry
from evalkit.models import families
from evalkit.models import registry as model_registry
from evalkit.models.family import Family

# kind -> (its registry, the package declaring the kit's, the declaration class, a field to change)
KINDS = {"measure": (measure_registry.DECLARED, "evalkit.evaluation.measures", MeasureSpec, {"help": "other"}),
         "scheme": (datasets.DECLARED, "evalkit.datasets", Scheme, {"help": "other"}),
         "family": (model_registry.KIT_DECLARED, "evalkit.models.families", Family, {"build": print})}
LISTS = {"measure": BUILT_IN, "scheme": datasets.KIT_SCHEMES, "family": families.ALL}  # the registration lists
ITEMS = [(kind, item) for kind, (declared, *_) in KINDS.items() for item in declared.kit]


def _label(case) -> str:
    kind, item = case
    return f"{kind}-{KINDS[kind][0].label(item)}"


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_the_kits_declarations_are_the_values_its_modules_declare_each_listed_once(kind):
    """A declaration left out of the registration list, or listed from elsewhere, fails here."""
    declared, package, kind_class, _ = KINDS[kind]
    found = {}
    for info in pkgutil.iter_modules(importlib.import_module(package).__path__):
        module = importlib.import_module(f"{package}.{info.name}")
        found.update({id(v): v for v in vars(module).values() if isinstance(v, kind_class)})
    assert sorted(map(id, declared.kit)) == sorted(found)
    assert declared.kit == LISTS[kind] and declared.values()[:len(declared.kit)] == declared.kit  # in list order
    assert len({declared.key(item) for item in declared.kit}) == len(declared.kit)


@pytest.mark.parametrize("case", ITEMS, ids=_label)
def test_every_registered_item_is_found_read_and_kept(case):
    kind, item = case
    declared, _, _, change = KINDS[kind]
    assert declared.get(declared.key(item)) is item and declared.register(item) is item
    before = declared.values()
    other = dataclasses.replace(item, **change)
    for refused in (lambda: declared.register(other), lambda: declared.unregister(item)):
        with pytest.raises(DeclarationError) as caught:
            refused()
        assert "\n" not in str(caught.value) and str(caught.value).startswith(f"{kind} {declared.label(item)!r}: ")
    assert declared.values() == before
    if kind == "measure":  # the parser reads it by its name
        name = item.family if item.cutoff == "forbids" else f"{item.family}{item.separator}5"
        assert parse(name).spec is item
    elif kind == "scheme":  # a spec names it, the help lists it
        assert datasets.scheme_of(f"{item.name}:x") is item and item.help_lines()[0] in datasets.dataset_help()
    else:  # the process's registry builds entries with it; its settings are declared
        assert model_registry.current().family(item.name) is item and item.settings is not None


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_a_users_declaration_joins_last_and_leaves(kind):
    declared, _, _, change = KINDS[kind]
    mine = dataclasses.replace(declared.kit[0], **{"name" if kind != "measure" else "family": "mine", **change})
    kit = declared.values()
    with declared.registered(mine):
        assert declared.values() == (*kit, mine) and declared.get(declared.key(mine)) is mine
    assert declared.values() == kit
