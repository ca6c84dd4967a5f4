"""Issue 48, items 4, 6, 8 and 9: input that looks like a number or an id but is not one is refused in
one line naming the problem (never read as a twin, a traceback or the id "None").

- measure names with digits other than 0-9 (``nDCG@٢٠`` beside ``nDCG@20``);
- whole-number options written in other scripts' digits (``--depth ٢٠``, which ``int`` reads as 20);
- ids that are empty, null or hold a control or line-separator character;
- papermill parameters of every scalar type (``-p SEEDS 929877`` passes an int).
"""

from __future__ import annotations

import json

import pytest

from evalkit import cli
from evalkit.core.errors import DataError, KitError, RequestError
from evalkit.data.collection import Collection, Document, Query, check_id
from evalkit.datasets import load_dataset
from evalkit.evaluation.measures import registry as measures
from evalkit.evaluation.request import EvaluationRequest
from evalkit.study import params


@pytest.mark.parametrize("name", ["nDCG@٢٠", "P@²", "nDCG@２０", "R@1٠"])
def test_a_measure_name_with_a_digit_other_than_0_9_is_refused(name):
    with pytest.raises(RequestError) as raised:
        EvaluationRequest(measures=["nDCG@20", name])
    assert "ASCII digits" in str(raised.value) and "\n" not in str(raised.value)
    with pytest.raises(RequestError):  # the parser itself reads no such cut-off either
        measures.parse(name)
    assert measures.parse("nDCG@20").cutoff == 20


@pytest.mark.parametrize("argv", [["run", "--dataset", "csfcube", "--model", "bm25", "--runs-dir", "r",
                                   "--protocol", "pooled", "--depth", "٢٠"],
                                  ["evaluate", "--dataset", "csfcube", "--runs", "x.trec", "--k", "٢٠"],
                                  ["evaluate", "--dataset", "csfcube", "--runs", "x.trec", "--test", "fisher",
                                   "--seed", "²"]])
def test_a_whole_number_option_takes_ascii_digits_only(argv, capsys):
    with pytest.raises(SystemExit) as raised:  # argparse's usage error, in the kit's one line
        cli.main(argv)
    assert raised.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "invalid whole number value" in err, err


def _collection(qid: str, doc: str = "d1") -> Collection:
    return Collection("toy", {doc: Document(doc, "", "graphs"), "d2": Document("d2", "", "trees")},
                      {"q0": Query("q0", "graphs"), qid: Query(qid, "trees")}, {qid: {doc: 1}})


@pytest.mark.parametrize(("qid", "code", "at"), [("a\nb", "U+000A", 2), ("q\u2028x", "U+2028", 2),
                                                  ("\tq", "U+0009", 1), ("q\x00", "U+0000", 2)])
def test_a_query_id_with_a_control_or_line_separator_is_refused_naming_its_position(qid, code, at):
    with pytest.raises(DataError) as raised:
        _collection(qid).check()
    line = str(raised.value)
    assert "\n" not in line and "\u2028" not in line  # the id written with escapes: still one line
    assert line.startswith("toy: query 2 has the id ") and f"{code} at character {at}" in line


def test_an_empty_id_is_refused_and_a_plain_one_taken():
    with pytest.raises(DataError, match="document 1 has the empty id ''"):
        _collection("q1", doc="").check()
    _collection("q-1 ü").check()  # letters of any script and spaces are not control characters
    assert check_id("toy", "query", 1, "929877") == "929877"


@pytest.mark.parametrize("given", ["null", "true", "1.5", "[1]"])
def test_a_beir_document_whose_id_is_not_text_is_refused(given, tmp_path):
    (tmp_path / "qrels").mkdir()
    (tmp_path / "corpus.jsonl").write_text(f'{{"_id": {given}, "text": "x"}}\n{{"_id": "d2", "text": "y"}}\n')
    (tmp_path / "queries.jsonl").write_text('{"_id": "q1", "text": "y"}\n')
    (tmp_path / "qrels" / "test.tsv").write_text("q1\td2\t1\n")
    with pytest.raises(DataError) as raised:
        load_dataset(f"beir:{tmp_path}")
    assert f"record 1 has _id {json.dumps(json.loads(given))}" in str(raised.value)


def test_a_beir_integer_id_is_read_as_its_digits(tmp_path):
    (tmp_path / "qrels").mkdir()
    (tmp_path / "corpus.jsonl").write_text('{"_id": 7, "text": "x"}\n')
    (tmp_path / "queries.jsonl").write_text('{"_id": 1, "text": "x"}\n')
    (tmp_path / "qrels" / "test.tsv").write_text("1\t7\t1\n")
    assert list(load_dataset(f"beir:{tmp_path}").documents) == ["7"]


def test_papermill_scalars_are_checked_into_the_one_request():
    """``-p SEEDS 929877`` (an int) is the make form's text; None, true/false and fractions are one line."""
    study = params.check("hybrid", PROFILE="offline", PROTOCOL="pool", SEEDS=929877, OUTPUT_DIR=1)
    assert study.seeds == ("929877",) and study.output_dir.name == "1"
    assert study == params.check("hybrid", PROFILE="offline", PROTOCOL="pool", SEEDS="929877", OUTPUT_DIR="1")
    for bad, spelled in ((dict(RUNS_DIR=None), "RUNS_DIR=None"), (dict(SEEDS=1.5), "SEEDS=1.5"),
                         (dict(OUTPUT_DIR=True), "OUTPUT_DIR=True"), (dict(MODELS=["bm25"]), "MODELS=['bm25']")):
        with pytest.raises(KitError) as raised:
            params.check("hybrid", **{"PROFILE": "offline", "PROTOCOL": "pool", **bad})
        line = str(raised.value)
        assert line.startswith(f"{spelled}: is ") and "give text" in line and "\n" not in line, line
