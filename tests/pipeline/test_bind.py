"""One bound run (`evalkit.pipeline.runner.bind`): its registry entries, checks, queries, key and
folder computed once, a Python object carried by the spec it binds (no lookup by name in a
process global), and one way to the run (`obtain`) with an explicit reuse policy."""

from __future__ import annotations

import os

import pytest

from evalkit import api, cli
from evalkit.core.errors import KitError
from evalkit.data.collection import Collection, Document, Query
from evalkit.data.runs import ranked
from evalkit.models import registry
from evalkit.models.adhoc import PythonModel
from evalkit.models.family import Family
from evalkit.pipeline import prerequisites, runner
from evalkit.pipeline.runner import Failure, NotRun, Reuse, RunSettings, bind, obtain

QUERIES = ("929877_background", "929877_method")
TEMPLATES = {"query_template": "{query}", "doc_template": "{text}", "empty_instruction_template": "{query}"}


@pytest.fixture(autouse=True)
def env(tmp_path, monkeypatch):
    monkeypatch.delenv("EVALKIT_MODELS", raising=False)
    monkeypatch.setenv("EVALKIT_CACHE", str(tmp_path / "cache"))


def by_length(query, documents):
    return [float(len(d.text)) for d in documents]


def by_shortness(query, documents):
    return [-float(len(d.text)) for d in documents]


def python_model(score, tag: str) -> PythonModel:
    return PythonModel("same-name", score, {"test": tag}, "same-name", "agnostic", TEMPLATES)


def test_two_objects_under_one_name_each_rank_with_their_own(collection, tmp_path):
    """Both runs bound before either is made: each spec carries its object (a registry looked up by
    name at build time would rank both with the object registered last)."""
    settings = RunSettings(model="same-name", queries=QUERIES)
    longest = bind(settings, collection, tmp_path / "a", registry.load().with_object(python_model(by_length, "1")))
    shortest = bind(settings, collection, tmp_path / "b", registry.load().with_object(python_model(by_shortness, "2")))
    assert longest.model.obj.model is by_length and shortest.model.obj.model is by_shortness
    assert longest.key["model_entry"]["settings"]["identity"] == {"test": "1"}  # the entry names it, not the object
    run_b, run_a = obtain(shortest).run, obtain(longest).run
    for qid in QUERIES:
        lengths = {d.doc_id: len(d.text) for d in collection.candidates_of(qid)}
        assert lengths[ranked(run_a[qid])[0]] == max(lengths.values())
        assert lengths[ranked(run_b[qid])[0]] == min(lengths.values())


def test_evaluate_puts_no_object_in_a_process_global(tmp_path):
    """`evaluate` ranks the object it is given; only `register_model` makes a name usable elsewhere."""
    api.evaluate(by_length, name="evaluated-only", revision="1", seeds=["929877"], runs_dir=tmp_path)
    with pytest.raises(KitError, match="unknown model 'evaluated-only'"):
        registry.spec("evaluated-only", "offline")
    name = api.register_model(by_length, "registered-too", revision="1")
    assert registry.spec(name, "offline").obj.model is by_length


def test_the_registry_file_is_read_and_checked_once_per_version(tmp_path, monkeypatch):
    checks = []
    real = registry.check_config
    monkeypatch.setattr(registry, "check_config", lambda path, data, families: checks.append(path) or real(
        path, data, families))
    path = tmp_path / "models.yaml"
    path.write_text("profiles: {t: {models: {bm25: {family: bm25}}}}\n")
    monkeypatch.setenv("EVALKIT_MODELS", str(path))
    process = registry.PROCESS.families  # the process's families, as `registry.spec` reads the file with them
    first = registry.load(process)
    assert registry.load(process) is first and registry.spec("bm25", "t").settings == {} and len(checks) == 1
    path.write_text("profiles: {t: {models: {bm25: {family: bm25, k1: 0.9}}}}\n")
    os.utime(path, ns=(1, 1))  # another version, whatever the clock's resolution
    assert registry.spec("bm25", "t").settings == {"k1": 0.9} and len(checks) == 2


def test_one_fresh_evalkit_run_checks_and_keys_once(tmp_path, monkeypatch, capsys):
    """Measured on the old runner: check_settings 4 times and sidecar_key 3 times per fresh run."""
    counts = {"check_settings": 0, "sidecar_key": 0}
    for name in counts:
        real = getattr(runner, name)

        def counting(*args, _real=real, _name=name):
            counts[_name] += 1
            return _real(*args)

        monkeypatch.setattr(runner, name, counting)
    argv = ["run", "--dataset", "csfcube", "--model", "bm25", "--seeds", "929877", "--runs-dir", str(tmp_path)]
    assert cli.main(argv) == 0
    assert counts == {"check_settings": 1, "sidecar_key": 1}
    assert cli.main(argv) == 0  # reused: bound again, once
    assert counts == {"check_settings": 2, "sidecar_key": 2}


def test_the_reuse_policy(collection, tmp_path, executions):
    bound = bind(RunSettings(model="bm25", queries=QUERIES), collection, tmp_path)
    assert obtain(bound, Reuse.ONLY) is None and not bound.folder.exists()  # nothing stored, nothing computed
    made = obtain(bound)
    assert len(executions) == 1 and made.folder == bound.folder
    assert obtain(bound).run == made.run and len(executions) == 1  # a verified stored run is reused
    assert obtain(bound, Reuse.ONLY).run == made.run and len(executions) == 1
    assert obtain(bound, read=False).run is None and len(executions) == 1  # the folder only: not parsed
    assert obtain(bound, Reuse.NEVER).run == made.run and len(executions) == 2  # computed again


def test_a_model_nothing_pins_is_never_reused(collection, tmp_path, executions):
    unpinned = PythonModel("unpinned", by_length, None, "unpinned", "agnostic", TEMPLATES)
    bound = bind(RunSettings(model="unpinned", queries=QUERIES), collection, tmp_path,
                 registry.load().with_object(unpinned))
    assert not bound.reusable
    obtain(bound)
    obtain(bound)
    assert len(executions) == 2 and obtain(bound, Reuse.ONLY) is None


def test_failures_say_why_or_raise(collection, tmp_path, monkeypatch, executions):
    monkeypatch.setattr(prerequisites, "missing", lambda spec: [
        prerequisites.Missing(spec.name, "weights absent", "fetch them")])
    bound = bind(RunSettings(model="bm25", queries=QUERIES), collection, tmp_path)
    assert obtain(bound, failure=Failure.REASON) == NotRun("not run: weights absent")
    with pytest.raises(KitError, match="bm25: weights absent; fix: fetch them"):
        obtain(bound, failure=Failure.STRICT)
    assert executions == []
    monkeypatch.setattr(prerequisites, "missing", lambda spec: [])
    monkeypatch.setattr(runner, "compute", lambda bound: (_ for _ in ()).throw(KitError("the server died")))
    assert obtain(bound, failure=Failure.REASON) == NotRun("not run: the server died")
    with pytest.raises(KitError, match="the server died"):
        obtain(bound)


def test_two_registries_in_one_process_see_only_their_own_models_and_families():
    """Registries are values: adding an object or a family makes a new one, seen by nothing else
    (the process's registrations included)."""
    words = Family("words-b", lambda settings, profile, collection: None)
    base = registry.load()
    with_a = base.with_object(PythonModel("only-a", by_length, {"test": "a"}, "only-a", "agnostic", TEMPLATES))
    with_b = base.with_family(words)
    assert with_a.knows("only-a", "offline") and with_a.spec("only-a", "offline").obj.model is by_length
    for other in (base, with_b, registry.current()):
        assert not other.knows("only-a", "offline")
        with pytest.raises(KitError, match="unknown model 'only-a'"):
            other.spec("only-a", "offline")
    assert with_b.family("words-b") is words
    assert all(r.family("words-b") is None for r in (base, with_a, registry.current(), registry.load()))


def test_the_process_registrations_give_values_that_later_registrations_leave_alone():
    process = registry.Registrations()
    before = process.registry()
    words = Family("words-p", lambda settings, profile, collection: None)
    process.register_family(words)
    process.register_model(PythonModel("only-p", by_length, {"test": "p"}, "only-p", "agnostic", TEMPLATES))
    after = process.registry()
    assert after.family("words-p") is words and after.knows("only-p", "offline")
    assert before.family("words-p") is None and not before.knows("only-p", "offline")
    assert registry.current().family("words-p") is None  # another process's registrations: not this one's


ORACLE_REGISTRY = """\
profiles:
  t:
    first_stage: bm25
    depth: 5
    models:
      bm25: {family: bm25}
      oracle-bm25: {family: oracle, role: oracle}
      loop-a: {family: oracle, first_stage: loop-b}
      loop-b: {family: oracle, first_stage: loop-a}
"""


def no_lookups(monkeypatch) -> list[str]:
    """Make every way to a registry entry by name raise from now on; the names tried."""
    tried = []

    def refuse(name):
        def refused(*args, **kwargs):
            tried.append(name)
            raise AssertionError(f"{name} looked up after bind")
        return refused

    for name in ("current", "load", "spec", "profile_value", "profile_settings", "model_names"):
        monkeypatch.setattr(registry, name, refuse(name))
    for name in ("spec", "_spec", "resolve", "profile_settings", "profile_value", "family"):
        monkeypatch.setattr(registry.Registry, name, refuse(f"Registry.{name}"), raising=False)
    return tried


@pytest.mark.parametrize("model", ["oracle-bm25", "user-object"])
def test_a_bound_run_looks_nothing_up_after_bind(model, collection, tmp_path, monkeypatch, executions):
    """The model's family and first stage (the profile's, for the oracle), the protocol's first
    stage and the user's object are resolved by `bind`: making the run (its prerequisites checked,
    the first stages built) reads the bound run only. Fails when `build`, `needs`, `identity` or
    the prerequisites look a first stage up by name."""
    path = tmp_path / "models.yaml"
    path.write_text(ORACLE_REGISTRY)
    monkeypatch.setenv("EVALKIT_MODELS", str(path))
    found = registry.load().with_object(PythonModel("user-object", by_length, {"test": "o"}, "user-object",
                                                    "agnostic", TEMPLATES))
    bound = bind(RunSettings(model=model, profile="t", protocol="pooled", depth=5, queries=QUERIES), collection,
                 tmp_path / "runs", found)
    assert bound.first_stage.name == "bm25"
    tried = no_lookups(monkeypatch)
    run = obtain(bound, failure=Failure.STRICT).run
    assert tried == [] and len(executions) == 1 and set(run) == set(QUERIES)
    assert all(len(run[qid]) == 5 for qid in QUERIES)  # the first stage's top 5, reranked
    if model == "user-object":  # ranked by this object: the longest of the first stage's top 5 first
        for qid in QUERIES:
            lengths = {d: len(collection.documents[d].text) for d in run[qid]}
            assert lengths[ranked(run[qid])[0]] == max(lengths.values())


def test_a_first_stage_loop_is_refused_in_one_line(tmp_path, monkeypatch):
    path = tmp_path / "models.yaml"
    path.write_text(ORACLE_REGISTRY)
    monkeypatch.setenv("EVALKIT_MODELS", str(path))
    with pytest.raises(KitError, match=r"model loop-b: its first stages loop \(loop-a -> loop-b -> loop-a\)"):
        registry.spec("loop-a", "t")


def test_the_bound_collection_is_the_one_the_protocol_ranks(collection, tmp_path):
    """``released`` excludes nothing, the other protocols what the collection does; the key keeps
    the identity of the data as given, whatever the protocol."""
    released = bind(RunSettings(model="bm25", protocol="released", queries=QUERIES), collection, tmp_path)
    pool = bind(RunSettings(model="bm25", queries=QUERIES), collection, tmp_path)
    assert collection.exclude and released.collection.exclude == {} and pool.collection.exclude == collection.exclude
    assert released.key["data_sha256"] == pool.key["data_sha256"] == collection.identity


def test_released_ranks_a_whole_corpus_with_nothing_excluded(tmp_path):
    """A collection without candidate lists is ranked over its whole corpus: its excluded
    document is left out on ``pool`` and ranked on ``released``, which judges it."""
    documents = {d: Document(d, f"title {d}", "graph neural networks" if d != "d3" else "graphs")
                 for d in ("d1", "d2", "d3")}
    queries = {"q": Query("q", "graph networks", "")}
    small = Collection("small", documents, queries, {"q": {"d1": 1, "d2": 1}}, exclude={"q": "d1"})
    runs = {protocol: obtain(bind(RunSettings(model="bm25", dataset="small", protocol=protocol), small,
                                  tmp_path)).run for protocol in ("pool", "released")}
    assert set(runs["pool"]["q"]) == {"d2", "d3"} and set(runs["released"]["q"]) == {"d1", "d2", "d3"}
