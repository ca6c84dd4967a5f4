"""`evalkit run` end to end on real CSFCube queries with a tiny local model."""

from __future__ import annotations

import json

import pytest

from evalkit import csfcube
from evalkit.errors import KitError
from evalkit.evaluation import per_query
from evalkit.runner import RunSettings, execute
from evalkit.runs import load_run, official_path
from tiny_models import build_sentence_transformer, build_tiny_lm

SEEDS = ("929877", "3264891")  # two seeds annotated for two facets each


@pytest.fixture(scope="module")
def data():
    return csfcube.load()


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
    }}}}))
    return path


@pytest.fixture(autouse=True)
def env(registry_file, tmp_path, monkeypatch):
    monkeypatch.setenv("EVALKIT_MODELS", str(registry_file))
    monkeypatch.setenv("EVALKIT_CACHE", str(tmp_path / "cache"))


def run(data, out, **kwargs):
    settings = RunSettings(**{"model": "tiny", "profile": "test", "seeds": SEEDS, **kwargs})
    return execute(settings, out, data)


def test_same_run_twice_gives_byte_identical_files(data, tmp_path):
    run(data, tmp_path / "a")
    run(data, tmp_path / "b")
    names = sorted(p.name for p in (tmp_path / "a").iterdir())
    assert len(names) == 5  # three facet files, TREC run, sidecar
    for name in names:
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()


def test_run_files_are_read_by_evaluate_and_the_sidecar_records_the_settings(data, tmp_path):
    sidecar = json.loads(run(data, tmp_path, variant="definition").read_text())
    assert sidecar["run"] == "tiny--definition"
    assert sidecar["instructions"]["method"].startswith("Retrieve scientific papers with a similar method")
    assert sidecar["protocol"] == "pool" and sidecar["queries"] == 4
    assert {"data_sha256", "kit_version", "random_seed", "settings"} <= set(sidecar)
    assert sidecar["settings"]["revision"]
    table = per_query(data, load_run(tmp_path, "tiny--definition"))
    assert len(table) == 4
    seeds_json = json.loads(official_path(tmp_path, "tiny--definition", "background").read_text())
    assert set(seeds_json) == set(SEEDS)


def test_instruction_agnostic_model_has_p_mrr_exactly_zero(data, tmp_path):
    run(data, tmp_path)
    pmrr = per_query(data, load_run(tmp_path, "tiny"))["p-mrr"]
    assert len(pmrr.dropna()) == 4 and (pmrr == 0.0).all()


def test_probe_reads_the_instruction(data, tmp_path):
    run(data, tmp_path, model="tiny-probe")
    pmrr = per_query(data, load_run(tmp_path, "tiny-probe"))["p-mrr"]
    assert (pmrr != 0.0).any()


def test_pooled_protocol_reranks_the_first_stage_top_depth_without_the_seed(data, tmp_path):
    run(data, tmp_path, model="bm25", protocol="pooled")
    ranking = load_run(tmp_path, "bm25")
    for qid, scores in ranking.items():
        assert len(scores) == 30
        assert qid.split("_")[0] not in scores


@pytest.mark.parametrize("field, value, message", [
    ("variant", "nope", "choose one of base, generic"),
    ("protocol", "nope", "choose one of pool, pooled, full"),
    ("model", "nope", "choose one of tiny, tiny-probe, bm25, tiny-oracle, tiny-prp"),
    ("seeds", ("123",), "unknown seed 123"),
])
def test_bad_settings_get_one_line_errors(data, tmp_path, field, value, message):
    with pytest.raises(KitError, match=message):
        run(data, tmp_path, **{field: value})
    assert not (tmp_path / "csfcube-tiny.json").exists()


def write_corpus(path, papers):
    """A small corpus in the abstracts-preds format, zipped."""
    import zipfile

    lines = [json.dumps({"paper_id": p.pid, "title": p.title, "abstract": [s.text for s in p.sentences],
                         "pred_labels": [f"{s.facet}_label" for s in p.sentences]}) for p in papers]
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("abstracts-preds.jsonl", "\n".join(lines) + "\n")
    return path


def test_full_protocol_streams_the_corpus_and_matches_exact_search(data, tmp_path):
    from evalkit.models import registry
    from evalkit.protocols import top_candidates
    from evalkit.runner import selected_queries
    from evalkit.instructions import make_request

    pids = sorted({pid for qid in selected_queries(data, SEEDS) for pid in data.queries[qid].pool} | set(SEEDS))
    papers = [data.papers[pid] for pid in pids if pid in data.papers]
    corpus = write_corpus(tmp_path / "abstracts-preds.zip", papers)
    sidecar = json.loads(run(data, tmp_path / "out", protocol="full", corpus=str(corpus), depth=10).read_text())
    assert sidecar["corpus_size"] == len(papers) and sidecar["depth"] == 10
    ranking = load_run(tmp_path / "out", "tiny")
    first = registry.build(registry.spec("tiny", "test"))
    for qid, scores in ranking.items():
        query = data.queries[qid]
        expected = top_candidates(first, make_request(data.papers[query.seed], query.facet, "base"), papers, 10)
        assert set(scores) == {p.pid for p in expected}
        assert query.seed not in scores


def test_full_protocol_errors(data, tmp_path):
    with pytest.raises(KitError, match="needs --corpus"):
        run(data, tmp_path, protocol="full")
    with pytest.raises(KitError, match="corpus file not found"):
        run(data, tmp_path, protocol="full", corpus=str(tmp_path / "missing.zip"))
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"paper_id": "1", "title": "t", "abstract": ["a"]}\nnot json\n')
    with pytest.raises(KitError, match="bad.jsonl:2: malformed corpus record"):
        run(data, tmp_path, protocol="full", corpus=str(bad))


def test_llm_reranker_runs_through_the_registry_and_reorders_only_the_top(data, tmp_path):
    run(data, tmp_path / "first")
    run(data, tmp_path / "llm", model="tiny-prp")
    first, llm = load_run(tmp_path / "first", "tiny"), load_run(tmp_path / "llm", "tiny-prp")
    accounting = json.loads((tmp_path / "llm" / "csfcube-tiny-prp.accounting.json").read_text())
    assert accounting["queries"] == 4 and accounting["comparisons"] > 0
    sidecar = json.loads((tmp_path / "llm" / "csfcube-tiny-prp.json").read_text())
    assert sidecar["accounting_file"] == "csfcube-tiny-prp.accounting.json"
    from evalkit.runs import ranked

    for qid in first:
        before, after = ranked(first[qid]), ranked(llm[qid])
        assert set(after[:3]) <= set(before[:6])  # the LLM's top 3 come from the first stage's top 6
        assert [d for d in after if d not in after[:3]] == [d for d in before if d not in after[:3]]
    again = run(data, tmp_path / "llm2", model="tiny-prp")  # every judgment now comes from the cache
    assert json.loads((tmp_path / "llm2" / "csfcube-tiny-prp.accounting.json").read_text())["prompts_sent"] == 0
    trec = "csfcube-tiny-prp.trec"
    assert (tmp_path / "llm" / trec).read_bytes() == (tmp_path / "llm2" / trec).read_bytes()
    assert again.is_file()


def test_prp_oracle_puts_the_best_graded_of_the_first_stage_top_first(data, tmp_path):
    from evalkit.runs import ranked

    run(data, tmp_path / "first")
    run(data, tmp_path / "oracle", model="tiny-oracle")
    first, best = load_run(tmp_path / "first", "tiny"), load_run(tmp_path / "oracle", "tiny-oracle")
    for qid in first:
        grades = data.queries[qid].grades
        head = ranked(first[qid])[:6]
        top = ranked(best[qid])[:3]
        assert sorted((grades.get(d, 0) for d in top), reverse=True) == \
            sorted((grades.get(d, 0) for d in head), reverse=True)[:3]
        assert [grades.get(d, 0) for d in top] == sorted((grades.get(d, 0) for d in top), reverse=True)
