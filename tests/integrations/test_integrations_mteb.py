"""CSFCube as mteb tasks (`evalkit.integrations.mteb.csfcube_tasks`): ``mteb.evaluate`` runs them
with a tiny local sentence-transformer, and mteb's nDCG@20 and p-MRR equal the kit's for the same
model and the same protocol (pool), on a run without tied scores and on one with many (the tasks
hand mteb the kit's ranking, `KitOrder`)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from tiny_models import build_sentence_transformer

from evalkit import api
from evalkit.core.errors import KitError
from evalkit.data.runs import has_ties

mteb = pytest.importorskip("mteb")
from evalkit.integrations.mteb import csfcube_tasks  # noqa: E402  (needs mteb)

SEED = "929877"  # annotated for background and method: one instruction pair, both ways
ROOT = Path(__file__).resolve().parents[2]


def test_import_evalkit_loads_neither_mteb_nor_ranx():
    code = ("import sys, evalkit, evalkit.api, evalkit.integrations; "
            "print(sorted(m for m in ('mteb', 'ranx') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.strip() == "[]"


def test_the_tasks_hold_the_protocols_pools_and_judgments(collection):
    pool, pairs = csfcube_tasks(collection, seeds=["8781666"])
    pool.load_data()
    split = pool.dataset["default"]["test"]
    qid = "8781666_background"
    assert "8781666" not in split["top_ranked"][qid] and "8781666" not in split["relevant_docs"][qid]
    assert split["top_ranked"][qid] == [d.doc_id for d in collection.candidates_of(qid)]
    query = next(q for q in split["queries"] if q["id"] == qid)
    assert query["text"] == collection.queries[qid].text and query["instruction"] == collection.queries[qid].instruction
    released, _ = csfcube_tasks(collection, seeds=["8781666"], protocol="released")
    released.load_data()
    assert released.dataset["default"]["test"]["relevant_docs"][qid]["8781666"] == 3
    # mteb keys its result cache by task name: other settings or data, another name
    assert pool.metadata.name.startswith("CSFCubeFacetReranking-pool-base-")
    assert released.metadata.name.startswith("CSFCubeFacetReranking-released-base-")
    assert csfcube_tasks(collection, seeds=["8781666"])[0].metadata.name == pool.metadata.name
    assert csfcube_tasks(collection, seeds=["929877"])[0].metadata.name != pool.metadata.name
    pairs.load_data()
    assert set(pairs._split_data["changed"]) == set(collection.select(
        [q for q in collection.queries if q.startswith("8781666_")]).pairs)


def test_bad_arguments_are_refused_in_one_line(collection):
    with pytest.raises(KitError, match="rerank the judged pools"):
        csfcube_tasks(collection, protocol="full")
    with pytest.raises(KitError, match="no seed"):
        csfcube_tasks(collection, seeds=["1"])


@pytest.mark.parametrize("kwargs, text", [
    ({"seeds": []}, "seeds= names no ids"),
    ({"seeds": "929877"}, "seeds='929877': a str is not a list of ids"),
    ({"protocol": "bogus"}, "protocol='bogus': choose one of"),
    ({"variant": "nope"}, "variant='nope': csfcube has the variants base, "),
    ({"variant": ["base"]}, "variant=['base']: give one variant name"),
    ({"collection": "csfcube"}, "collection='str': give a kit Collection"),
])
def test_each_bad_argument_is_one_request_error_naming_it(collection, kwargs, text):
    from evalkit.core.errors import RequestError

    with pytest.raises(RequestError) as raised:
        csfcube_tasks(**{"collection": collection, **kwargs})
    assert str(raised.value).startswith(text) and "\n" not in str(raised.value)


def test_mteb_evaluate_gives_the_kits_ndcg_and_p_mrr(collection, tmp_path, monkeypatch):
    from sentence_transformers import SentenceTransformer

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("EVALKIT_CACHE", str(tmp_path / "cache"))
    # reads a whole query, instruction included (mteb appends it after the seed's abstract)
    model = SentenceTransformer(str(build_sentence_transformer(tmp_path, max_seq_length=1024)), device="cpu")
    results = mteb.evaluate(model, tasks=csfcube_tasks(collection, seeds=[SEED]), cache=None,
                            show_progress_bar=False, co2_tracker=False)
    scores = {r.task_name.split("-")[0]: r.scores["test"][0] for r in results.task_results}

    kit = api.evaluate(model, "csfcube", name="tiny", revision="1", query_template="{query} {instruction}",
                       seeds=[SEED], measures=["nDCG@20", "p-MRR"], aggregate="mean", runs_dir=tmp_path / "runs")
    table = kit.per_query.loc["base"]
    assert not any(has_ties(docs) for docs in _stored_run(kit).values())  # the tie rules cannot apply
    # mteb rounds its retrieval scores to 5 decimals
    assert scores["CSFCubeFacetReranking"]["ndcg_at_20"] == pytest.approx(table["nDCG@20"].mean(), abs=5e-6)
    assert scores["CSFCubeFacetInstructionPairs"]["p-MRR"] == pytest.approx(table["p-MRR"].dropna().mean(),
                                                                            abs=1e-9)
    assert abs(table["p-MRR"].dropna().mean()) > 1e-3  # the instruction moved the ranking: a real check


def _stored_run(result):
    from evalkit.data.runs import read_trec

    return read_trec(Path(result.runs["base"]) / "run.trec")


def test_on_tied_scores_mteb_gives_the_kits_figures(collection, tmp_path, monkeypatch):
    """A model reading one word piece of each text ties many candidates: mteb's own rule (pytrec_eval,
    document id descending) gave other figures; the tasks hand mteb the kit's ranking (`KitOrder`)."""
    from sentence_transformers import SentenceTransformer

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("EVALKIT_CACHE", str(tmp_path / "cache"))
    model = SentenceTransformer(str(build_sentence_transformer(tmp_path, max_seq_length=1)), device="cpu")
    tasks = csfcube_tasks(collection, seeds=[SEED])[:1]
    results = mteb.evaluate(model, tasks=tasks, cache=None, show_progress_bar=False, co2_tracker=False)
    ndcg = results.task_results[0].scores["test"][0]["ndcg_at_20"]
    kit = api.evaluate(model, "csfcube", name="one-piece", revision="1", query_template="{query} {instruction}",
                       seeds=[SEED], measures=["nDCG@20"], aggregate="mean", runs_dir=tmp_path / "runs")
    assert all(has_ties(docs) for docs in _stored_run(kit).values())  # the tie rule decides the figures
    assert ndcg == pytest.approx(kit.per_query.loc["base", "nDCG@20"].mean(), abs=5e-6)


class _Search:
    """A stand-in for mteb's search wrapper: gives the results it holds."""

    def __init__(self, results):
        self.results = results

    def search(self, queries, **kwargs):
        return self.results


@pytest.mark.parametrize(("results", "text"), [
    ({"q1": {"d1": float("nan"), "d2": 1.0}, "q2": {"d1": 1.0}}, "query q1: document d1 has the score nan"),
    ({"q1": {"d1": 1.0}}, "the model gave no ranking for query q2; rank every query"),
    ({"q1": {}, "q2": {"d1": 1.0}}, "query q1 ranks no document")])
def test_what_mteb_is_handed_is_a_run_the_kit_takes(results, text):
    from evalkit.integrations.mteb import KitOrder

    with pytest.raises(KitError, match=text):
        KitOrder(_Search(results)).search({"id": ["q1", "q2"]})
    tied = KitOrder(_Search({"q1": {"d2": 1.0, "d1": 1.0, "d3": 2.0}, "q2": {"d1": 0.5}})).search({"id": ["q1", "q2"]})
    assert tied == {"q1": {"d3": 3.0, "d1": 2.0, "d2": 1.0}, "q2": {"d1": 1.0}}  # n..1 by the kit's tie rule
