"""The comparison: `delta` is what `t` tests (a property on random runs), runs without common
queries and two spellings of one measure refused in one line, and the runs x measures table
(`evalkit.evaluation.compare_table`) from the CLI and the API: its p-values are ranx's own `compare`'s
(paired t-test and Fisher's randomization test), its marks ranx's, its LaTeX compiles. Real
CSFCube pools: the release's SPECTER sample and kit runs."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest

from evalkit import api, cli
from evalkit.data.protocols import protocol_collection
from evalkit.data.runs import run_label, write_trec
from evalkit.evaluation.compare import compare
from evalkit.evaluation.compare_table import SUPERSCRIPT, compare_table
from evalkit.evaluation.evaluate import per_query
from evalkit.evaluation.measures import rank_scores
from evalkit.pipeline.runner import RunSettings, bind, obtain


@pytest.fixture(autouse=True)
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("EVALKIT_CACHE", str(tmp_path / "cache"))


@pytest.fixture(scope="module")
def three(collection, specter, tmp_path_factory):
    """SPECTER's sample, BM25 and BM25 reversed: runs in the kit's tie order."""
    root = tmp_path_factory.mktemp("table")
    bm25 = obtain(bind(RunSettings(model="bm25"), collection, root / "store")).run
    judged = protocol_collection(collection, "pool")
    specter = {q: {d: s for d, s in docs.items() if d in {c.doc_id for c in judged.candidates_of(q)}}
               for q, docs in specter.items()}

    runs = {"specter": rank_scores(specter), "bm25": rank_scores(bm25),
            "reversed": {q: {d: -v for d, v in s.items()} for q, s in rank_scores(bm25).items()}}
    paths = {}
    for name, run in runs.items():
        paths[name] = root / f"{name}.trec"
        write_trec(paths[name], run, name)
    return runs, paths


def random_run(collection, rng) -> dict:
    judged = protocol_collection(collection, "pool")
    return {q: {c.doc_id: float(rng.integers(0, 4)) for c in judged.candidates_of(q)} for q in judged.queries}


def test_the_sign_of_delta_is_the_sign_of_t_on_random_runs(collection):
    """Property: on random runs (coarse scores, so ties), every row's delta is the mean per-query
    difference and has the sign of its t; delta and the fold aggregate may disagree."""
    rng = np.random.default_rng(3)
    judged = protocol_collection(collection, "pool")
    measures = ["nDCG_csfcube@20", "AP", "P@5", "p-MRR"]
    for _ in range(6):
        a, b = (per_query(judged, random_run(collection, rng), measures) for _ in range(2))
        rows = compare(judged, {"a": a, "b": b}, measures).query("run == 'b'")
        for row in rows.itertuples():
            if not math.isnan(row.t):
                assert np.sign(row.delta) == np.sign(row.t), row
        plain = rows.query("measure == 'AP' and stratum == 'all'").iloc[0]
        assert plain.delta == pytest.approx((b["AP"] - a["AP"]).mean()) and plain.n == 50
        seeds = rows.query("measure == 'p-MRR' and stratum == 'all'").iloc[0]
        assert seeds.n == 16  # 16 seeds with two facets: one unit each, not 32 queries


def test_no_query_in_common_and_two_spellings_are_one_line(cached_data, capsys, collection, three, tmp_path):
    runs, paths = three
    qids = sorted(runs["bm25"])
    write_trec(tmp_path / "first.trec", {q: runs["bm25"][q] for q in qids[:20]}, "first")
    write_trec(tmp_path / "last.trec", {q: runs["specter"][q] for q in qids[20:]}, "last")
    for argv, message in (
            (["--runs", str(tmp_path / "first.trec"), "--runs", str(tmp_path / "last.trec")], "no query in common"),
            (["--runs", str(paths["bm25"]), "--measures", "nDCG@10,nDCG@010"], "without leading zeros")):
        assert cli.main(["evaluate", "--dataset", "csfcube", *argv]) == 2
        err = capsys.readouterr().err.strip()
        assert message in err and len(err.splitlines()) == 1, err


def ranx_report(collection, runs: dict, measure: str, test: str, permutations: int = 1000):
    from ranx import Qrels, Run
    from ranx import compare as ranx_compare

    judged = protocol_collection(collection, "pool")
    qrels = Qrels.from_dict({q: dict(g) for q, g in judged.judged.items() if q in judged.queries})
    found = [Run.from_dict(run, name=name) for name, run in runs.items()]
    return ranx_compare(qrels, found, [measure], stat_test=test, n_permutations=permutations, max_p=0.05)


@pytest.mark.parametrize("test, ranx_test", [("t", "student"), ("fisher", "fisher")])
def test_p_values_and_marks_are_ranx_compares(collection, three, test, ranx_test):
    runs, _ = three
    judged = protocol_collection(collection, "pool")
    tables = {name: per_query(judged, run, ["nDCG@10"]) for name, run in runs.items()}
    ours = compare_table(judged, tables, ["nDCG@10"], "mean", test, 0.05, permutations=10_000, adjust="none")
    report = ranx_report(collection, runs, "ndcg@10", ranx_test, permutations=10_000)
    names = list(runs)
    for name in names:  # the same per-query values: the same means
        assert ours.values.loc[("all", name), "nDCG@10"] == pytest.approx(100 * report.results[name]["ndcg@10"])
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            from evalkit.evaluation.compare import pair_test

            mine = pair_test(judged, tables[a], tables[b], "nDCG@10", "all", test, 10_000)
            theirs = report.comparisons[a, b]["ndcg@10"]["p_value"]
            assert mine.pvalue == pytest.approx(theirs, rel=1e-9) if test == "t" else \
                abs(mine.pvalue - theirs) < 0.02, (a, b, mine.pvalue, theirs)
    marks = {name: ours.better.loc[("all", name), "nDCG@10"] for name in names}
    letters = dict(zip(names, "abc"))
    expected = {a: "".join(letters[b] for b in names if b != a and report.comparisons[a, b]["ndcg@10"]["significant"]
                           and report.results[a]["ndcg@10"] > report.results[b]["ndcg@10"]) for a in names}
    assert marks == expected
    assert any(marks.values())  # the check has something to agree on


def test_the_table_from_the_cli_in_three_formats_and_its_latex_compiles(cached_data, capsys, three, tmp_path):
    from tests.latex import compile_tables

    _, paths = three
    argv = ["evaluate", "--dataset", "csfcube", *[a for p in paths.values() for a in ("--runs", str(p))]]
    assert cli.main(argv) == 0
    text = capsys.readouterr().out
    assert "paired two-sided t-test" in text and "x100" in text and "background:" in text and "all:" in text
    assert any(mark in text for mark in "ᵃᵇᶜ")
    assert cli.main([*argv, "--format", "markdown"]) == 0
    markdown = capsys.readouterr().out
    assert markdown.startswith("| stratum") and "nDCG_csfcube@20" in markdown
    assert cli.main([*argv, "--format", "latex", "--test", "fisher", "--permutations", "2000", "--seed", "7"]) == 0
    latex = capsys.readouterr().out
    assert "2,000 permutations, seed 7" in latex and r"\multicolumn" in latex and "$^{" in latex
    legend = next(line for line in latex.splitlines() if "Holm-adjusted over all pairs" in line)
    assert legend.startswith(r"\multicolumn{") and r"\footnotesize Values x100" in legend  # a table note, not a %
    assert not any(line.startswith("%") for line in latex.splitlines())
    (tmp_path / "compare.tex").write_text(latex)
    compile_tables([tmp_path / "compare.tex"], tmp_path)
    assert cli.main([*argv, "--format", "rows", "--json"]) == 0
    rows = pd.DataFrame(json.loads(capsys.readouterr().out)["rows"])
    assert {"aggregate", "delta", "t", "p", "p_holm", "n", "note"} <= set(rows.columns)
    assert cli.main([*argv, "--permutations", "500"]) == 2
    assert "add --test fisher" in capsys.readouterr().err
    assert cli.main([*argv, "--test", "fisher", "--permutations", "50"]) == 2
    assert "--permutations 50: give between 100 and 10,000,000" in capsys.readouterr().err


def overlap(query, documents):
    words = set(query.text.lower().split())
    return [len(words & set(d.text.lower().split())) for d in documents]


def test_the_table_from_the_api(tmp_path):
    seeds = ["929877", "3264891", "2090262"]  # six queries
    runs = tmp_path / "runs"
    mine = api.evaluate(overlap, name="words", reference="bm25", seeds=seeds, runs_dir=runs)
    table = mine.compare_table()
    assert list(table.letters) == ["bm25", "words"] and table.values.shape[1] == 7
    assert table.values.loc[("all", "words"), "AP"] == pytest.approx(100 * mine.table.loc[("base", "AP"), "all"])
    assert "p-MRR: a seed's two facets are one unit" in table.text()
    folds = [n for n in mine.notes if "the fold aggregate is undefined" in n]
    assert folds and all(f"words: {n}" in table.text() and f"words: {n}" in table.markdown() for n in folds)
    latex = mine.compare_table(format="latex", test="fisher", permutations=1000)
    assert "1,000 permutations" in latex
    assert "Note: words: method: no evaluated query is in the test half of fold1" in latex  # in the table note
    with pytest.raises(Exception, match="add test="):
        mine.compare_table(permutations=100)


def test_a_study_table_on_four_queries_says_untested_not_different(tmp_path, data, collection):
    from notebook_cells import run_cells

    from evalkit.study import params, tables

    name = api.register_model(overlap, "words-smoke")
    study = params.check("relevance", PROFILE="offline", PROTOCOL="pool", SEEDS="929877,3264891",
                         MODELS=f"bm25,{name}", REFERENCE_MODEL="bm25", DISCOUNT="csfcube", RUNS_DIR=str(tmp_path))
    table = run_cells("relevance", study)["relevance"].query("source == 'kit'").set_index("model")
    assert table.loc[name, "same_as_reference"] == tables.UNTESTED and math.isnan(table.loc[name, "p_vs_reference"])


def marks_and_rows(table, rows, alpha):
    """For every cell: the letters it shows, and the letters the rows say it earned (p_holm < alpha
    and better == the cell's run), with each pair's p_holm."""
    letters = table.letters
    pairs = rows[rows["against"] != ""]
    for measure in table.better.columns:
        for (stratum, run), shown in table.better[measure].items():
            mine = pairs[(pairs.measure == measure) & (pairs.stratum == stratum)
                         & ((pairs.run == run) | (pairs.against == run))]
            earned = {letters[r.against if r.run == run else r.run] for r in mine.itertuples()
                      if r.better == run and r.p_holm < alpha}
            yield measure, stratum, run, set(shown), earned, mine


def test_every_mark_is_a_printed_pair_with_p_holm_below_alpha(collection, three):
    """Property over four runs (six pairs, so Holm over all pairs differs from Holm over the three
    against the first): a cell carries a letter exactly when the rows hold that pair with p_holm <
    alpha and the cell's run better; the rows' p is scipy's ttest_rel and p_holm statsmodels' Holm
    over every pair of the measure and stratum."""
    from scipy import stats as scistats

    runs, _ = three
    rng = np.random.default_rng(5)
    judged = protocol_collection(collection, "pool")
    noisy = {q: {d: s + rng.normal(0, 2) for d, s in docs.items()} for q, docs in runs["bm25"].items()}
    runs = {**runs, "noisy": noisy}
    measures = ["nDCG@10", "AP", "RR"]
    tables = {name: per_query(judged, run, measures) for name, run in runs.items()}
    table = compare_table(judged, tables, measures, "mean")
    rows = table.tests
    assert len(rows[rows.against != ""]) == 6 * len(measures) * 4  # 6 pairs x measures x (3 facets + all)
    marked = unmarked = 0
    for measure, stratum, run, shown, earned, mine in marks_and_rows(table, rows, 0.05):
        assert shown == earned, (measure, stratum, run, shown, mine)
        marked += len(shown)
        unmarked += sum(1 for r in mine.itertuples() if r.better != run)
    assert marked > 3 and unmarked > 3  # both sides of the property are exercised
    try:
        from statsmodels.stats.multitest import multipletests
    except ImportError:  # the hand-computed case of tests/evaluation/test_stats.py covers Holm
        multipletests = None
    for (measure, stratum), family in rows[rows.against != ""].groupby(["measure", "stratum"]):
        for r in family.itertuples():
            a, b = tables[r.run], tables[r.against]
            queries = a.index if stratum == "all" else a.index[a.stratum == stratum]
            assert r.p == pytest.approx(scistats.ttest_rel(a.loc[queries, measure], b.loc[queries, measure]).pvalue,
                                        rel=1e-9)
        if multipletests is not None:
            defined = family.dropna(subset=["p"])
            assert defined.p_holm.to_numpy() == pytest.approx(multipletests(defined.p, method="holm")[1])


def test_the_cli_table_marks_are_its_json_rows(cached_data, capsys, three):
    """What `evalkit evaluate` prints for three runs: each superscript of the Markdown table is a
    pair of the JSON rows with p_holm < alpha (Holm over the three pairs), each blank one a pair at
    or above it; the legend names the family."""
    _, paths = three
    argv = ["evaluate", "--dataset", "csfcube", "--measures", "nDCG@10,AP",
            *[a for p in paths.values() for a in ("--runs", str(p))]]
    assert cli.main([*argv, "--format", "markdown"]) == 0
    markdown = capsys.readouterr().out
    assert "Holm-adjusted over all pairs of runs of one measure and stratum (3 pairs of 3 runs)" in markdown
    assert cli.main([*argv, "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["settings"]["holm_over"] == "all pairs of runs of one measure and stratum"
    rows = pd.DataFrame(printed["rows"]).fillna({"p_holm": math.nan})
    pairs = rows[rows.against != ""]
    assert len(pairs) == 3 * 2 * 4
    plain = {v: k for k, v in SUPERSCRIPT.items()}
    lines = [line for line in markdown.splitlines() if line.startswith("| ") and "stratum" not in line]
    letters = dict(zip("abc", map(run_label, paths.values())))  # TREC files are named without their extension
    marked = blank = 0
    for line in lines:
        stratum, letter, run, *cells = [c.strip() for c in line.strip("|").split("|")]
        run = letters[letter]
        for measure, cell in zip(["nDCG@10", "AP"], cells):
            shown = {letters[plain[c]] for c in cell if c in plain}
            for other in set(letters.values()) - {run}:
                pair = pairs[(pairs.measure == measure) & (pairs.stratum == stratum)
                             & (pairs.run.isin([run, other])) & (pairs.against.isin([run, other]))].iloc[0]
                if other in shown:
                    assert pair.p_holm < 0.05 and pair.better == run, (line, pair)
                    marked += 1
                elif pair.better != other:
                    assert not pair.p_holm < 0.05 or pair.delta == 0, (line, pair)
                    blank += 1
    assert marked and blank
