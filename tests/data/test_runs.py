"""Runs: the one tie rule, round trips through TREC files and CSFCube's official format, and bad run files."""

from __future__ import annotations

import json
import random

import numpy as np
import pytest

from evalkit.core.errors import KitError
from evalkit.data import runs
from evalkit.datasets import csfcube_official

# --- tie rule ------------------------------------------------------------------------------


def test_tied_scores_rank_by_doc_id_not_input_order():
    # "b" is listed before "a" with the same score: the doc id decides, not the listing order
    scores = {"b": 1.0, "c": 2.0, "a": 1.0}
    assert runs.ranked(scores) == ["c", "a", "b"]
    assert runs.ranks(scores) == {"c": 1, "a": 2, "b": 3}


def test_tied_scores_break_by_id_ascending_as_strings():
    # string order: "10" < "9" (as trec_eval would compare ids), and ascending, unlike trec_eval's descending
    assert runs.ranked({"9": 0.5, "10": 0.5, "100": 0.5}) == ["10", "100", "9"]


def test_higher_score_ranks_first_whatever_the_ids():
    assert runs.ranked({"a": -3.0, "z": 7.0, "m": 0.0}) == ["z", "m", "a"]


def test_shuffled_input_order_gives_identical_ranks():
    rng = random.Random(7)
    # 200 docs over only 5 distinct scores: almost every rank depends on the tie rule
    items = [(f"d{i:03d}", float(rng.randrange(5))) for i in range(200)]
    reference = runs.ranks(dict(items))
    for _ in range(20):
        rng.shuffle(items)
        assert runs.ranks(dict(items)) == reference
    # within one score, doc ids ascend
    best = [doc for doc, rank in sorted(reference.items(), key=lambda kv: kv[1]) if dict(items)[doc] == 4.0]
    assert best == sorted(best)


# --- round trips ---------------------------------------------------------------------------

AWKWARD = [0.1 + 0.2, 1 / 3, -2.5e-17, 123456789.123456789, -0.0, 1e300, 7.0]


def _awkward_run() -> runs.Run:
    run: runs.Run = {}
    for facet, seed in (("background", "111"), ("method", "222"), ("result", "333"), ("method", "444")):
        run[f"{seed}_{facet}"] = {f"{seed}{i}": score for i, score in enumerate(AWKWARD)}
    run["111_background"]["tie-b"] = 7.0  # a tie with 1116 = 7.0
    return run


def test_official_round_trip_is_exact(tmp_path):
    run = _awkward_run()
    for facet in ("background", "method", "result"):
        csfcube_official.write_official(csfcube_official.official_path(tmp_path, "mine", facet), run, facet)
    back = csfcube_official.load_official_run(tmp_path, "mine")
    assert back == run
    for qid, scores in run.items():
        for doc, score in scores.items():
            assert back[qid][doc].hex() == float(score).hex() or score == 0.0  # bit-exact (0.0 == -0.0)
        assert runs.ranked(back[qid]) == runs.ranked(scores)


def test_official_file_lists_best_first_with_distance_minus_score(tmp_path):
    path = tmp_path / "x.json"
    csfcube_official.write_official(path, {"5_method": {"b": 1.0, "a": 1.0, "c": 3.0}, "6_result": {"z": 1.0}},
                                    "method")
    # only the method query is written; distance = -score; tie a/b by id
    assert json.loads(path.read_text()) == {"5": [["c", -3.0], ["a", -1.0], ["b", -1.0]]}
    assert csfcube_official.read_official(path, "method") == {"5_method": {"c": 3.0, "a": 1.0, "b": 1.0}}


def test_trec_round_trip_is_exact(tmp_path):
    run = _awkward_run()
    path = tmp_path / "mine.trec"
    runs.write_trec(path, run, "mine")
    back = runs.read_trec(path)
    assert back == run
    for qid, scores in run.items():
        for doc, score in scores.items():
            assert back[qid][doc].hex() == float(score).hex() or score == 0.0  # bit-exact (0.0 == -0.0)
    first = path.read_text().splitlines()[0].split()
    assert first[:4] == ["111_background", "Q0", "1115", "1"] and first[5] == "mine"  # 1115 holds 1e300


def test_kit_written_trec_files_take_the_one_pass_reader_and_read_as_the_general_one(tmp_path):
    # the one-pass reader (`_parse_plain`) must accept every file the kit writes (else reused runs
    # are read line by line, twice as slow) and give exactly the general reader's run, in order
    rng = random.Random(7)
    run = {f"q{i}\u00e9": {f"d{rng.randrange(10**6)}/x": rng.choice([rng.uniform(-1e9, 1e9), 0.0, -0.0, 1e-320, 3])
                           for _ in range(rng.randint(1, 40))} for i in range(60)}
    runs.write_trec(tmp_path / "kit.trec", run, "tag")
    text = (tmp_path / "kit.trec").read_text(encoding="utf-8")
    plain = runs._parse_plain(text)
    general = runs._parse_lines(text, tmp_path / "kit.trec")
    assert plain is not None and plain == general == run
    assert [list(d) for d in plain.values()] == [list(d) for d in general.values()]  # same order
    assert runs._parse_plain(text.rstrip("\n")) == run  # no final newline


@pytest.mark.parametrize("text", [
    "q Q0 a 1 0.5 t\n\nq Q0 b 2 0.4 t\n",  # a blank line
    "q\tQ0\ta\t1\t0.5\tt\n",  # tabs
    "q  Q0 a 1 0.5 t\n",  # two spaces
    "q Q0 a 1 0.5 t\r\nq Q0 b 2 0.4 t\r\n",  # CRLF
    "q Q0 a 1 0.5 t\x0bq Q0 b 2 0.4 t\n",  # a line break other than a newline
    " q Q0 a 1 0.5 t\n",  # leading space
])
def test_other_trec_layouts_go_to_the_general_reader(tmp_path, text):
    assert runs._parse_plain(text) is None
    assert runs.parse_trec(text.encode(), tmp_path / "x.trec") == runs._parse_lines(text, tmp_path / "x.trec")


@pytest.mark.parametrize("text, message", [
    ("q Q0 a 1 0.5 t\nq Q0 a 2 0.4 t\n", "x.trec: duplicate candidate a for query q"),
    ("q Q0 a 1 0.5 t\nq Q0 b 2 -inf t\n", "x.trec: line 2 has an infinite score"),
    ("q Q0 a 1 0.5 t\nq Q0 b 2 NaN t\n", "x.trec: line 2 has a NaN score"),
    ("q Q0 a 1 0.5 t\nq Q0 b 2 0x1 t\n", "x.trec:2: non-numeric score '0x1'"),
])
def test_faults_in_kit_shaped_files_are_named_by_line(tmp_path, text, message):
    assert runs._parse_plain(text) is None
    with pytest.raises(KitError, match=message):
        runs.parse_trec(text.encode(), tmp_path / "x.trec")


def test_trec_writes_numpy_scores_as_plain_numbers(tmp_path):
    # numpy 2 reprs are "np.float64(0.5)": written as such, the file could not be read back
    run = {"1_method": {"a": np.float64(0.5), "b": np.float32(0.25)}}
    runs.write_trec(tmp_path / "np.trec", run, "t")
    assert "np." not in (tmp_path / "np.trec").read_text()
    assert runs.read_trec(tmp_path / "np.trec") == {"1_method": {"a": 0.5, "b": 0.25}}
    csfcube_official.write_official(tmp_path / "np.json", run, "method")
    assert csfcube_official.read_official(tmp_path / "np.json", "method") == {"1_method": {"a": 0.5, "b": 0.25}}


def test_sample_specter_run_loads(specter):
    assert len(specter) == 50
    assert len(specter["10014168_background"]) == 237
    # smallest distance ranks first: 42.109847335658635 -> score -42.109847335658635
    assert runs.ranked(specter["10014168_background"])[0] == "5133576"
    assert specter["10014168_background"]["5133576"] == -42.109847335658635


# --- bad run files ------------------------------------------------------------------------


def _official(tmp_path, text: str):
    path = tmp_path / "test-pid2pool-csfcube-bad-method-ranked.json"
    path.write_text(text)
    return path


@pytest.mark.parametrize(
    "text, message",
    [
        ('{"1": [["a", 1.0]', "malformed JSON"),
        ('{"1": [["a", 1.0], ["a", 2.0]]}', "duplicate candidate a for query 1_method"),
        ('{"1": [["a", "near"]]}', "non-numeric score 'near'"),
        ('{"1": [["a", true]]}', "non-numeric score True"),
        ('{"1": [["a", null]]}', "non-numeric score None"),
        ('{"1": [["a", NaN]]}', "NaN score"),
        ('{"1": [["a", 1.0, 2.0]]}', "expected \\[candidate_id, distance\\]"),
        ('{"1": [["a"]]}', "expected \\[candidate_id, distance\\]"),
        ('{"1": [[17, 1.0]]}', "expected \\[candidate_id, distance\\]"),
        ('{"1": {"a": 1.0}}', "must map to a list"),
        ('[["a", 1.0]]', "top level must be an object"),
    ],
)
def test_bad_official_file(tmp_path, text, message):
    path = _official(tmp_path, text)
    with pytest.raises(KitError, match=message) as err:
        csfcube_official.read_official(path, "method")
    assert str(path) in str(err.value)
    with pytest.raises(KitError, match=message):  # the same through load_official_run on the folder
        csfcube_official.load_official_run(tmp_path, "bad")


def test_official_file_not_utf8(tmp_path):
    path = tmp_path / "x.json"
    path.write_bytes(b'{"1": [["\xff", 1.0]]}')
    with pytest.raises(KitError, match="malformed JSON") as err:
        csfcube_official.read_official(path, "method")
    assert str(path) in str(err.value)


@pytest.mark.parametrize(
    "text, message",
    [
        ("1_method Q0 a 1 0.5\n", ":1: expected 6 fields .* got 5"),
        ("1_method Q0 a 1 0.5 t\n1_method Q0 b 2 0.4 t extra\n", ":2: expected 6 fields .* got 7"),
        ("1_method Q0 a 1 high t\n", ":1: non-numeric score 'high'"),
        ("1_method Q0 a 1 nan t\n", "line 1 has a NaN score"),
        ("1_method Q0 a 1 0.5 t\n\n1_method Q0 a 2 0.4 t\n", "duplicate candidate a for query 1_method"),
    ],
)
def test_bad_trec_file(tmp_path, text, message):
    path = tmp_path / "bad.trec"
    path.write_text(text)
    with pytest.raises(KitError, match=message) as err:
        runs.read_trec(path)
    assert str(path) in str(err.value)


def test_trec_file_not_utf8(tmp_path):
    path = tmp_path / "bin.trec"
    path.write_bytes(b"\xff\xfe 1_method Q0 a 1 0.5 t\n")
    with pytest.raises(KitError, match="not a UTF-8 text file") as err:
        runs.read_trec(path)
    assert str(path) in str(err.value)


def test_missing_run_inputs(tmp_path):
    with pytest.raises(KitError, match="no test-pid2pool-csfcube-x-FACET-ranked.json") as err:
        csfcube_official.load_official_run(tmp_path, "x")
    assert str(tmp_path) in str(err.value)
    with pytest.raises(KitError, match="run file not found"):
        csfcube_official.read_official(tmp_path / "absent.json", "method")
    with pytest.raises(KitError, match="run file not found"):
        runs.read_trec(tmp_path / "absent.trec")


def test_load_official_run_reads_only_the_facets_present(tmp_path):
    csfcube_official.write_official(csfcube_official.official_path(tmp_path, "r", "result"), {"7_result": {"a": 1.0}},
                                    "result")
    assert csfcube_official.load_official_run(tmp_path, "r") == {"7_result": {"a": 1.0}}


def test_write_atomic_replaces_whole_files_and_leaves_no_temporary_file(tmp_path):
    path = tmp_path / "sub" / "run.trec"
    runs.write_atomic(path, "old\n")
    runs.write_atomic(path, "new\n")
    assert path.read_text() == "new\n"
    assert [p.name for p in path.parent.iterdir()] == ["run.trec"]


def test_has_ties():
    assert runs.has_ties({"a": 1.0, "b": 1.0, "c": 2.0})
    assert not runs.has_ties({"a": 1.0, "b": 2.0})
    assert not runs.has_ties({})
