"""`evalkit run` end to end on real CSFCube queries with tiny local models, and the settings checks."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tiny_models import build_sentence_transformer, build_tiny_lm

from evalkit.core.errors import KitError
from evalkit.data.collection import Collection, Document, Query, Sentence
from evalkit.data.runs import ranked, read_trec
from evalkit.data.runstore import ACCOUNTING, RANKING, SIDECAR
from evalkit.evaluation.evaluate import PMRR, per_query
from evalkit.models import registry
from evalkit.pipeline.runner import Reuse, RunSettings, bind, obtain, queries_of

SEEDS = ("929877", "3264891")  # two seeds annotated for two facets each


@pytest.fixture(scope="module")
def qids(collection):
    chosen = tuple(qid for qid, q in collection.queries.items() if q.seed.doc_id in SEEDS)
    assert len(chosen) == 4
    return chosen


@pytest.fixture(scope="module")
def registry_file(tmp_path_factory):
    folder = tmp_path_factory.mktemp("models")
    tiny = build_sentence_transformer(folder)
    path = folder / "models.yaml"
    path.write_text(json.dumps({"profiles": {"test": {"first_stage": "tiny", "depth": 30, "models": {
        "tiny": {"family": "dense", "model": str(tiny), "role": "agnostic"},
        "tiny-probe": {"family": "dense", "model": str(tiny), "query_template": "{instruction} {query}",
                       "role": "probe"},
        "bm25": {"family": "bm25"},
        "tiny-oracle": {"family": "oracle", "variant": "heapsort", "k": 3, "depth": 6, "first_stage": "tiny",
                        "role": "oracle"},
        "tiny-prp": {"family": "llm", "model": str(build_tiny_lm(folder / "lm")), "method": "prp",
                     "variant": "heapsort", "k": 3, "depth": 6, "first_stage": "tiny", "role": "reranker"},
        "tiny-aspire": {"family": "multivector", "model": str(tiny), "matching": "maxsim", "role": "aspect"},
    }}}}))
    return path


@pytest.fixture(autouse=True)
def env(registry_file, tmp_path, monkeypatch):
    monkeypatch.setenv("EVALKIT_MODELS", str(registry_file))
    monkeypatch.setenv("EVALKIT_CACHE", str(tmp_path / "cache"))


def run(collection, qids, out, **kwargs):
    settings = RunSettings(**{"model": "tiny", "profile": "test", "queries": qids, **kwargs})
    return obtain(bind(settings, collection, out), Reuse.NEVER).folder


def test_run_is_read_by_evaluation_and_the_sidecar_records_the_settings(collection, qids, tmp_path):
    folder = run(collection, qids, tmp_path, variant="definition")
    assert folder.name.startswith("tiny--definition@subset-")
    assert sorted(p.name for p in folder.iterdir()) == [RANKING, SIDECAR]  # no accounting for an embedder
    sidecar = json.loads((folder / SIDECAR).read_text())
    assert sidecar["run"] == "tiny--definition" and sidecar["dataset"] == "csfcube"
    assert any(i.startswith("Retrieve scientific papers with a similar method") for i in sidecar["instructions"])
    assert len(sidecar["instructions"]) == 3  # one per facet of the four queries
    assert sidecar["protocol"] == "pool" and sidecar["files"][RANKING]["queries"] == 4
    assert {"data_sha256", "kit_version", "run_settings", "model_entry", "model_settings"} <= set(sidecar)
    assert sidecar["data_sha256"] == collection.checksum
    assert sidecar["run_settings"]["queries"] == list(qids) and sidecar["run_settings"]["variant"] == "definition"
    assert sidecar["model_settings"]["revision"]
    assert (sidecar["family"], sidecar["role"]) == ("dense", "agnostic")
    ranking = read_trec(folder / RANKING)
    assert set(ranking) == set(qids)
    for qid in qids:  # each query ranks its whole pool, its seed excluded
        assert set(ranking[qid]) == {d.doc_id for d in collection.candidates_of(qid)}
    table = per_query(collection, ranking)
    assert len(table) == 4


def test_instruction_agnostic_model_has_p_mrr_exactly_zero(collection, qids, tmp_path):
    pmrr = per_query(collection, read_trec(run(collection, qids, tmp_path) / RANKING))[PMRR]
    assert len(pmrr.dropna()) == 4 and (pmrr == 0.0).all()


def test_probe_reads_the_instruction(collection, qids, tmp_path):
    pmrr = per_query(collection, read_trec(run(collection, qids, tmp_path, model="tiny-probe") / RANKING))[PMRR]
    assert (pmrr != 0.0).any()


def test_prompt_is_appended_and_names_the_run(collection, qids, tmp_path):
    settings = RunSettings(model="tiny-probe", profile="test", queries=qids, prompt="Be careful.")
    texts = [q.text for q in queries_of(settings, collection)]
    assert texts == [collection.query(qid).text + " Be careful." for qid in qids]
    folder = obtain(bind(settings, collection, tmp_path), Reuse.NEVER).folder
    assert folder.name.startswith("tiny-probe--prompt-") and folder.name != "tiny-probe"
    assert json.loads((folder / SIDECAR).read_text())["run_settings"]["prompt"] == "Be careful."


def test_pooled_protocol_reranks_the_first_stage_top_depth_without_the_seed(collection, qids, tmp_path):
    folder = run(collection, qids, tmp_path, model="bm25", protocol="pooled")
    assert folder.parent.name == "pooled"
    sidecar = json.loads((folder / SIDECAR).read_text())
    assert (sidecar["first_stage"], sidecar["depth"], sidecar["corpus_size"]) == ("tiny", 30, 4205)
    for qid, scores in read_trec(folder / RANKING).items():
        assert len(scores) == 30
        assert qid.split("_")[0] not in scores


def test_released_protocol_ranks_the_seed_in_its_own_pools(collection, tmp_path):
    """Seed 8781666 sits in its own background and result pools; released ranks and judges it."""
    qids = ("8781666_background", "8781666_result")
    folder = run(collection, qids, tmp_path, model="bm25", protocol="released")
    assert folder.parent.name == "released"
    assert json.loads((folder / SIDECAR).read_text())["protocol"] == "released"
    ranking = read_trec(folder / RANKING)
    for qid in qids:
        assert set(ranking[qid]) == set(collection.candidates[qid]) and "8781666" in ranking[qid]
    assert "8781666" not in read_trec(run(collection, qids, tmp_path, model="bm25") / RANKING)[qids[0]]


@pytest.mark.parametrize("field, value, message", [
    ("variant", "nope", "has the variants base, generic"),
    ("protocol", "nope", "choose one of pool, released, pooled, full"),
    ("model", "nope", "choose one of tiny, tiny-probe, bm25, tiny-oracle, tiny-prp, tiny-aspire"),
    ("queries", ("123_method",), "has no query 123_method"),
    ("depth", 0, "give a positive whole number"),
])
def test_bad_settings_get_one_line_errors(collection, qids, tmp_path, field, value, message):
    with pytest.raises(KitError, match=message) as err:
        run(collection, qids, tmp_path / "runs", **{field: value})
    assert "\n" not in str(err.value)
    assert not (tmp_path / "runs").exists()


# --- collections built by hand ---------------------------------------------------------------


def tiny_collection(**changes) -> Collection:
    """Two documents and one plain text query: no seeds, no sentences."""
    docs = {"a": Document("a", "graph networks", "we propose a method"), "b": Document("b", "parsing", "results")}
    parts = {"name": "hand", "documents": docs, "queries": {"q1": Query("q1", "graph method")},
             "qrels": {"q1": {"a": 1, "b": 0}}}
    return Collection(**{**parts, **changes})


def test_check_rejects_qrels_naming_absent_documents():
    tiny_collection().check()
    with pytest.raises(KitError, match="qrels of query q1 name document zz, absent from the corpus"):
        tiny_collection(qrels={"q1": {"a": 1, "zz": 2}}).check()
    with pytest.raises(KitError, match="candidates of query q1 name document zz"):
        tiny_collection(candidates={"q1": ("a", "zz")}).check()
    with pytest.raises(KitError, match="unknown query q9"):
        tiny_collection(pairs={"q1": "q9"}).check()


def test_multivector_model_is_refused_on_a_collection_without_sentences(tmp_path):
    hand = tiny_collection()
    assert not hand.has_sentences()
    with pytest.raises(KitError) as err:
        bind(RunSettings(model="tiny-aspire", dataset="hand", profile="test"), hand, None)
    message = str(err.value)
    assert "\n" not in message
    assert "tiny-aspire cannot rank hand: it needs sentences" in message and "choose another model" in message
    bind(RunSettings(model="tiny", dataset="hand", profile="test"), hand, None)  # an embedder is fine
    with pytest.raises(KitError, match="variant='definition': hand has the variants base"):
        bind(RunSettings(model="tiny", dataset="hand", profile="test", variant="definition"), hand, None)


def test_a_collection_with_sentences_serves_the_multivector_model(collection, qids, tmp_path):
    seed = Document("s", "graph networks", "we propose a method", (Sentence("we propose a method", "method"),))
    hand = tiny_collection(queries={"q1": Query("q1", seed.full_text, "", seed, "method")})
    bind(RunSettings(model="tiny-aspire", dataset="hand", profile="test"), hand, None)
    bound = bind(RunSettings(model="tiny-aspire", dataset="hand", profile="test"), hand, tmp_path)
    folder = obtain(bound, Reuse.NEVER).folder
    assert set(read_trec(folder / RANKING)["q1"]) == {"a", "b"}  # no candidate lists: the whole corpus


# --- the full-corpus protocol ----------------------------------------------------------------


def write_corpus(path, papers):
    """A small corpus in the abstracts-preds format, zipped."""
    import zipfile

    lines = [json.dumps({"paper_id": p.doc_id, "title": p.title, "abstract": [s.text for s in p.sentences],
                         "pred_labels": [f"{s.label}_label" for s in p.sentences]}) for p in papers]
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("abstracts-preds.jsonl", "\n".join(lines) + "\n")
    return path


def test_full_protocol_streams_the_corpus_and_matches_exact_search(collection, qids, tmp_path):
    pids = sorted({d for qid in qids for d in collection.candidates[qid]} | set(SEEDS))
    papers = [collection.documents[pid] for pid in pids]
    corpus = write_corpus(tmp_path / "abstracts-preds.zip", papers)
    folder = run(collection, qids, tmp_path / "out", protocol="full", corpus=str(corpus), depth=10)
    sidecar = json.loads((folder / SIDECAR).read_text())
    assert sidecar["corpus_size"] == len(papers) and sidecar["depth"] == 10
    assert sidecar["corpus"] == "abstracts-preds.zip" and len(sidecar["corpus_sha256"]) == 64
    ranking = read_trec(folder / RANKING)
    first = registry.build(registry.spec("tiny", "test"), collection)
    for qid, scores in ranking.items():
        query = collection.query(qid)
        others = [p for p in papers if p.doc_id != query.seed.doc_id]
        expected = ranked(first.score(query, others))[:10]
        assert set(scores) == set(expected)
        assert query.seed.doc_id not in scores


def test_full_protocol_errors(collection, qids, tmp_path):
    with pytest.raises(KitError, match=r"protocol=.full.: needs corpus=, abstracts-preds.zip from figshare 14796339: "
                                       r"download it with `evalkit data --corpus`"):  # what CSFCube's scheme declares
        run(collection, qids, tmp_path, protocol="full")
    with pytest.raises(KitError, match="corpus file not found"):
        run(collection, qids, tmp_path, protocol="full", corpus=str(tmp_path / "missing.zip"))
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"paper_id": "1", "title": "t", "abstract": ["a"]}\nnot json\n')
    with pytest.raises(KitError, match="bad.jsonl:2: malformed corpus record"):
        run(collection, qids, tmp_path, protocol="full", corpus=str(bad))
    with pytest.raises(KitError, match="must be an embedding model"):
        run(collection, qids, tmp_path, protocol="full", corpus=str(bad), first_stage="bm25")


# --- LLM rerankers and the oracle --------------------------------------------------------------


def test_llm_reranker_runs_through_the_registry_and_reorders_only_the_top(collection, qids, tmp_path):
    first = read_trec(run(collection, qids, tmp_path / "first") / RANKING)
    folder = run(collection, qids, tmp_path / "llm", model="tiny-prp")
    llm = read_trec(folder / RANKING)
    accounting = json.loads((folder / ACCOUNTING).read_text())
    assert accounting["queries"] == 4 and accounting["comparisons"] > 0
    sidecar = json.loads((folder / SIDECAR).read_text())
    assert ACCOUNTING not in sidecar["files"]  # it varies between executions: kept out of the sidecar
    assert sidecar["model_settings"]["first_stage"]["family"] == "dense"
    for qid in first:
        before, after = ranked(first[qid]), ranked(llm[qid])
        assert set(after[:3]) <= set(before[:6])  # the LLM's top 3 come from the first stage's top 6
        assert [d for d in after if d not in after[:3]] == [d for d in before if d not in after[:3]]
    again = run(collection, qids, tmp_path / "llm2", model="tiny-prp")  # every judgment now comes from the cache
    assert json.loads((again / ACCOUNTING).read_text())["prompts_sent"] == 0
    assert (folder / RANKING).read_bytes() == (again / RANKING).read_bytes()
    assert (folder / SIDECAR).read_bytes() == (again / SIDECAR).read_bytes()


def test_prp_oracle_puts_the_best_graded_of_the_first_stage_top_first(collection, qids, tmp_path):
    first = read_trec(run(collection, qids, tmp_path / "first") / RANKING)
    best = read_trec(run(collection, qids, tmp_path / "oracle", model="tiny-oracle") / RANKING)
    for qid in first:
        grades = collection.qrels[qid]
        head = ranked(first[qid])[:6]
        top = ranked(best[qid])[:3]
        assert sorted((grades.get(d, 0) for d in top), reverse=True) == \
            sorted((grades.get(d, 0) for d in head), reverse=True)[:3]
        assert [grades.get(d, 0) for d in top] == sorted((grades.get(d, 0) for d in top), reverse=True)


def test_scoring_code_is_declared_by_imported_modules_and_covers_the_same_files():
    """The run-store key's code list holds imported modules and configuration paths, not path
    strings (old code: strings, which a moved module left naming nothing, silently dropped from the
    digest): a moved module now fails at import. Its files are those the string list named, the
    adapters, the runner and its settings, the retrieval, models, encoders and LLM code and the two
    configuration files, less study/hybrid_curve.py: study code above the runner's layer, which makes
    no stored run (the facet hybrid's scorer is models/hybrid.py)."""
    from types import ModuleType

    from evalkit.pipeline import runner as runner_module

    assert all(isinstance(entry, (ModuleType, Path)) for entry in runner_module.SCORING_CODE)
    assert all(p.is_file() for p in runner_module.SCORING_CODE if isinstance(p, Path))
    root = Path(runner_module.__file__).resolve().parents[1]
    named = ("data/collection.py", "data/protocols.py", "core/hashing.py", "datasets", "pipeline/runner.py",
             "pipeline/settings.py", "retrieval", "models", "encoders", "llm", "config/instructions.yaml",
             "config/llm_templates.yaml")
    expected = {str(p.relative_to(root)) for name in named
                for p in ([root / name] if (root / name).is_file() else (root / name).rglob("*"))
                if p.is_file() and p.suffix in (".py", ".yaml", ".csv")}
    assert {str(p.relative_to(root)) for p in runner_module.scoring_files()} == expected
    assert {"models/hybrid.py", "models/families/dense.py", "datasets/csfcube.py"} <= expected


def test_the_scoring_code_digest_changes_with_any_declared_file(tmp_path):
    """A byte changed in any declared file changes the digest: a package by every .py, .yaml and
    .csv file of its folder, a module by its file, a path as given; other files do not count."""
    import types

    from evalkit.pipeline.runner import code_digest, scoring_files

    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    for rel in ("__init__.py", "sub/scores.py", "sub/table.csv", "sub/notes.txt"):
        (package / rel).write_text("x = 1\n")
    (tmp_path / "alone.py").write_text("y = 2\n")
    (tmp_path / "settings.yaml").write_text("z: 3\n")
    declared = (types.SimpleNamespace(__path__=[str(package)], __file__=str(package / "__init__.py")),
                types.SimpleNamespace(__file__=str(tmp_path / "alone.py")), tmp_path / "settings.yaml")
    names = sorted(str(p.relative_to(tmp_path)) for p in scoring_files(declared))
    assert names == ["alone.py", "pkg/__init__.py", "pkg/sub/scores.py", "pkg/sub/table.csv", "settings.yaml"]
    before = code_digest(declared, tmp_path)
    (package / "sub" / "notes.txt").write_text("changed\n")
    assert code_digest(declared, tmp_path) == before
    for rel in names:
        (tmp_path / rel).write_text((tmp_path / rel).read_text() + "# changed\n")
        assert code_digest(declared, tmp_path) != before, rel
        before = code_digest(declared, tmp_path)


def test_a_study_encodes_each_document_once_for_its_pool_and_pooled_runs(collection, qids, tmp_path, monkeypatch):
    """A run over every query scores the collection's documents by their rows in the collection's
    index (`runner.prepare`), so the pool run and the pooled run (whose first stage builds that
    index) share one encoding, made in the index's batches; the old code encoded every document
    twice (the pool run through the embedding cache, the index in its own batches). A run over
    some queries (a seed's explore page) still encodes only its candidates."""
    from evalkit.models.dense import BiEncoder
    from evalkit.retrieval.embeddings import Encoder

    texts: list[str] = []  # document texts given to the model: an index's batches, or through the cache
    index_vectors, encode = BiEncoder.index_vectors, Encoder.encode
    monkeypatch.setattr(BiEncoder, "index_vectors", lambda self, documents: (
        texts.extend(self.document_string(d) for d in documents), index_vectors(self, documents))[1])
    monkeypatch.setattr(Encoder, "encode", lambda self, batch, desc="texts": (
        texts.extend(batch if desc == "documents" else []), encode(self, batch, desc))[1])
    inputs = {d.full_text for d in collection.documents.values()}  # "{text}": the default document template

    def documents_encoded() -> list[str]:
        return [t for t in texts if t in inputs]

    some = run(collection, qids, tmp_path / "some")
    assert 0 < len(documents_encoded()) < len(inputs) / 4  # the four queries' candidates only
    texts.clear()
    pool = run(collection, None, tmp_path / "every")
    assert sorted(documents_encoded()) == sorted(inputs)  # each document once: the index's batches
    run(collection, None, tmp_path / "every", protocol="pooled")
    assert sorted(documents_encoded()) == sorted(inputs)  # the pooled run's first stage: the same index
    scores = read_trec(pool / RANKING)
    kept = read_trec(some / RANKING)
    assert all(ranked(scores[q]) == ranked(kept[q]) for q in qids)  # the same rankings either way
