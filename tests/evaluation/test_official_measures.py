"""The release's official measures (`MAP_csfcube`, `nDCG_csfcube%p`): hand-computed cases
(runs that omit judged papers included), agreement with the release's own script on the
SPECTER sample and on a thinned copy of it (goldens from scripts/csfcube_official_golden.py,
which imports iesl/CSFCube's eval_scripts/ranking_eval.py in a separate venv), the study's
protocol (seed excluded and not judged) against the pools as released."""

from __future__ import annotations

import json
from math import log2

import pytest

from evalkit import cli
from evalkit.core.errors import KitError
from evalkit.data import protocols
from evalkit.datasets import csfcube_official
from evalkit.evaluation import evaluate as evaluation
from evalkit.evaluation import measures

PARTS = ("background", "method", "result", "all")
# scripts/csfcube_official_golden.py on the release at commit 7ffe012c (numpy 1.26.4)
GOLDEN = {
    "specter": {
        "MAP_csfcube": {"background": 0.439508472185445, "method": 0.22444963965561351,
                        "result": 0.36794688882963267, "all": 0.3422530206810931},
        "nDCG_csfcube%20": {"background": 0.666975366938803, "method": 0.37410342402263785,
                            "result": 0.5667008252065003, "all": 0.5328006384728206},
    },
    "thinned": {
        "MAP_csfcube": {"background": 0.4733289535720809, "method": 0.22752166686002182,
                        "result": 0.3759529335769557, "all": 0.3565440101475058},
        "nDCG_csfcube%20": {"background": 0.6705660341547329, "method": 0.3760859094599194,
                            "result": 0.5465844248484801, "all": 0.5278301033762731},
    },
}
OFFICIAL = ["MAP_csfcube", "nDCG_csfcube%20"]


def one(qrels, run, name, level=2, qid="q"):
    return measures.judged_values(qrels, run, [name], level).loc[qid, name]


def scores(*docs):
    """A run for query q ranking `docs` in the order given."""
    return {"q": {doc: float(len(docs) - i) for i, doc in enumerate(docs)}}


# --- MAP_csfcube by hand -------------------------------------------------------------------------


def test_map_divides_by_the_relevant_papers_the_run_ranked():
    # judged relevant (grade >= 2): a, c, e; the run ranks a, b, c, d and leaves e out.
    # release AP: hits at ranks 1 and 3 -> (1/1 + 2/3) / 2 = 0.8333...
    # trec_eval AP divides by all 3 relevant judged papers: (1 + 2/3) / 3 = 0.5555...
    qrels = {"q": {"a": 3, "b": 0, "c": 2, "d": 1, "e": 2}}
    run = scores("a", "b", "c", "d")
    assert one(qrels, run, "MAP_csfcube") == pytest.approx((1 + 2 / 3) / 2, abs=1e-15)
    assert one(qrels, run, "AP") == pytest.approx((1 + 2 / 3) / 3, abs=1e-15)


def test_map_counts_grade_two_as_relevant_and_one_as_not():
    qrels = {"q": {"a": 1, "b": 2, "c": 1, "d": 3}}
    # ranked a, b, c, d: hits at 2 and 4 -> (1/2 + 2/4) / 2 = 0.5
    assert one(qrels, scores("a", "b", "c", "d"), "MAP_csfcube") == 0.5
    # the collection's level decides: at level 1 every paper is relevant -> 1.0
    assert one(qrels, scores("a", "b", "c", "d"), "MAP_csfcube", level=1) == 1.0


def test_map_is_zero_without_a_ranked_relevant_paper_and_unjudged_papers_count_as_not_relevant():
    qrels = {"q": {"a": 3, "b": 0}}
    assert one(qrels, scores("b", "x", "y"), "MAP_csfcube") == 0.0  # the relevant paper a is left out
    assert one(qrels, scores("x", "a"), "MAP_csfcube") == 0.5  # unjudged x ranks above a: 1/2


# --- nDCG_csfcube%p by hand ----------------------------------------------------------------------


def test_percent_cut_follows_the_length_of_the_ranked_list():
    assert [measures.percent_cut(n, 20) for n in (4, 5, 9, 10, 100, 253)] == [0, 1, 1, 2, 20, 50]
    assert measures.percent_cut(7, 100) == 7


def test_ndcg_percent_hand_example_with_an_omitted_judged_paper():
    # ten ranked grades, so the cut is int(0.2 * 10) = 2: DCG@2 = 0 + 2 = 2 (ranks 1, 2 weigh 1);
    # the ideal comes from the ranked grades only (the judged grade-3 paper z is left out):
    # sorted 3, 2, 1, 0... at 2 = 3 + 2 = 5 -> 0.4
    qrels = {"q": {"a": 0, "b": 2, "c": 3, "d": 1, "z": 3}}
    run = scores("a", "b", "c", "d", "e", "f", "g", "h", "i", "j")
    assert one(qrels, run, "nDCG_csfcube%20") == pytest.approx(0.4, abs=1e-15)
    # the same list cut at 30% (k = 3): DCG = 0 + 2 + 3/log2(3); ideal = 3 + 2 + 1/log2(3)
    expected = (2 + 3 / log2(3)) / (3 + 2 + 1 / log2(3))
    assert one(qrels, run, "nDCG_csfcube%30") == pytest.approx(expected, abs=1e-15)


def test_ndcg_percent_is_zero_when_the_cut_is_zero():
    qrels = {"q": {"a": 3}}
    assert one(qrels, scores("a", "b", "c", "d"), "nDCG_csfcube%20") == 0.0  # int(0.8) = 0, as the release
    assert one(qrels, scores("a", "b", "c", "d", "e"), "nDCG_csfcube%20") == 1.0


# --- names -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("bad, message", [
    ("MAP_csfcube@10", "takes no cut-off"), ("MAP_csfcube%20", "takes no cut-off"),
    ("nDCG%20", "only nDCG_csfcube takes a percentage"), ("P%20", "only nDCG_csfcube"),
    ("nDCG_csfcube%0", "k=0"), ("nDCG_csfcube%101", "at most 100"), ("nDCG_csfcube%", "unknown measure"),
    ("MAP", "unknown measure"),
])
def test_bad_official_names_are_one_line_errors(bad, message):
    with pytest.raises(KitError, match=message):
        measures.parse_measure(bad, 2)


def test_official_names_parse_to_distinct_measures():
    assert str(measures.parse_measure("nDCG_csfcube%20", 2)) == "nDCG_csfcube%20"
    assert str(measures.parse_measure("MAP_csfcube", 2)) == "MAP_csfcube"
    assert measures.parse_measure("MAP_csfcube", 2) is not measures.parse_measure("MAP_csfcube", 1)


# --- the release's own script ------------------------------------------------------------------------


def _thinned(run):
    """Every third candidate (positions 1, 4, 7, ... of the kit's ranking) left out, as the golden script."""
    from evalkit.data.runs import ranked

    return {qid: {d: s[d] for i, d in enumerate(ranked(s)) if i % 3 != 1} for qid, s in run.items()}


@pytest.mark.parametrize("name", ["specter", "thinned"])
def test_official_measures_equal_the_release_script(collection, specter, name):
    run = specter if name == "specter" else _thinned(specter)
    table = evaluation.per_query(collection, run, OFFICIAL)
    summary = evaluation.summarize(collection, table)
    for measure in OFFICIAL:
        for part in PARTS:
            assert summary[measure][part] == pytest.approx(GOLDEN[name][measure][part], abs=1e-12), (measure, part)


def test_published_rounding_of_the_specter_sample(collection, specter):
    summary = evaluation.summarize(collection, evaluation.per_query(collection, specter, OFFICIAL))
    assert {p: round(100 * summary["MAP_csfcube"][p], 2) for p in PARTS} == \
        {"background": 43.95, "method": 22.44, "result": 36.79, "all": 34.23}
    assert {p: round(100 * summary["nDCG_csfcube%20"][p], 2) for p in PARTS} == \
        {"background": 66.70, "method": 37.41, "result": 56.67, "all": 53.28}


# --- protocols: the seed excluded (and not judged) or the pools as released -----------------------------


SEED_QUERIES = ("8781666_background", "8781666_result")


def test_the_study_protocol_does_not_judge_the_excluded_seed(collection):
    for qid in SEED_QUERIES:
        assert collection.qrels[qid]["8781666"] == 3  # the release lists the seed in its own pool
        assert "8781666" not in collection.judged[qid]
    released = protocols.protocol_collection(collection, "released")
    assert released.judged == {q: dict(g) for q, g in collection.qrels.items()}
    assert [d.doc_id for d in released.candidates_of(SEED_QUERIES[0])].count("8781666") == 1
    assert "8781666" not in [d.doc_id for d in collection.candidates_of(SEED_QUERIES[0])]


def test_trec_ap_reaches_the_official_map_once_the_seed_is_not_judged(collection, specter):
    """The SPECTER sample ranks every pool paper but the seed: under the study's protocol trec AP
    equals the release's MAP; on the pools as released the judged seed caps it (34.09)."""
    study = evaluation.per_query(collection, specter, ["AP", "MAP_csfcube"])
    assert study["AP"].tolist() == pytest.approx(study["MAP_csfcube"].tolist(), abs=1e-12)
    released = protocols.protocol_collection(collection, "released")
    summary = evaluation.summarize(released, evaluation.per_query(released, specter, ["AP", "MAP_csfcube"]))
    assert round(100 * summary["AP"]["all"], 2) == 34.09
    assert round(100 * summary["MAP_csfcube"]["all"], 2) == 34.23


def test_a_run_ranking_the_seed_needs_the_released_protocol(collection, specter_copy):
    specter_copy["8781666_background"]["8781666"] = 100.0
    with pytest.raises(KitError, match="excluded document 8781666.*protocol=.released."):
        protocols.check_run(specter_copy, collection)
    protocols.check_run(specter_copy, protocols.protocol_collection(collection, "released"))


# --- the release's ranked-JSON layout: ranked in the order written ------------------------------------
# The release's ranking_eval.py (iesl/CSFCube at commit 7ffe012c, read_facet_specific_relevances)
# takes `pid_score[0]` of each entry in list order and never reads the number: its figures on any
# file that lists the SPECTER sample's candidates in the sample's order are its figures on the
# sample, GOLDEN["specter"] above, whatever numbers stand beside them.


def _rewritten(sample_dir, folder, name, number):
    """The SPECTER sample's lists, in their order, with `number(distance)` beside each candidate."""
    from evalkit.datasets import csfcube

    folder.mkdir()
    for facet in csfcube.FACETS:
        lists = json.loads(csfcube_official.official_path(sample_dir, "specter", facet).read_text())
        rewritten = {seed: [[doc, number(d)] for doc, d in pairs] for seed, pairs in lists.items()}
        csfcube_official.official_path(folder, name, facet).write_text(json.dumps(rewritten))
    return folder


def _official_summary(collection, run):
    return evaluation.summarize(collection, evaluation.per_query(collection, run, OFFICIAL))


def _assert_golden(summary):
    for measure in OFFICIAL:
        for part in PARTS:
            assert summary[measure][part] == pytest.approx(GOLDEN["specter"][measure][part], abs=1e-12), \
                (measure, part)


def test_a_similarity_file_best_first_is_ranked_as_written(collection, sample_dir, tmp_path, capsys):
    # Aspire's own output layout: similarities, best first (the numbers fall along each list)

    folder = _rewritten(sample_dir, tmp_path / "aspire", "aspire", lambda d: 1.0 / (1.0 + d))
    run = csfcube_official.load_official_run(folder, "aspire")
    _assert_golden(_official_summary(collection, run))  # re-sorted by the numbers: MAP 5.43, not 34.23
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith("evalkit: warning: ")  # one line for the folder
    assert "test-pid2pool-csfcube-aspire-FACET-ranked.json: the distances fall along the list in 50 of 50" in err[0]
    csfcube_official.read_official(csfcube_official.official_path(folder, "aspire", "background"), "background")
    assert "in 16 of 16 lists" in capsys.readouterr().err  # one file: its own line
    # through the command line, figure for figure
    assert cli.main(["evaluate", "--dataset", "csfcube", "--runs", str(folder), "--name", "aspire", "--json"]) == 0
    out, err = capsys.readouterr()
    summary = json.loads(out)
    _assert_golden({m: summary[m] for m in OFFICIAL})
    assert len(err.splitlines()) == 1


def test_tied_distances_out_of_id_order_keep_the_list_order(collection, sample_dir, tmp_path, capsys):
    from evalkit.data.runs import ranked

    folder = _rewritten(sample_dir, tmp_path / "tied", "tied", lambda d: float(round(d / 2)))  # ties everywhere
    run = csfcube_official.load_official_run(folder, "tied")
    assert capsys.readouterr().err == ""  # the distances never fall: no warning
    _assert_golden(_official_summary(collection, run))
    # the file does put tied candidates out of id order, and the kit's tie rule would move the figures
    by_id = {qid: {doc: -float(round(-score / 2)) for doc, score in scores.items()} for qid, scores in
             csfcube_official.load_official_run(sample_dir, "specter").items()}
    assert sum(ranked(by_id[q]) != ranked(run[q]) for q in run) >= 40
    moved = _official_summary(collection, by_id)
    assert max(abs(moved[m][p] - GOLDEN["specter"][m][p]) for m in OFFICIAL for p in PARTS) > 1e-3


def test_list_order_by_hand(tmp_path):
    # grades a=3, b=0, c=2: listed c, b, a with tied distances and then a similarity-style list
    from evalkit.data.runs import ranked

    qrels = {"1_method": {"a": 3, "b": 0, "c": 2}}
    path = tmp_path / "x.json"
    for pairs in ([["c", 1.0], ["b", 1.0], ["a", 1.0]], [["c", 0.9], ["b", 0.5], ["a", 0.1]]):
        path.write_text(json.dumps({"1": pairs}))
        run = csfcube_official.read_official(path, "method")
        assert ranked(run["1_method"]) == ["c", "b", "a"]
        # the script: relevant at ranks 1 and 3 -> AP (1/1 + 2/3) / 2; NDCG%100 over 3: DCG 2 + 0 + 3/log2(3)
        assert one(qrels, run, "MAP_csfcube", qid="1_method") == pytest.approx((1 + 2 / 3) / 2, abs=1e-15)
        assert one(qrels, run, "nDCG_csfcube%100", qid="1_method") == \
            pytest.approx((2 + 3 / log2(3)) / (3 + 2), abs=1e-15)
    # a list already in the kit's order keeps its distances bit for bit (score = -distance)
    path.write_text(json.dumps({"1": [["c", 0.25], ["a", 0.5], ["b", 0.5]]}))
    assert csfcube_official.read_official(path, "method") == {"1_method": {"c": -0.25, "a": -0.5, "b": -0.5}}
