"""Model families declare themselves (`evalkit.models.family`): a family written in one new file
and registered is built, priced by `evalkit plan`, and its needs, weights, first stage, GPU
dtype and API backends read from its declaration, by the registry, the plan and the
prerequisite checks alike; the kit's own families are one module each, all registered, with the
traits the study relies on; and the modules that read the declarations name no family."""

from __future__ import annotations

import ast
import importlib
from dataclasses import replace
from pathlib import Path

import pytest
import yaml

from evalkit.core.errors import KitError
from evalkit.data.collection import Collection, Document, Query, Sentence
from evalkit.models import families, registry
from evalkit.models.bm25 import BM25
from evalkit.models.dense import BiEncoder
from evalkit.models.family import Family
from evalkit.models.hybrid import FacetHybrid
from evalkit.pipeline import plan, prerequisites, runner
from evalkit.pipeline.runner import RunSettings

ROOT = Path(__file__).resolve().parents[2]

# A whole family in one file, as a user (or the kit) writes it: the class, its builder and its declaration.
TOY = '''
from evalkit.models.family import ENCODING, OPTIONAL, Family


class Toy:
    """Scores a candidate by its title's length; remembers the first stage it was handed."""

    reads_instruction = False

    def __init__(self, first_stage, depth, weights):
        self.first_stage, self.depth, self.weights = first_stage, depth, weights

    def prepare(self, documents):
        pass

    def score(self, query, candidates):
        return {d.doc_id: float(len(d.title)) for d in candidates}

    def describe(self):
        return {"weights": self.weights}


def build(settings, profile, collection, first_stage, depth):
    return Toy(first_stage, depth, settings["model"])


FAMILY = Family("toy", build, {declaration})
'''
DECLARED = ('weighted=True, needs={"sentences"}, first_stage=OPTIONAL, work=ENCODING, gpu_dtype="bfloat16", '
            'api_backends={"remote"}')
PLAIN = "first_stage=OPTIONAL"  # the same builder, every other trait left at its default


def toy_collection(sentences: bool) -> Collection:
    """Two queries whose seeds are split into sentences (or not), three candidates each."""
    docs = {f"d{i}": Document(f"d{i}", "t" * i, "some words") for i in range(1, 5)}
    split = (Sentence("first sentence"), Sentence("second")) if sentences else ()
    queries = {q: Query(q, "seed text", "find", seed=Document(f"seed-{q}", "Seed", "seed text", split))
               for q in ("q1", "q2")}
    return Collection("toys", docs, queries, {"q1": {"d1": 1}, "q2": {"d2": 1}},
                      candidates={"q1": ("d1", "d2", "d3"), "q2": ("d2", "d3", "d4")})


@pytest.fixture
def toy_family(tmp_path, monkeypatch):
    """Writes the toy family's file with a declaration, imports it, and points the registry at a
    profile using it; returns the module and a registry value with the family added (nothing
    registered in the process)."""
    weights = tmp_path / "toy-weights"
    weights.mkdir()
    (weights / "weights.bin").write_bytes(b"\x00\x01")
    models = {"bm25": {"family": "bm25"},
              "toy": {"family": "toy", "model": str(weights)},
              "toy-reranker": {"family": "toy", "model": str(weights), "first_stage": "bm25"},
              "toy-remote": {"family": "toy", "model": "toy-model", "backend": "remote"}}
    path = tmp_path / "models.yaml"
    path.write_text(yaml.safe_dump({"profiles": {"t": {"first_stage": "bm25", "depth": 7, "models": models}}}))
    monkeypatch.setenv("EVALKIT_MODELS", str(path))
    monkeypatch.syspath_prepend(str(tmp_path))

    def declare(declaration: str):
        name = f"toy_family_{tmp_path.name.replace('-', '_')}"  # one module name per test: never a stale import
        (tmp_path / f"{name}.py").write_text(TOY.replace("{declaration}", declaration))
        importlib.invalidate_caches()
        module = importlib.import_module(name)
        return module, registry.load().with_family(module.FAMILY)

    return declare


def test_a_family_declared_in_one_file_is_built_priced_and_read_by_its_declaration(toy_family, monkeypatch):
    toy, models = toy_family(DECLARED)
    spec = models.spec("toy", "t")
    scorer = registry.build(spec, toy_collection(True))
    assert isinstance(scorer, toy.Toy) and scorer.first_stage is None and scorer.depth is None
    reranker = registry.build(models.spec("toy-reranker", "t"), toy_collection(True))
    assert isinstance(reranker.first_stage, BM25) and reranker.depth == 7  # the profile's depth, built by the registry
    # needs: sentences, so a collection whose seeds are not split is refused before anything is built
    assert registry.needs(spec) == {"sentences"}
    runner.bind(RunSettings(model="toy", dataset="toys", profile="t"), toy_collection(True), None, models)
    with pytest.raises(KitError, match="it needs sentences"):
        runner.bind(RunSettings(model="toy", dataset="toys", profile="t"), toy_collection(False), None, models)
    # weighted: the entry must name its weights, and their folder's files key its runs (as the builder's code does)
    pinned = registry.identity(spec)
    assert set(pinned) == {"family_code", "folder"}
    assert pinned["family_code"]["object"].endswith("build")
    # priced as an encoder: every candidate of the two queries once, and the two queries
    monkeypatch.setattr(prerequisites, "gpu_count", lambda: 0)
    collection = toy_collection(True)
    row = plan.row_plan(spec, list(collection.queries.values()), collection, "pool")
    assert row.texts == 4 + 2 and row.hours > 0
    # its GPU dtype, and the backend it declares remote makes an entry an API model (no hub weights to fetch)
    assert prerequisites.gpu_dtype(spec) == "bfloat16"
    remote = models.spec("toy-remote", "t")
    assert prerequisites.is_api(remote) and prerequisites.hub_ids(remote) == []
    assert not prerequisites.is_api(spec)


def test_the_same_builder_without_the_traits_is_read_as_declared(toy_family, tmp_path, monkeypatch):
    """The contrast of the test above: a registry that ignored the declaration would give both
    declarations the same needs, identity, plan and dtype."""
    _, found = toy_family(PLAIN)
    spec = found.spec("toy", "t")
    assert registry.needs(spec) == set()
    runner.bind(RunSettings(model="toy", dataset="toys", profile="t"), toy_collection(False), None, found)
    assert set(registry.identity(spec)) == {"family_code"}  # not weighted: its folder is not read
    monkeypatch.setattr(prerequisites, "gpu_count", lambda: 0)
    collection = toy_collection(True)
    row = plan.row_plan(spec, list(collection.queries.values()), collection, "pool")
    assert row.texts == 0 and row.hours == 0  # scoring only
    assert prerequisites.gpu_dtype(spec) == "float32"
    assert not prerequisites.is_api(found.spec("toy-remote", "t"))


def test_a_weighted_family_refuses_an_entry_without_weights(toy_family, tmp_path, monkeypatch):
    """Even when the registry file was read before the family was registered."""
    path = tmp_path / "no-weights.yaml"
    path.write_text(yaml.safe_dump({"profiles": {"t": {"models": {"toy": {"family": "toy"}}}}}))
    monkeypatch.setenv("EVALKIT_MODELS", str(path))
    assert registry.model_names("t") == ["toy"]  # read (and cached) while no family toy is known
    with pytest.raises(KitError, match="model 'toy' of profile 't' names no 'model'"):
        toy_family(DECLARED)


def test_register_family_takes_a_declaration_and_keeps_the_kits_own():
    for register in (registry.Registrations().register_family, registry.load().with_family):
        with pytest.raises(KitError, match="takes a Family"):
            register(lambda settings, profile, collection: None)
        with pytest.raises(KitError, match="family 'bm25': another family is registered under this name \\(the kit's"):
            register(Family("bm25", lambda settings, profile, collection: None))
    with pytest.raises(KitError, match="was not made by a registry"):  # a spec no registry resolved
        registry.family_of(registry.ModelSpec("m", "offline", "bm25", "M", "probe", {}))
    with pytest.raises(KitError, match="first_stage 'sometimes'.*work 'tokens'"):
        Family("odd", print, first_stage="sometimes", work="tokens")
    with pytest.raises(KitError, match=r"needs \['vectors'\]"):
        Family("odd", print, needs={"vectors"})


def test_the_registry_puts_the_facet_hybrid_over_a_family_that_takes_it():
    """`Family.hybrid`: an entry setting ``hybrid_alpha`` gets the hybrid over its family's scorer,
    the builder seeing the entry's settings without the hybrid's; a family without the trait gets
    the entry's settings as they are and no hybrid (fails when the registry ignores the trait)."""
    base = registry.spec("minilm", "offline")
    mixed = registry.ModelSpec("minilm-h", "offline", base.family, "h", "aspect",
                               {**base.settings, "hybrid_alpha": 0.25, "hybrid_candidate_facet": True})
    scorer = registry.build(registry.load().resolve(mixed), None)
    assert isinstance(scorer, FacetHybrid) and isinstance(scorer.model, BiEncoder)
    assert (scorer.alpha, scorer.candidate_facet) == (0.25, True)
    assert type(registry.build(base, None)) is BiEncoder
    seen = []
    plain = Family("plain", lambda settings, profile, collection: seen.append(settings) or BM25())
    found = registry.load().with_family(plain)
    built = registry.build(found.resolve(registry.ModelSpec("p", "offline", "plain", "P", "probe",
                                                            {"hybrid_alpha": 0.5})), None)
    assert type(built) is BM25 and seen == [{"hybrid_alpha": 0.5}]


def test_the_kit_families_declare_the_traits_the_study_relies_on():
    """The traits as the registry, the plan and costs.yaml held them before families declared
    themselves (WEIGHTED, needs(), plan.EMBEDDERS, costs.yaml gpu_dtype, is_api)."""
    traits = {f.name: (f.weighted, set(f.needs), f.first_stage, f.work, f.gpu_dtype, set(f.api_backends))
              for f in families.ALL}
    # the families whose builders put the facet hybrid over their scorer before the hybrid was a trait
    assert {f.name for f in families.ALL if f.hybrid and f.name in STUDY_TRAITS} == {"dense", "gritlm", "promptriever",
                                                                                      "paper-cls"}
    # the families the study uses; a family added to `ALL` is checked by the properties over every family
    assert {name: traits[name] for name in STUDY_TRAITS} == STUDY_TRAITS


# The study's families and their traits: (weighted, needs, first_stage, work, gpu_dtype, api_backends).
STUDY_TRAITS = {
    "bm25": (False, set(), "none", "scoring", "float32", set()),
    "dense": (True, set(), "optional", "encoding", "float32", set()),
    "multivector": (True, {"sentences"}, "none", "encoding", "float32", set()),
    "gritlm": (True, set(), "optional", "encoding", "bfloat16", set()),
    "promptriever": (True, set(), "optional", "encoding", "bfloat16", set()),
    "paper-cls": (True, set(), "optional", "encoding", "float32", set()),
    "aspire": (True, {"sentences"}, "optional", "encoding", "float32", set()),
    "llm": (True, set(), "always", "prompts", "float32", {"openai"}),
    "oracle": (False, {"qrels"}, "always", "scoring", "float32", set()),
    "python": (False, set(), "none", "scoring", "float32", set()),
}


@pytest.mark.parametrize("module", ["evalkit/models/registry.py", "evalkit/pipeline/plan.py",
                                    "evalkit/pipeline/prerequisites.py"])
def test_the_readers_of_the_declarations_name_no_family(module):
    """The registry, the plan and the prerequisite checks switch on traits, never on a family's name."""
    tree = ast.parse((ROOT / module).read_text())
    for node in ast.walk(tree):  # words that name a family and something else: the role oracle, the study promptriever
        if isinstance(node, ast.Assign) and [getattr(t, "id", None) for t in node.targets] in (["ROLES"],
                                                                                              ["STUDY_KEYS"]):
            node.value = ast.Constant(None)
    names = {f.name for f in families.ALL}
    literals = {node.value for node in ast.walk(tree) if isinstance(node, ast.Constant) and node.value in names}
    assert not literals, f"{module} names families {sorted(literals)}"


def _entry_of(family: Family) -> dict:
    """An entry of `family` holding only settings it reads (its first declared one, if any)."""
    declared = sorted(family.accepted_settings({}) or ())
    return {declared[0]: "x"} if declared else {}


@pytest.mark.parametrize("family", families.ALL, ids=lambda f: f.name)
def test_every_kit_family_refuses_an_unknown_setting_in_one_line_before_building(family):
    """A misspelled key (``batch_sise``) is refused by the one registry rule, the same line for
    every family, and before the builder runs (so no weights load and no default is used silently)."""
    assert family.settings is not None, f"family {family.name} does not declare its settings"
    built = []
    watched = replace(family, build=lambda *a, **k: built.append(a))  # the kit's own, its builder watched
    found = replace(registry.load(), families={**registry.KIT, family.name: watched})
    model = found.resolve(registry.ModelSpec("m", "offline", family.name, "m", "agnostic",
                                             {**_entry_of(family), "batch_sise": 8}))
    with pytest.raises(KitError) as caught:
        registry.build(model, toy_collection(True))
    assert str(caught.value).startswith(f"model m (family {family.name}): no setting 'batch_sise'; its settings are ")
    assert str(caught.value).endswith("; fix the model's entry") and not built


def test_every_entry_of_the_kits_registry_holds_only_settings_its_family_reads():
    for profile in registry.profiles():
        for name in registry.model_names(profile):
            registry.check_entry_settings(registry.spec(name, profile))
