"""Dataset adapters (evalkit.datasets) on tiny folders written in tmp_path (tests/fixtures_datasets.py)."""

from __future__ import annotations

import re
import sys
import types
from collections import namedtuple

import pytest
from fixtures_datasets import write_beir, write_followir, write_instructir, write_jsonl, write_qrels

from evalkit.core.errors import KitError
from evalkit.data.collection import Document, Fold, Query
from evalkit.datasets import DATASET_HELP, SCHEMES, load_dataset
from evalkit.datasets.beir import DEV_SAMPLE, load_beir, sample_dev
from evalkit.datasets.followir import collection_name, fetch_followir, load_followir
from evalkit.datasets.instructir import load_instructir
from evalkit.datasets.irds import IR_DATASETS, load_irds


@pytest.fixture
def beir(tmp_path):
    return write_beir(tmp_path / "scifact")


# BEIR ----------------------------------------------------------------------


def test_beir_counts_first_last_records_and_dev_fold(beir):
    data = load_beir(beir)
    assert data.name == "scifact" and len(data.documents) == 6
    assert data.documents["d1"] == Document("d1", "Ozone hole", "CFCs thin the ozone layer over Antarctica.")
    assert data.documents["d6"] == Document("d6", "Fever", "A fever is a temperature above 38 degrees.")
    assert data.documents["d2"].title == ""  # no title in the record
    assert data.queries == {"q1": Query("q1", "ozone layer"), "q2": Query("q2", "organised crime"),
                            "q3": Query("q3", "what is umami"), "q4": Query("q4", "what is a fever")}
    assert data.qrels == {"q1": {"d1": 2, "d2": 1}, "q2": {"d3": 1, "d4": 0}, "q3": {"d5": 1}, "q4": {"d6": 1}}
    assert data.folds == {"dev/test": Fold(dev=("q4",), test=("q1", "q2", "q3"))}  # dev.tsv has no header
    assert data.test_fold_of("q2") == "dev/test" and data.test_fold_of("q4") is None
    assert data.candidates is None and data.relevance_level == 1 and data.measures == ("nDCG@10",)
    assert data.relevant["q2"] == {"d3"} and len(data.candidates_of("q1")) == 6
    assert len(data.checksum) == 64


def test_beir_without_dev_or_train_has_no_folds(tmp_path):
    data = load_beir(write_beir(tmp_path / "b", with_dev=False))
    assert data.folds == {} and sorted(data.queries) == ["q1", "q2", "q3"]


def test_beir_train_sample_is_seeded_and_has_ten_queries(tmp_path):
    first = load_beir(write_beir(tmp_path / "a", with_dev=False, train_queries=15))
    second = load_beir(write_beir(tmp_path / "b", with_dev=False, train_queries=15))
    dev = first.folds["dev/test"].dev
    assert len(dev) == DEV_SAMPLE == 10 and dev == second.folds["dev/test"].dev
    assert set(dev) <= {f"t{i}" for i in range(1, 16)} and first.folds["dev/test"].test == ("q1", "q2", "q3")
    assert sorted(first.queries) == sorted(["q1", "q2", "q3", *dev])  # unsampled train queries left out
    assert dev == tuple(sample_dev([f"t{i}" for i in range(1, 16)]))
    assert sample_dev(["a", "b"]) == ["a", "b"]  # fewer than 10: all of them


def test_beir_dev_split_is_sampled_to_ten_seeded_queries(tmp_path):
    from evalkit.datasets.beir import DEV_SAMPLE, sample_dev

    folder = write_beir(tmp_path / "b", with_dev=False, train_queries=15)
    (folder / "qrels" / "train.tsv").rename(folder / "qrels" / "dev.tsv")  # the same 15 queries as a dev split
    data, again = load_beir(folder), load_beir(folder)
    dev = data.folds["dev/test"].dev
    assert len(dev) == DEV_SAMPLE == 10 and dev == again.folds["dev/test"].dev == tuple(sample_dev(
        [f"t{i}" for i in range(1, 16)]))
    assert sorted(data.queries) == sorted(["q1", "q2", "q3", *dev])  # unsampled dev queries left out
    assert sample_dev([f"t{i}" for i in range(1, 16)], seed=1) != list(dev)  # the seed decides the draw


def test_beir_dev_split_wins_over_train(tmp_path):
    data = load_beir(write_beir(tmp_path / "b", with_dev=True, train_queries=15))
    assert data.folds["dev/test"].dev == ("q4",)


def test_beir_checksum_follows_the_files(tmp_path):
    a, b = write_beir(tmp_path / "a"), write_beir(tmp_path / "b")
    assert load_beir(a).checksum == load_beir(b).checksum
    write_qrels(b / "qrels" / "dev.tsv", [("q4", "d5", 1)])
    assert load_beir(a).checksum != load_beir(b).checksum


@pytest.mark.parametrize("name", ["corpus.jsonl", "queries.jsonl", "qrels/test.tsv"])
def test_missing_file_names_it(beir, name):
    (beir / name).unlink()
    with pytest.raises(KitError, match=f"{name}: file not found"):
        load_beir(beir)


def test_malformed_jsonl_line_names_file_and_line(beir):
    (beir / "queries.jsonl").write_text('{"_id": "q1", "text": "one"}\n{"_id": "q2", "text": \n', encoding="utf-8")
    with pytest.raises(KitError, match=r"queries\.jsonl:2: malformed JSON"):
        load_beir(beir)


def test_record_without_id_names_file(beir):
    write_jsonl(beir / "corpus.jsonl", [{"title": "x", "text": "y"}])
    with pytest.raises(KitError, match=r"corpus\.jsonl:1: record lacks '_id'"):
        load_beir(beir)


def test_duplicate_id_names_file(beir):
    write_jsonl(beir / "corpus.jsonl", [{"_id": "d1", "text": "y"}, {"_id": "d1", "text": "z"}])
    with pytest.raises(KitError, match=r"corpus\.jsonl: duplicate _id d1"):
        load_beir(beir)


def test_bad_grade_names_file_and_line(beir):
    write_qrels(beir / "qrels" / "test.tsv", [("q1", "d1", 1), ("q1", "d2", "high")])
    with pytest.raises(KitError, match=r"test\.tsv:3: score 'high'"):
        load_beir(beir)


def test_judged_query_missing_from_queries(beir):
    write_qrels(beir / "qrels" / "test.tsv", [("q9", "d1", 1)])
    with pytest.raises(KitError, match=r"test\.tsv: query q9 is judged but missing"):
        load_beir(beir)


def test_qrels_naming_an_absent_document(beir):
    write_qrels(beir / "qrels" / "test.tsv", [("q1", "d1", 1), ("q1", "d99", 1)])
    with pytest.raises(KitError, match="scifact: qrels of query q1 name document d99, absent from the corpus"):
        load_beir(beir)


@pytest.mark.parametrize("split", ["dev", "train"])
def test_query_in_two_splits(tmp_path, split):
    folder = write_beir(tmp_path / "b", with_dev=False)
    write_qrels(folder / "qrels" / f"{split}.tsv", [("q4", "d6", 1), ("q2", "d4", 1)])
    with pytest.raises(KitError, match=f"query q2 is judged in both test.tsv and {split}.tsv"):
        load_beir(folder)


# FollowIR ------------------------------------------------------------------


@pytest.fixture
def followir(tmp_path):
    return write_followir(tmp_path / "robust04-instructions")


def test_followir_queries_pairs_strata_candidates(followir):
    data = load_followir(followir)
    assert data.name == "robust04" and data.measures == ("AP@1000", "p-MRR") and len(data.documents) == 6
    assert list(data.queries) == ["301-og", "301-changed", "302-og", "302-changed", "303-og", "303-changed"]
    assert data.queries["301-og"] == Query("301-og", "crime any crime")  # instruction appended after one space
    assert data.queries["302-changed"] == Query("302-changed", "ozone only the protocol", instruction="")
    assert data.pairs == {"301-og": "301-changed", "302-og": "302-changed", "303-og": "303-changed"}
    assert data.strata == {"301-og": "original", "301-changed": "changed", "302-og": "original",
                           "302-changed": "changed", "303-og": "original", "303-changed": "changed"}
    assert data.candidates["301-og"] == data.candidates["301-changed"] == ("d3", "d4", "d1")
    assert data.candidates["302-og"] == ("d1", "d2", "d5")  # a pid list
    assert [d.doc_id for d in data.candidates_of("303-changed")] == ["d5", "d6"]
    assert data.qrels["301-og"] == {"d3": 1, "d4": 1} and data.qrels["301-changed"] == {"d3": 0, "d4": 1}
    assert data.qrels["302-og"] == {"d1": 1, "d2": 2} and data.qrels["302-changed"] == {"d1": 0, "d2": 1}
    assert data.relevant["301-og"] - data.relevant["301-changed"] == {"d3"}  # the changed document
    assert data.relevance_level == 1 and data.folds == {} and len(data.checksum) == 64


@pytest.mark.parametrize("folder, name, measures", [
    ("news21", "news21", ("nDCG@5", "p-MRR")), ("core17-instructions", "core17", ("AP@1000", "p-MRR")),
    ("trec-x", "followir", ("AP@1000", "p-MRR"))])
def test_followir_name_and_measures_from_the_folder(tmp_path, folder, name, measures):
    data = load_followir(write_followir(tmp_path / folder))
    assert (data.name, data.measures) == (name, measures)


def test_followir_instance_pools(followir):
    # top_ranked may list the two instances of a topic separately
    write_jsonl(followir / "top_ranked.jsonl", [
        {"qid": "301-og", "pid": ["d3", "d4"]}, {"qid": "301-changed", "pid": ["d4", "d3"]},
        {"qid": "302", "pid": ["d1", "d2"]}, {"qid": "303", "pid": ["d5"]}])
    data = load_followir(followir)
    assert data.candidates["301-og"] == ("d3", "d4") and data.candidates["301-changed"] == ("d4", "d3")
    assert data.candidates["302-changed"] == ("d1", "d2")


def test_followir_missing_changed_qrels(followir):
    (followir / "qrels_changed" / "test.tsv").unlink()
    with pytest.raises(KitError, match=r"qrels_changed/test\.tsv: file not found"):
        load_followir(followir)


def test_followir_query_without_changed_instruction(followir):
    write_jsonl(followir / "queries.jsonl", [{"_id": "301", "text": "crime", "instruction_og": "x"}])
    with pytest.raises(KitError, match=r"queries\.jsonl:1: record lacks 'instruction_changed'"):
        load_followir(followir)


def test_followir_malformed_top_ranked(followir):
    (followir / "top_ranked.jsonl").write_text('{"qid": "301", "pid": "d1"}\nnot json\n', encoding="utf-8")
    with pytest.raises(KitError, match=r"top_ranked\.jsonl:2: malformed JSON"):
        load_followir(followir)


def test_followir_query_without_candidates(followir):
    write_jsonl(followir / "top_ranked.jsonl", [{"qid": "301", "pid": "d1"}, {"qid": "303", "pid": "d5"}])
    with pytest.raises(KitError, match="no candidates for query 302"):
        load_followir(followir)


def test_followir_candidate_absent_from_corpus(followir):
    write_jsonl(followir / "top_ranked.jsonl", [{"qid": q, "pid": ["d1", "d77"]} for q in ("301", "302", "303")])
    with pytest.raises(KitError, match="candidates of query 301-og name document d77, absent from the corpus"):
        load_followir(followir)


def test_followir_collection_names_and_an_unreachable_hub(monkeypatch, tmp_path):
    import huggingface_hub

    assert collection_name("/data/robust04-instructions") == "robust04" and collection_name("news21") == "news21"
    assert collection_name("/data/trec-x") == "followir"

    def offline(*args, **kwargs):
        raise OSError("no network")

    monkeypatch.setattr(huggingface_hub, "snapshot_download", offline)
    with pytest.raises(KitError, match="cannot fetch jhu-clsp/core17-instructions .*pass its folder"):
        fetch_followir("core17")
    monkeypatch.chdir(tmp_path)  # no folder named core17 here: the name means the hub
    with pytest.raises(KitError, match="cannot fetch jhu-clsp/core17-instructions"):
        load_dataset("followir:core17")


def test_followir_hub_snapshot_takes_the_name_given(monkeypatch, tmp_path):
    import huggingface_hub

    snapshot = write_followir(tmp_path / "0a3efedf")  # a hub snapshot folder is a commit hash
    monkeypatch.setattr(huggingface_hub, "snapshot_download", lambda repo, repo_type: str(snapshot))
    monkeypatch.chdir(tmp_path)
    data = load_dataset("followir:news21")
    assert data.name == "news21" and data.measures == ("nDCG@5", "p-MRR")


# InstructIR ----------------------------------------------------------------


@pytest.fixture
def instructir(tmp_path):
    return write_instructir(tmp_path / "instructir")


def test_instructir_groups_by_query_text(instructir):
    data = load_instructir(instructir)
    assert data.name == "instructir" and len(data.documents) == 6 and len(data.queries) == 3
    assert data.queries["7_2"] == Query("7_2", "what is umami I am a student.")  # query, then instruction
    assert data.queries["8_1"].text == "what is a fever I am a nurse."
    assert data.groups == {"what is umami": ("7_1", "7_2"), "what is a fever": ("8_1",)}
    assert data.qrels == {"7_1": {"d5": 1}, "7_2": {"d6": 1}, "8_1": {"d6": 1}}
    assert data.measures == ("nDCG@10", "robustness@10") and data.candidates is None


def test_instructir_groups_ignore_id_suffixes(instructir):
    # 9_1 shares the query text of 7_1: the group follows the text, not the id prefix.
    records = [{"_id": "7_1", "text": "a [SEP] q"}, {"_id": "9_1", "text": "b [SEP] q"}]
    write_jsonl(instructir / "queries.jsonl", records)
    write_qrels(instructir / "qrels" / "test.tsv", [("7_1", "d1", 1), ("9_1", "d2", 1)])
    assert load_instructir(instructir).groups == {"q": ("7_1", "9_1")}


def test_instructir_query_without_separator(instructir):
    write_jsonl(instructir / "queries.jsonl", [{"_id": "7_1", "text": "no separator here"}])
    write_qrels(instructir / "qrels" / "test.tsv", [("7_1", "d1", 1)])
    with pytest.raises(KitError, match=r"query 7_1 must read '<instruction> \[SEP\] <query>'"):
        load_instructir(instructir)


# ir_datasets ---------------------------------------------------------------

GenericDoc = namedtuple("GenericDoc", ["doc_id", "text"])
BeirTitleDoc = namedtuple("BeirTitleDoc", ["doc_id", "text", "title"])
GenericQuery = namedtuple("GenericQuery", ["query_id", "text"])
TrecQrel = namedtuple("TrecQrel", ["query_id", "doc_id", "relevance", "iteration"])


def fake_ir_datasets(monkeypatch, docs, queries, qrels):
    """Inject a stand-in `ir_datasets` whose load(id) serves the given records; returns the ids loaded."""
    loaded = []

    class Dataset:
        def docs_iter(self):
            return iter(docs)

        def queries_iter(self):
            return iter(queries)

        def qrels_iter(self):
            return iter(qrels)

    def load(name):
        if name.startswith("unknown"):
            raise KeyError(name)
        loaded.append(name)
        return Dataset()

    monkeypatch.setitem(sys.modules, "ir_datasets", types.SimpleNamespace(load=load))
    return loaded


DL_RECORDS = (
    [GenericDoc("p1", "passage one"), GenericDoc("p2", "passage two")],
    [GenericQuery("1", "judged"), GenericQuery("2", "unjudged")],
    [TrecQrel("1", "p2", 3, "0"), TrecQrel("1", "p1", 0, "0")],
)


def test_irds_missing_says_how_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "ir_datasets", None)  # makes `import ir_datasets` fail
    with pytest.raises(KitError, match=r"irds:dl19 needs the ir_datasets package; fix: "
                                       r"pip install 'evalkit\[recipe\]'"):
        load_dataset("irds:dl19")


def test_irds_short_name_is_converted(monkeypatch):
    loaded = fake_ir_datasets(monkeypatch, *DL_RECORDS)
    data = load_irds("dl19")
    assert loaded == [IR_DATASETS["dl19"]] == ["msmarco-passage/trec-dl-2019/judged"]
    assert data.name == "dl19" and data.measures == ("nDCG@10",) and data.relevance_level == 1
    assert data.documents == {"p1": Document("p1", "", "passage one"), "p2": Document("p2", "", "passage two")}
    assert data.queries == {"1": Query("1", "judged")} and data.qrels == {"1": {"p2": 3, "p1": 0}}
    assert data.candidates is None and data.folds == {} and len(data.checksum) == 64
    assert load_irds("dl19").checksum == data.checksum


def test_irds_msmarco_dev_measures_rr(monkeypatch):
    loaded = fake_ir_datasets(monkeypatch, *DL_RECORDS)
    assert load_dataset("irds:msmarco-dev").measures == ("RR@10",)
    assert loaded == ["msmarco-passage/dev/small"]


def test_irds_beir_id_keeps_titles(monkeypatch):
    docs = [BeirTitleDoc("d1", "text one", "Title one"), BeirTitleDoc("d2", "text two", "")]
    loaded = fake_ir_datasets(monkeypatch, docs, [GenericQuery("q1", "a claim")], [TrecQrel("q1", "d1", 1, "0")])
    data = load_dataset("irds:beir/scifact/test")
    assert loaded == ["beir/scifact/test"] and data.name == "beir/scifact/test"
    assert data.documents["d1"] == Document("d1", "Title one", "text one") and data.documents["d2"].title == ""


def test_irds_unknown_id(monkeypatch):
    fake_ir_datasets(monkeypatch, *DL_RECORDS)
    with pytest.raises(KitError, match="unknown ir_datasets id 'unknown/x'"):
        load_dataset("irds:unknown/x")


def test_irds_qrels_naming_an_absent_document(monkeypatch):
    fake_ir_datasets(monkeypatch, DL_RECORDS[0], DL_RECORDS[1], [TrecQrel("1", "p9", 1, "0")])
    with pytest.raises(KitError, match="dl20: qrels of query 1 name document p9, absent from the corpus"):
        load_irds("dl20")


# load_dataset --------------------------------------------------------------


def test_load_dataset_reads_each_scheme(tmp_path):
    assert load_dataset(f"beir:{write_beir(tmp_path / 'scifact')}").name == "scifact"
    assert load_dataset(f"followir:{write_followir(tmp_path / 'news21')}").name == "news21"
    assert load_dataset(f" instructir:{write_instructir(tmp_path / 'iir')} ").name == "instructir"


@pytest.mark.parametrize("scheme", ["beir", "followir", "instructir"])
def test_load_dataset_folder_not_found(monkeypatch, tmp_path, scheme):
    monkeypatch.setitem(sys.modules, "ir_datasets", None)  # never the cause named
    spec = f"{scheme}:{tmp_path / 'x' / 'y'}"
    with pytest.raises(KitError, match="^" + re.escape(f"`{spec}`: folder not found; give ")) as error:
        load_dataset(spec)
    assert "install" not in str(error.value) and "\n" not in str(error.value)


def test_load_dataset_file_is_not_a_folder(beir):
    with pytest.raises(KitError, match="not a folder"):
        load_dataset(f"beir:{beir / 'corpus.jsonl'}")


@pytest.mark.parametrize("spec, message", [
    ("bier:/x", "unknown dataset scheme 'bier'"),
    ("/data/scifact", "no dataset scheme; .*e.g. beir:/data/scifact"),
    ("beir:", "nothing after 'beir:'"),
    ("csfcube:/x", "csfcube takes no folder"),
])
def test_load_dataset_bad_specs(spec, message):
    with pytest.raises(KitError, match=message):
        load_dataset(spec)


def test_dataset_help_lists_every_scheme():
    for scheme in SCHEMES:
        assert scheme in DATASET_HELP
