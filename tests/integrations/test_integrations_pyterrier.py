"""CSFCube as a PyTerrier dataset and kit models as PyTerrier transformers
(`evalkit.integrations.pyterrier`): ``pt.Experiment`` on them gives the kit's per-query nDCG@20
(trec's discount), AP and RR, and with ``baseline=0, correction="holm"`` the p-values of the
kit's paired tests (``evalkit evaluate --runs BASELINE --runs A --runs B ...``: Holm over the runs
other than the first, per measure, stratum ``all``); the transformers rank as the kit's stored
runs, tied scores by the kit's rule; and PyTerrier starts no Java for any of it."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from tiny_models import build_sentence_transformer

from evalkit import api, cli
from evalkit.core.errors import KitError
from evalkit.data.runs import has_ties, ranked, read_trec
from evalkit.evaluation.stats import holm
from evalkit.integrations.ir_measures import ir_measures_of

pt = pytest.importorskip("pyterrier", reason="pyterrier is not installed (pip install -e '.[pyterrier]')")
from evalkit.integrations.pyterrier import dataset  # noqa: E402  (needs pyterrier)

ROOT = Path(__file__).resolve().parents[2]
# 16 queries: one- and two-facet seeds, 8781666 among them (its seed is in its own pools as released)
SEEDS = ["10014168", "10695055", "5764728", "51977123", "929877", "3264891", "1936997", "11844559", "8781666",
         "1587"]
MEASURES = ["nDCG@20", "AP", "RR"]
NAMES = {"nDCG@20": "nDCG@20", "AP": "AP(rel=2)", "RR": "RR(rel=2)"}  # the kit's measure -> PyTerrier's column


def overlap(query, documents):
    """Words the query text shares with each candidate: small integers, so many tied scores."""
    words = set(query.text.lower().split())
    return [len(words & set(d.full_text.lower().split())) for d in documents]


def test_import_evalkit_loads_no_pyterrier():
    code = ("import sys, evalkit, evalkit.api, evalkit.integrations; "
            "print(sorted(m for m in ('pyterrier', 'jnius') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.strip() == "[]"


def test_the_dataset_gives_topics_qrels_corpus_and_candidates_as_the_protocol_does(collection):
    kit = dataset(collection, seeds=SEEDS)
    qid = "8781666_background"
    topics = kit.get_topics()
    assert list(topics.columns) == ["qid", "query", "instruction"]
    assert topics["qid"].tolist() == [q for q in collection.queries if q.split("_")[0] in SEEDS]
    row = topics.set_index("qid").loc[qid]
    assert row["query"] == collection.queries[qid].text and row["instruction"] == collection.queries[qid].instruction
    generic = kit.get_topics("generic").set_index("qid").loc[qid, "instruction"]
    assert generic == collection.query(qid, "generic").instruction != row["instruction"]

    qrels = kit.get_qrels()
    assert list(qrels.columns) == ["qid", "docno", "label"]
    assert {d: g for _, d, g in qrels[qrels["qid"] == qid].itertuples(index=False)} == collection.judged[qid]
    assert "8781666" not in set(qrels.loc[qrels["qid"] == qid, "docno"])  # pool: the seed neither judged ...
    results = kit.get_results()
    pool = results[results["qid"] == qid]
    assert pool["docno"].tolist() == [d.doc_id for d in collection.candidates_of(qid)]  # ... nor ranked
    assert pool["rank"].tolist() == list(range(len(pool))) and pool["score"].is_monotonic_decreasing
    assert pool["instruction"].iloc[0] == row["instruction"]

    released = dataset(collection, seeds=SEEDS, protocol="released")
    judged = released.get_qrels()
    assert judged[(judged["qid"] == qid) & (judged["docno"] == "8781666")]["label"].tolist() == [3]
    assert "8781666" in set(released.get_results().query("qid == @qid")["docno"])

    corpus = list(kit.get_corpus_iter())
    assert len(corpus) == len(collection.documents)
    first = collection.documents[corpus[0]["docno"]]
    assert corpus[0] == {"docno": first.doc_id, "text": first.full_text, "title": first.title, "abstract": first.text}
    assert [str(m) for m in kit.measures(*MEASURES)] == ["nDCG@20", "AP(rel=2)", "RR(rel=2)"]


def evaluate_argv(runs: dict[str, Path]) -> list[str]:
    """``evalkit evaluate --runs A --runs B ... --json``: paired-test rows, the first run the reference."""
    return ["evaluate", "--dataset", "csfcube", *[a for folder in runs.values() for a in ("--runs", str(folder))],
            "--measures", ",".join(MEASURES), "--aggregate", "mean", "--json"]


def instructed(query, documents):
    """Words the query text and its instruction share with each candidate."""
    words = set(f"{query.text} {query.instruction}".lower().split())
    return [len(words & set(d.full_text.lower().split())) for d in documents]


def stored_run(result):
    return read_trec(Path(result.runs["base"]) / "run.trec")


def assert_the_kits_figures(found, systems, kit_results, topics):
    """Each transformer ranks as the kit's stored run, and PyTerrier's per-query figures are the kit's."""
    for system, result in kit_results.items():
        made = systems[system].transform(topics)
        for qid, docs in stored_run(result).items():
            assert made[made["qid"] == qid]["docno"].tolist() == ranked(docs), (system, qid)
        table = result.per_query.loc["base"]
        for kit_name, pt_name in NAMES.items():
            values = found[(found["name"] == system) & (found["measure"] == pt_name)].set_index("qid")["value"]
            assert set(values.index) == set(table.index)
            for qid, value in table[kit_name].items():
                assert values[qid] == pytest.approx(value, abs=1e-9), (system, kit_name, qid)


def test_experiment_gives_the_kits_figures_and_paired_tests(collection, tmp_path, monkeypatch, capsys, cached_data):
    monkeypatch.setenv("EVALKIT_CACHE", str(tmp_path / "cache"))
    kit = dataset(collection, seeds=SEEDS)
    topics, qrels = kit.get_topics(), kit.get_qrels()
    systems = {
        "bm25": kit.retriever("bm25"),  # a registry model; the baseline
        "overlap": kit.retriever(overlap),  # a score(query, documents) callable, many tied scores
        "instructed": kit.candidates() >> kit.reranker(instructed),  # reranking the pools, reading the instruction
    }
    found = pt.Experiment(list(systems.values()), topics, qrels, kit.measures(*MEASURES), names=list(systems),
                          perquery=True)
    tests = pt.Experiment(list(systems.values()), topics, qrels, kit.measures(*MEASURES), names=list(systems),
                          baseline=0, correction="holm").set_index("name")
    assert not pt.java.started() and "jnius" not in sys.modules  # PyTerrier's core: no Java

    options = dict(seeds=SEEDS, measures=MEASURES, aggregate="mean", runs_dir=tmp_path / "runs")
    kit_results = {"bm25": api.evaluate("bm25", "csfcube", **options),
                   "overlap": api.evaluate(overlap, "csfcube", name="overlap", revision="1", **options),
                   "instructed": api.evaluate(instructed, "csfcube", name="instructed", revision="1", **options)}
    assert_the_kits_figures(found, systems, kit_results, topics)
    for system, result in kit_results.items():
        for kit_name, pt_name in NAMES.items():
            assert tests.loc[system, pt_name] == pytest.approx(result.table.loc[("base", kit_name), "all"], abs=1e-9)
    assert any(has_ties(docs) for docs in stored_run(kit_results["overlap"]).values())  # the tie rule mattered

    # the kit's paired tests of the same runs, bm25 first: evalkit evaluate --runs bm25 --runs overlap --runs instructed
    capsys.readouterr()
    assert cli.main(evaluate_argv({s: Path(r.runs["base"]) for s, r in kit_results.items()})) == 0
    rows = pd.DataFrame(json.loads(capsys.readouterr().out)["rows"])
    rows = rows[rows["stratum"] == "all"]
    for kit_name, pt_name in NAMES.items():
        # PyTerrier's baseline=0 family: each system against the baseline; the kit's rows hold those
        # pairs' p (its own p_holm adjusts over every pair of runs, the table's marks: 3 pairs here)
        against = rows[(rows["measure"] == kit_name) & (rows["against"] == "bm25")].set_index("run")
        p = {system: against.loc[system, "p"] for system in ("overlap", "instructed")}
        assert all(0 < value < 1 for value in p.values())
        assert (against.loc[list(p), "p_holm"] >= pd.Series(holm(p))).all()  # a larger family adjusts more
        for system, adjusted in holm(p).items():
            assert tests.loc[system, f"{pt_name} p-value"] == pytest.approx(p[system], rel=1e-9, abs=1e-15)
            assert tests.loc[system, f"{pt_name} p-value corrected"] == pytest.approx(adjusted, rel=1e-9, abs=1e-15)


def test_a_sentence_transformer_reranks_as_the_kit_runs_it(collection, tmp_path, monkeypatch):
    from sentence_transformers import SentenceTransformer

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("EVALKIT_CACHE", str(tmp_path / "cache"))
    tiny = SentenceTransformer(str(build_sentence_transformer(tmp_path)), device="cpu")
    encoded = []  # texts per encode call (counted on the library's class: the object's fingerprint is unchanged)
    encode = SentenceTransformer.encode
    monkeypatch.setattr(SentenceTransformer, "encode", lambda self, texts, **kw: encoded.append(len(texts))
                        or encode(self, texts, **kw))
    template = "{instruction} {query}"  # the tiny model reads 64 tokens: the instruction first
    kit = dataset(collection, seeds=["929877"])
    topics, qrels = kit.get_topics(), kit.get_qrels()
    systems = {"tiny": kit.candidates() >> kit.reranker(tiny, query_template=template, revision="1")}
    found = pt.Experiment(list(systems.values()), topics, qrels, kit.measures(*MEASURES), names=list(systems),
                          perquery=True)
    assert encoded
    encoded.clear()
    result = api.evaluate(tiny, "csfcube", name="tiny", revision="1", query_template=template, seeds=["929877"],
                          measures=MEASURES, aggregate="mean", runs_dir=tmp_path / "runs")
    # the kit's run read the vectors the transformer cached under the object's identity: the same
    # vectors, so the same scores (vectors encoded in other batches differ in the last bits)
    assert encoded == []
    assert not any(has_ties(docs) for docs in stored_run(result).values())
    assert_the_kits_figures(found, systems, {"tiny": result}, topics)


def tied(query, documents):
    return [1.0] * len(documents)


def test_the_kits_tie_rule_reaches_pyterrier(collection, tmp_path, monkeypatch):
    # every candidate tied: the kit ranks by document id ascending, pytrec_eval (PyTerrier's
    # evaluation) by id descending; keep_scores=True hands PyTerrier the raw scores, and its own rule
    monkeypatch.setenv("EVALKIT_CACHE", str(tmp_path / "cache"))
    kit = dataset(collection, seeds=["929877"])
    topics, qrels, measure = kit.get_topics(), kit.get_qrels(), kit.measures("nDCG@20")
    ours = kit.retriever(tied)
    raw = kit.retriever(tied, keep_scores=True)
    made = ours.transform(topics)
    qid = topics["qid"].iloc[0]
    assert made[made["qid"] == qid]["docno"].tolist() == sorted(d.doc_id for d in collection.candidates_of(qid))
    assert made[made["qid"] == qid]["score"].is_monotonic_decreasing
    assert raw.transform(topics)["score"].eq(1.0).all()
    kit_values = api.evaluate(tied, "csfcube", name="tied", revision="1", seeds=["929877"], measures=["nDCG@20"],
                              aggregate="mean", runs_dir=tmp_path / "runs").per_query.loc["base", "nDCG@20"]
    found = pt.Experiment([ours, raw], topics, qrels, measure, names=["kit", "raw"], perquery=True)
    by = found.set_index(["name", "qid"])["value"]
    for q, value in kit_values.items():
        assert by[("kit", q)] == pytest.approx(value, abs=1e-12)
    assert any(not math.isclose(by[("raw", q)], v, abs_tol=1e-6) for q, v in kit_values.items())


def test_the_reranker_reads_the_frames_query_and_keeps_its_columns(collection):
    kit = dataset(collection, seeds=["929877"])
    seen = []

    def recording(query, documents):
        seen.append((query.qid, query.text, query.instruction, query.seed is not None))
        return [float(len(d.doc_id)) for d in documents]

    reranker = kit.reranker(recording)
    frame = kit.get_results()
    qid = frame["qid"].iloc[0]
    frame = frame[frame["qid"] == qid].head(5).assign(query="rewritten text", extra="kept")
    out = reranker.transform(frame.drop(columns=["instruction"]))
    assert seen[-1] == (qid, "rewritten text", collection.queries[qid].instruction, True)
    assert sorted(out["docno"]) == sorted(frame["docno"]) and set(out["extra"]) == {"kept"}
    assert out["rank"].tolist() == [0, 1, 2, 3, 4]
    assert out["docno"].tolist() == ranked({d: float(len(d)) for d in frame["docno"]})
    reranker.transform(frame.assign(instruction=None))  # an empty instruction cell: no instruction
    assert seen[-1] == (qid, "rewritten text", "", True)
    assert reranker.transform(frame.iloc[:0]).columns.tolist()[-2:] == ["score", "rank"]


def test_bad_requests_are_refused_in_one_line(collection):
    kit = dataset(collection, seeds=["929877"])
    with pytest.raises(KitError, match="choose pool or released"):
        dataset(collection, protocol="pooled")
    with pytest.raises(KitError, match="unknown model"):
        kit.retriever("no-such-model")
    with pytest.raises(KitError, match="registry model"):
        kit.retriever(overlap, name="bm25")
    with pytest.raises(KitError, match="no seed paper"):
        dataset(collection, seeds=["1"])
    reranker = kit.reranker(overlap)
    frame = kit.get_results()
    qid = frame["qid"].iloc[0]
    outside = frame.head(2).assign(docno=["8781666", frame["docno"].iloc[1]])
    with pytest.raises(KitError, match="outside the query's candidate list"):
        reranker.transform(outside)
    with pytest.raises(KitError, match="not in csfcube"):
        reranker.transform(frame.head(1).assign(docno="nope"))
    with pytest.raises(KitError, match="not one of this dataset's queries"):
        kit.retriever(overlap).transform(pd.DataFrame({"qid": ["8781666_background"], "query": ["x"]}))
    with pytest.raises(KitError, match="duplicate candidate .* list each candidate once"):
        reranker.transform(pd.concat([frame.head(1), frame.head(1)]))
    assert qid in set(kit.retriever(overlap).transform(kit.get_topics())["qid"])


def test_a_variants_topics_are_ranked_as_the_kits_run_of_that_variant(collection, tmp_path, monkeypatch):
    monkeypatch.setenv("EVALKIT_CACHE", str(tmp_path / "cache"))
    seeds = ["929877", "3264891", "1936997"]
    base, generic = dataset(collection, seeds=seeds), dataset(collection, seeds=seeds, variant="generic")
    topics = base.get_topics("generic")
    assert topics.equals(generic.get_topics()) and not topics.equals(base.get_topics())
    made = base.retriever(instructed).transform(topics)  # the frame's instructions are what the model reads
    assert made.equals(generic.retriever(instructed).transform(generic.get_topics()))
    result = api.evaluate(instructed, "csfcube", name="instructed", revision="1", seeds=seeds, variants="generic",
                          measures=MEASURES, runs_dir=tmp_path / "runs")
    stored = read_trec(Path(result.runs["generic"]) / "run.trec")
    assert {q: made[made["qid"] == q]["docno"].tolist() for q in stored} == {q: ranked(d) for q, d in stored.items()}
    assert made.groupby("qid")["docno"].apply(list).to_dict() != \
        base.retriever(instructed).transform(base.get_topics()).groupby("qid")["docno"].apply(list).to_dict()


@pytest.mark.parametrize("names", [[], ["nDCG@20", "nDCG@20"], ["NoSuchMeasure"], ["p-MRR"], ["AP", 7]])
def test_measures_are_refused_by_the_requests_rules_as_ir_measures_refuses_them(names):
    """`kit.measures(...)` follows the request's measure rules (none, twice, unknown, kit-only, not a
    name), with the very line `ir_measures_of` (every other front end's rule) gives."""
    kit = dataset("csfcube", seeds=SEEDS[:2])
    with pytest.raises(KitError) as other:
        ir_measures_of(names, kit.collection, kit.protocol)
    with pytest.raises(KitError) as ours:
        kit.measures(*names)
    assert str(ours.value) == str(other.value) and "\n" not in str(ours.value)


class NaNScorer:
    """A kit Scorer object whose first candidate of every query scores NaN (issue 48: ``evaluate()``
    refused it, ``pt.Experiment`` through the kit's transformer reported nDCG@20 0.2613)."""

    def prepare(self, documents):
        pass

    def describe(self):
        return {"kind": "nan"}

    def score(self, query, documents):
        return {d.doc_id: math.nan if i == 0 else float(i) for i, d in enumerate(documents)}


class FewRankings(NaNScorer):
    """Ranks many queries at once, and forgets the last one."""

    def score_many(self, queries, lists):
        return [{d.doc_id: 1.0 for d in docs} for docs in lists][:-1]


def test_a_non_finite_score_is_refused_with_the_line_evaluate_gives(collection, tmp_path, monkeypatch):
    monkeypatch.setenv("EVALKIT_CACHE", str(tmp_path / "cache"))
    with pytest.raises(KitError) as raised:
        api.evaluate(NaNScorer(), "csfcube", name="nan", revision="1", seeds=["929877"], runs_dir=tmp_path / "runs")
    line = str(raised.value)
    assert "score nan is not a finite number" in line and "\n" not in line
    kit = dataset(collection, seeds=["929877"])
    reranker = kit.reranker(NaNScorer())
    for transformer, frame in ((kit.retriever(NaNScorer()), kit.get_topics()), (reranker, kit.get_results())):
        with pytest.raises(KitError) as found:
            transformer.transform(frame)
        assert str(found.value) == line  # the kit's own line, word for word
    for pipeline in (kit.retriever(NaNScorer()), kit.candidates() >> reranker):
        with pytest.raises(KitError, match="score nan is not a finite number"):
            pt.Experiment([pipeline], kit.get_topics(), kit.get_qrels(), kit.measures("nDCG@20"))


def test_a_query_left_without_a_ranking_is_refused(collection):
    kit = dataset(collection, seeds=["929877"])
    with pytest.raises(KitError, match="gave 1 rankings for 2 queries; return one ranking per query"):
        kit.reranker(FewRankings()).transform(kit.get_results())
