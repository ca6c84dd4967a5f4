"""`evalkit export`: CSFCube as BEIR folders, FollowIR instruction pairs and TREC qrels; each export
reads back through the kit's own adapters and gives the kit's numbers on a run (the sample
SPECTER run, and a run whose rankings differ between a seed's two facets, so p-MRR is not 0)."""

from __future__ import annotations

import json
from pathlib import Path

import ir_measures
import pandas as pd
import pytest

from evalkit.cli import main
from evalkit.core.errors import KitError
from evalkit.data.protocols import check_run
from evalkit.data.runs import read_trec, write_trec
from evalkit.datasets import export, load_dataset
from evalkit.datasets.beir import load_beir
from evalkit.datasets.followir import load_followir
from evalkit.evaluation import measures
from evalkit.evaluation.evaluate import PMRR, per_query


@pytest.fixture(scope="module")
def moving_run(collection):
    """Scores that differ per facet (a document's score depends on the query's facet), over each pool."""
    return {qid: {d.doc_id: float((int(d.doc_id) * (1 + len(collection.queries[qid].facet))) % 997)
                  for d in collection.candidates_of(qid)} for qid in collection.queries}


@pytest.fixture(params=["specter", "moving"])
def run(request, specter, moving_run):
    return specter if request.param == "specter" else moving_run


def test_beir_export_reads_back_with_the_same_ndcg(collection, run, tmp_path):
    export.export(collection, "beir", tmp_path / "beir")
    kit = per_query(collection, run, ["nDCG@20"])["nDCG@20"]
    for facet in ("background", "method", "result"):
        beir = load_beir(tmp_path / "beir" / facet)
        assert set(beir.queries) == {q for q in collection.queries if collection.strata[q] == facet}
        assert all(beir.queries[q].text.endswith(collection.queries[q].instruction) for q in beir.queries)
        # the same run file, read back as a TREC run, evaluated on the BEIR collection
        write_trec(tmp_path / f"{facet}.trec", {q: s for q, s in run.items() if q in beir.queries}, "t")
        read = read_trec(tmp_path / f"{facet}.trec")
        check_run(read, beir)
        values = per_query(beir, read, ["nDCG@20"])["nDCG@20"]
        pd.testing.assert_series_equal(values, kit.loc[values.index], check_names=False)


def test_followir_export_reads_back_with_the_same_p_mrr(collection, run, tmp_path):
    folder = export.export(collection, "followir", tmp_path / "followir")
    followir = load_followir(folder)
    assert len(followir.queries) == 2 * len(collection.pairs)
    rekeyed = export.followir_run(run, collection)
    check_run(rekeyed, followir)  # every document within the instance's candidate list
    kit = per_query(collection, run, [])[PMRR]
    values = per_query(followir, rekeyed, ["AP"])
    original = values[values.stratum == "original"][PMRR].rename(lambda q: q.removesuffix("-og"))
    pd.testing.assert_series_equal(original, kit.loc[original.index], check_names=False)
    ap = per_query(collection, run, ["AP"])["AP"]  # binary measures survive the grade shift
    pd.testing.assert_series_equal(values.loc[[f"{q}-og" for q in original.index], "AP"].rename(
        lambda q: q.removesuffix("-og")), ap.loc[original.index], check_names=False)


def test_trec_export_reads_back_with_the_same_numbers(collection, run, tmp_path):
    export.export(collection, "trec", tmp_path / "trec")
    qrels: dict = {}
    for qrel in ir_measures.read_trec_qrels(str(tmp_path / "trec" / "qrels.txt")):
        qrels.setdefault(qrel.query_id, {})[qrel.doc_id] = qrel.relevance
    pairs = export.read_pairs(tmp_path / "trec" / "pairs.tsv")
    assert qrels == collection.judged and pairs == dict(collection.pairs)  # the excluded seed is not judged
    assert "8781666" not in qrels["8781666_background"] and "8781666" in collection.qrels["8781666_background"]
    names = ["nDCG_csfcube@20", "nDCG@20"]
    kit = per_query(collection, run, names)
    values = measures.judged_values(qrels, run, names, collection.relevance_level)
    pd.testing.assert_frame_equal(values, kit[names])
    pd.testing.assert_series_equal(measures.p_mrr(qrels, run, pairs, collection.relevance_level),
                                   kit[PMRR].loc[sorted(pairs)], check_names=False)


def test_moving_run_has_nonzero_p_mrr(collection, moving_run):
    assert per_query(collection, moving_run, [])[PMRR].abs().sum() > 0


def test_export_command_writes_and_refuses_a_non_empty_folder(tmp_path, capsys):
    assert main(["export", "--dataset", "csfcube", "--format", "trec", str(tmp_path / "out")]) == 0
    assert (tmp_path / "out" / "qrels.txt").is_file()
    assert main(["export", "--format", "trec", str(tmp_path / "out")]) == 2
    assert "folder is not empty" in capsys.readouterr().err
    assert main(["export", "--dataset", "beir:x", "--format", "beir", str(tmp_path / "b")]) == 2
    with pytest.raises(KitError, match="unknown export format"):
        export.export(load_dataset("csfcube"), "csv", tmp_path / "c")


def test_trec_export_carries_each_querys_texts_and_the_candidates_texts(collection, tmp_path):
    export.export(collection, "trec", tmp_path / "trec")
    queries = [json.loads(line) for line in (tmp_path / "trec" / "queries.jsonl").read_text().splitlines()]
    assert [q["qid"] for q in queries] == list(collection.queries)
    for row in queries:
        query = collection.queries[row["qid"]]
        assert (row["query"], row["instruction"], row["seed"], row["facet"]) == \
            (query.text, query.instruction, query.seed.doc_id, query.facet)
        assert row["text"] == f"{query.text} {query.instruction}"  # as the beir export's text
    corpus = {d["docno"]: d for d in map(json.loads, (tmp_path / "trec" / "corpus.jsonl").read_text().splitlines())}
    pools = [line.split()[1] for line in (tmp_path / "trec" / "pools.txt").read_text().splitlines()]
    for doc in pools:  # every candidate a run ranks has its title and abstract
        assert (corpus[doc]["title"], corpus[doc]["text"]) == (collection.documents[doc].title,
                                                               collection.documents[doc].text)
    some = corpus[pools[0]]
    assert some["text"] and not some["text"].startswith(some["title"])  # the abstract alone, not title + abstract
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    said = readme.split("`corpus.jsonl` (`docno`, `title`, `text`", 1)[1].split(")", 1)[0]
    assert "abstract alone" in said and "title and abstract" not in said, said  # the README says what text holds


def test_export_help_names_the_formats_and_only_the_datasets_it_exports(capsys):
    with pytest.raises(SystemExit):
        main(["export", "--help"])
    text = capsys.readouterr().out
    listed = text.split("datasets (--dataset SPEC):", 1)[1]
    assert "csfcube" in listed and not any(s in listed for s in ("beir:", "followir:", "instructir:", "irds:"))
    assert all(f"{name}: {files}" in " ".join(text.split()) for name, files in export.FORMATS.items())
    assert "queries.jsonl (query, instruction)" in " ".join(text.split())
