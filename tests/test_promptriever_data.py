"""Loaders of the Promptriever recipe on fixture folders written in tmp_path."""

import json
import sys
import types

import pytest

from evalkit.errors import KitError
from evalkit.promptriever import (
    IR_DATASETS,
    load_beir,
    load_collection,
    load_followir,
    load_instructir,
    load_ir_datasets,
)


def write_jsonl(path, records):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")


def write_qrels(path, rows, header=True):
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = ["query-id\tcorpus-id\tscore"] if header else []
    path.write_text("\n".join(lines + ["\t".join(map(str, r)) for r in rows]) + "\n", encoding="utf-8")


CORPUS = [
    {"_id": "d1", "title": "First", "text": "alpha"},
    {"_id": "d2", "text": "beta"},  # no title
    {"_id": "d3", "title": "Third", "text": "gamma"},
]


@pytest.fixture
def beir(tmp_path):
    write_jsonl(tmp_path / "corpus.jsonl", CORPUS)
    write_jsonl(
        tmp_path / "queries.jsonl",
        [{"_id": "q1", "text": "one"}, {"_id": "q2", "text": "two"}, {"_id": "q3", "text": "three"}],
    )
    write_qrels(tmp_path / "qrels" / "test.tsv", [("q1", "d1", 1), ("q1", "d2", 0), ("q3", "d3", 2)])
    write_qrels(tmp_path / "qrels" / "dev.tsv", [("q2", "d2", 1)], header=False)
    return tmp_path


def test_beir_counts_and_first_last_records(beir):
    corpus, queries, qrels = load_beir(beir)
    assert len(corpus) == 3
    assert corpus["d1"] == {"title": "First", "text": "alpha"}
    assert corpus["d3"] == {"title": "Third", "text": "gamma"}
    assert corpus["d2"]["title"] == ""
    assert queries == {"q1": "one", "q3": "three"}  # only the split's judged queries
    assert qrels == {"q1": {"d1": 1, "d2": 0}, "q3": {"d3": 2}}


def test_beir_split_without_header(beir):
    _, queries, qrels = load_beir(beir, split="dev")
    assert queries == {"q2": "two"} and qrels == {"q2": {"d2": 1}}


def test_load_collection_reads_a_folder(beir):
    assert load_collection(beir) == load_beir(beir)


@pytest.mark.parametrize("name", ["corpus.jsonl", "queries.jsonl", "qrels/test.tsv"])
def test_missing_file_names_it(beir, name):
    (beir / name).unlink()
    with pytest.raises(KitError, match=name):
        load_beir(beir)


def test_malformed_jsonl_line_names_file_and_line(beir):
    path = beir / "queries.jsonl"
    path.write_text('{"_id": "q1", "text": "one"}\n{"_id": "q2", "text": \n', encoding="utf-8")
    with pytest.raises(KitError, match=r"queries\.jsonl:2: malformed JSON"):
        load_beir(beir)


def test_record_without_id_names_file(beir):
    write_jsonl(beir / "corpus.jsonl", [{"title": "x", "text": "y"}])
    with pytest.raises(KitError, match=r"corpus\.jsonl:1: record lacks '_id'"):
        load_beir(beir)


def test_bad_grade_names_file_and_line(beir):
    write_qrels(beir / "qrels" / "test.tsv", [("q1", "d1", 1), ("q1", "d2", "high")])
    with pytest.raises(KitError, match=r"test\.tsv:3: score 'high'"):
        load_beir(beir)


def test_judged_query_missing_from_queries(beir):
    write_qrels(beir / "qrels" / "test.tsv", [("q9", "d1", 1)])
    with pytest.raises(KitError, match="query q9 is judged but missing"):
        load_beir(beir)


# FollowIR -----------------------------------------------------------------


@pytest.fixture
def followir(tmp_path):
    write_jsonl(tmp_path / "corpus.jsonl", CORPUS)
    write_jsonl(
        tmp_path / "queries.jsonl",
        [
            {"_id": "301", "text": "crime", "instruction_og": "any crime", "instruction_changed": "only fraud"},
            {"_id": "302", "text": "ozone", "instruction_og": "any ozone", "instruction_changed": "only 1990s"},
        ],
    )
    write_jsonl(
        tmp_path / "top_ranked.jsonl",
        [{"qid": "301", "pid": "d1"}, {"qid": "301", "pid": "d2"}, {"qid": "302", "pid": ["d2", "d3"]}],
    )
    write_qrels(tmp_path / "qrels_og" / "test.tsv", [("301", "d1", 1), ("301", "d2", 1), ("302", "d3", 2)])
    # the hub's files suffix query ids with the instruction: read as topics, never used for pairing
    write_qrels(tmp_path / "qrels_changed" / "test.tsv",
                [("301-changed", "d1", 1), ("301-changed", "d2", 0), ("302-changed", "d3", 0)])
    return tmp_path


def test_followir_instances_and_explicit_pairs(followir):
    data = load_followir(followir)
    assert len(data.corpus) == 3
    assert data.pairs == {"301-og": "301-changed", "302-og": "302-changed"}
    assert sorted(data.queries) == ["301-changed", "301-og", "302-changed", "302-og"]
    assert data.instructions["301-og"] == "any crime"
    assert data.instructions["302-changed"] == "only 1990s"
    assert data.text("301-changed") == "crime only fraud"
    assert data.candidates["301-og"] == data.candidates["301-changed"] == ("d1", "d2")
    assert data.candidates["302-og"] == ("d2", "d3")
    assert data.qrels["301-og"] == {"d1": 1, "d2": 1}
    assert data.qrels["302-changed"] == {"d3": 0}


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
    write_jsonl(followir / "top_ranked.jsonl", [{"qid": "301", "pid": "d1"}])
    with pytest.raises(KitError, match="no candidates for query 302"):
        load_followir(followir)


# InstructIR ---------------------------------------------------------------


@pytest.fixture
def instructir(tmp_path):
    write_jsonl(tmp_path / "corpus.jsonl", CORPUS)
    write_jsonl(
        tmp_path / "queries.jsonl",
        [
            {"_id": "7_1", "text": "I am a chef. [SEP] what is umami"},
            {"_id": "7_2", "text": "I am a student. [SEP] what is umami"},
            {"_id": "8_1", "text": "I am a nurse. [SEP] what is a fever"},
        ],
    )
    write_qrels(tmp_path / "qrels" / "test.tsv", [("7_1", "d1", 1), ("7_2", "d2", 1), ("8_1", "d3", 1)])
    return tmp_path


def test_instructir_groups_by_query_text(instructir):
    data = load_instructir(instructir)
    assert len(data.corpus) == 3 and len(data.queries) == 3
    assert data.queries["7_1"] == "what is umami"
    assert data.instructions["8_1"] == "I am a nurse."
    assert data.groups == {"what is umami": ("7_1", "7_2"), "what is a fever": ("8_1",)}
    assert data.text("7_2") == "what is umami I am a student."


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


def test_ir_datasets_missing_says_how_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "ir_datasets", None)  # makes `import ir_datasets` fail
    with pytest.raises(KitError, match="pip install ir_datasets"):
        load_collection("dl19")


def test_ir_datasets_stub_is_converted(monkeypatch):
    Doc = types.SimpleNamespace
    loaded = []

    class Dataset:
        def docs_iter(self):
            return [Doc(doc_id="p1", text="passage one"), Doc(doc_id="p2", text="passage two")]

        def queries_iter(self):
            return [Doc(query_id="1", text="judged"), Doc(query_id="2", text="unjudged")]

        def qrels_iter(self):
            return [Doc(query_id="1", doc_id="p2", relevance=3, iteration="0")]

    def load(name):
        loaded.append(name)
        return Dataset()

    monkeypatch.setitem(sys.modules, "ir_datasets", types.SimpleNamespace(load=load))
    corpus, queries, qrels = load_ir_datasets("dl19")
    assert loaded == [IR_DATASETS["dl19"]] == ["msmarco-passage/trec-dl-2019/judged"]
    assert corpus == {"p1": {"title": "", "text": "passage one"}, "p2": {"title": "", "text": "passage two"}}
    assert queries == {"1": "judged"} and qrels == {"1": {"p2": 3}}


def test_followir_collection_names_and_an_unreachable_hub(monkeypatch):
    import huggingface_hub

    from evalkit.promptriever.followir import collection_name, fetch_followir

    assert collection_name("/data/robust04-instructions") == "robust04" and collection_name("news21") == "news21"
    with pytest.raises(KitError, match="name the FollowIR folder after its collection"):
        collection_name("/data/trec-x")

    def offline(*args, **kwargs):
        raise OSError("no network")

    monkeypatch.setattr(huggingface_hub, "snapshot_download", offline)
    with pytest.raises(KitError, match="cannot fetch jhu-clsp/core17-instructions .*pass its folder"):
        fetch_followir("core17")
