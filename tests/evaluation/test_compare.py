"""`evalkit evaluate` with several --runs: one table, paired two-sided t-tests of every pair of
runs per stratum and overall, Holm-adjusted over the pairs; and a subset of queries on which the fold aggregate
is undefined says so. Real CSFCube data, the release's SPECTER sample and kit runs."""

from __future__ import annotations

import json

import pandas as pd
import pytest
from scipy import stats as scistats

from evalkit import cli
from evalkit.data.runs import write_trec
from evalkit.evaluation.stats import holm
from evalkit.pipeline.runner import RunSettings, bind, obtain, run_folder


@pytest.fixture(scope="module")
def runs(collection, specter, tmp_path_factory):
    """The SPECTER sample as a TREC file, a BM25 run-store folder and a reversed-BM25 TREC file."""
    root = tmp_path_factory.mktemp("compare")
    write_trec(root / "specter.trec", specter, "specter")
    settings = RunSettings(model="bm25")
    bm25 = obtain(bind(settings, collection, root / "store")).run
    write_trec(root / "reversed.trec", {q: {d: -s for d, s in docs.items()} for q, docs in bm25.items()}, "rev")
    return [root / "specter.trec", run_folder(root / "store", settings, collection.name), root / "reversed.trec"]


def _json(capsys, *argv) -> dict:
    assert cli.main(["evaluate", "--dataset", "csfcube", *argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def _per_query(capsys, path, tmp_path) -> pd.DataFrame:
    out = tmp_path / f"{path.name}.csv"
    assert cli.main(["evaluate", "--dataset", "csfcube", "--runs", str(path), "--per-query", str(out)]) == 0
    capsys.readouterr()
    return pd.read_csv(out, index_col=0)


def test_several_runs_give_one_table_with_paired_tests_and_holm(cached_data, capsys, runs, tmp_path):
    args = [a for path in runs for a in ("--runs", str(path))]
    result = _json(capsys, *args)
    rows = pd.DataFrame(result["rows"])
    assert result["reference"] == "specter" and result["notes"] == []
    assert set(rows.run) == {"specter", "bm25", "reversed"}  # a file without its extension, a folder by its run name
    official = rows.query("measure == 'nDCG_csfcube@20' and run == @result['reference']").set_index("stratum")
    assert official["aggregate"].round(4).to_dict() == {"background": 0.6624, "method": 0.3765, "result": 0.5643,
                                                  "all": 0.5314}  # the official script's figures
    tables = {name: _per_query(capsys, path, tmp_path) for name, path in zip(["specter", "bm25", "reversed"], runs)}
    for stratum in ("method", "all"):
        family = rows.query("measure == 'AP' and stratum == @stratum and against != ''")
        chosen = rows.query("measure == 'AP' and stratum == @stratum and against in ['', @result['reference']]")
        chosen = chosen.set_index("run")
        expected = {}
        for name in ("bm25", "reversed"):
            ref, other = tables["specter"], tables[name]
            queries = ref.index if stratum == "all" else ref.index[ref.stratum == stratum]
            test = scistats.ttest_rel(other.loc[queries, "AP"], ref.loc[queries, "AP"])
            expected[name] = test.pvalue
            assert chosen.loc[name, "t"] == pytest.approx(test.statistic)
            assert chosen.loc[name, "n"] == len(queries)
        assert {n: chosen.loc[n, "p"] for n in expected} == pytest.approx(expected)
        assert len(family) == 3  # Holm over every pair of runs (the table's marks), not over the two against the first
        pairs = {(r.run, r.against): r.p for r in family.itertuples()}
        assert dict(zip(pairs, family.p_holm)) == pytest.approx(holm(pairs))
        assert pd.isna(chosen.loc["specter", "p"])
    single = _json(capsys, "--runs", str(runs[1]))
    bm25 = rows.query("measure == 'RR' and run == 'bm25'").set_index("stratum")["aggregate"].to_dict()
    assert bm25 == pytest.approx(single["RR"])


def test_run_files_are_labelled_by_their_names_without_the_extension_unless_two_share_one(cached_data, capsys,
                                                                                         runs, tmp_path):
    (tmp_path / "other").mkdir()
    twin = tmp_path / "other" / "specter.run"
    twin.write_bytes(runs[0].read_bytes())
    rows = pd.DataFrame(_json(capsys, "--runs", str(runs[0]), "--runs", str(runs[2]))["rows"])
    assert set(rows.run) == {"specter", "reversed"}
    rows = pd.DataFrame(_json(capsys, "--runs", str(runs[0]), "--runs", str(twin), "--runs", str(runs[2]))["rows"])
    assert set(rows.run) == {str(runs[0]), str(twin), "reversed"}  # both named specter: each by its path


def test_the_comparison_prints_a_table_and_writes_one_per_query_csv(cached_data, capsys, runs, tmp_path):
    out = tmp_path / "all.csv"
    assert cli.main(["evaluate", "--dataset", "csfcube", "--runs", str(runs[1]), "--runs", str(runs[2]),
                     "--per-query", str(out)]) == 0
    text = capsys.readouterr().out
    assert "paired two-sided t-test" in text and "Holm" in text and "bm25" in text and "x100" in text
    table = pd.read_csv(out)
    assert list(table.columns[:2]) == ["qid", "run"] and len(table) == 100


def test_a_subset_on_which_the_fold_aggregate_is_undefined_says_so(cached_data, capsys, collection, tmp_path):
    fold1 = {q for q in collection.queries if collection.test_fold_of(q) == "fold1"}
    settings = RunSettings(model="bm25", queries=tuple(sorted(q for q in fold1 if q.endswith("_method"))))
    obtain(bind(settings, collection, tmp_path))
    folder = run_folder(tmp_path, settings, collection.name)
    assert cli.main(["evaluate", "--dataset", "csfcube", "--runs", str(folder)]) == 0
    text = capsys.readouterr().out
    assert "note: method: no evaluated query is in the test half of fold2, so the fold aggregate is undefined" in text
    assert "note: background: no query of it was evaluated" in text
    assert _json(capsys, "--runs", str(folder))["notes"]
    assert not _json(capsys, "--runs", str(folder), "--aggregate", "mean").get("notes")


@pytest.mark.parametrize("extra, message", [
    (["--runs", "{0}"], "given twice"),
    (["--runs", "{1}", "--name", "specter"], "--name: picks the official files of one folder"),
])
def test_bad_comparisons_fail_in_one_line(cached_data, capsys, runs, extra, message):
    argv = ["evaluate", "--dataset", "csfcube", "--runs", str(runs[0])] + [a.format(*runs) for a in extra]
    assert cli.main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1
