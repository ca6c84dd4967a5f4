"""The `evalkit` command: official figures, run + evaluate round trip, JSON without NaN, and
one-line errors with status 2 for every bad input (argparse's included)."""

from __future__ import annotations

import contextlib
import io
import json
import math
import os
import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest
from fixtures_datasets import write_beir, write_instructir

from evalkit import cli
from evalkit.data import runs
from evalkit.datasets import csfcube_official, load_dataset
from evalkit.evaluation import measures

OFFICIAL_SPECTER = {"background": 0.6624, "method": 0.3765, "result": 0.5643, "all": 0.5314}
# trec nDCG@20: the seed 8781666 not judged (pool protocol); judged on the pools as released: 0.6644 / 0.5682 / 0.5350
TREC_SPECTER = {"background": 0.6673, "method": 0.3814, "result": 0.5716, "all": 0.5370}
PARTS = ["background", "method", "result", "all"]
TABLE = ["nDCG_csfcube@20", "AP", "RR", "P@20", "R@20", "p-MRR", "MAP_csfcube", "nDCG_csfcube%20"]
PUBLISHED_SPECTER = {"MAP_csfcube": {"background": 0.4395, "method": 0.2244, "result": 0.3679, "all": 0.3423},
                     "nDCG_csfcube%20": {"background": 0.6670, "method": 0.3741, "result": 0.5667, "all": 0.5328}}


def _evaluate(runs_path, *extra, name="specter", dataset="csfcube"):
    argv = ["evaluate", "--dataset", dataset, "--runs", str(runs_path)]
    if name:
        argv += ["--name", name]
    return argv + list(extra)


def _json_out(capsys, argv) -> dict:
    assert cli.main(argv) == 0
    out, err = capsys.readouterr()
    assert err == ""
    assert len(out.strip().splitlines()) == 1  # exactly one JSON object on one line
    return json.loads(out)


def _rounded(parts: dict) -> dict:
    return {p: round(v, 4) for p, v in parts.items()}


def _command() -> list[str]:
    script = Path(sys.executable).parent / "evalkit"
    return [str(script)] if script.exists() else [sys.executable, "-m", "evalkit.cli"]


def _subprocess(args):
    return subprocess.run(_command() + args, capture_output=True, text=True, env=dict(os.environ), timeout=120)


def _assert_one_line_error(err: str, fragments=()) -> None:
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("evalkit: error: ")
    assert "Traceback" not in err and "usage:" not in err
    for fragment in fragments:
        assert fragment in lines[0]


# --- evaluate on CSFCube ---------------------------------------------------------------------


def test_evaluate_json_gives_the_official_figures(capsys, sample_dir):
    summary = _json_out(capsys, _evaluate(sample_dir, "--json"))
    assert list(summary) == TABLE + ["queries", "settings"]
    assert all(list(summary[m]) == PARTS for m in TABLE)
    assert _rounded(summary["nDCG_csfcube@20"]) == OFFICIAL_SPECTER
    assert {m: _rounded(summary[m]) for m in PUBLISHED_SPECTER} == PUBLISHED_SPECTER
    assert summary["p-MRR"] == {p: 0.0 for p in PARTS}
    assert summary["queries"] == {"background": 16, "method": 17, "result": 17, "all": 50}
    assert summary["settings"] == {"dataset": "csfcube", "measures": TABLE, "aggregate": "folds",
                                   "discount": "csfcube", "k": 20, "pmrr_ties": "kit", "protocol": "pool"}


def test_evaluate_released_protocol_judges_the_seed(cached_data, capsys, sample_dir):
    """The SPECTER sample leaves seed 8781666 out of its own pools: judged on the pools as released,
    it caps trec AP (34.09); the official MAP reads only the ranked list (34.23 either way)."""
    released = _json_out(capsys, _evaluate(sample_dir, "--json", "--protocol", "released"))
    assert round(released["AP"]["all"], 4) == 0.3409
    assert {m: _rounded(released[m]) for m in PUBLISHED_SPECTER} == PUBLISHED_SPECTER
    assert released["settings"]["protocol"] == "released"


def test_evaluate_prints_the_official_table(cached_data, capsys, sample_dir):
    assert cli.main(_evaluate(sample_dir)) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "specter on csfcube (test folds), values x100"
    assert lines[1].split() == PARTS
    ndcg_row = next(line for line in lines if line.startswith("nDCG_csfcube@20"))
    assert ndcg_row.split()[1:] == ["66.24", "37.65", "56.43", "53.14"]  # the official discount at rank 20, x100
    assert not any(line.startswith("MAP_csfcube") for line in lines)  # equal to AP here: printed once
    assert "same_as=MAP_csfcube:AP" in lines[-1]


def test_evaluate_trec_discount_differs(cached_data, capsys, sample_dir):
    official = _json_out(capsys, _evaluate(sample_dir, "--json"))
    trec = _json_out(capsys, _evaluate(sample_dir, "--json", "--discount", "trec"))
    assert _rounded(trec["nDCG@20"]) == TREC_SPECTER
    assert trec["nDCG_csfcube@20"] == official["nDCG_csfcube@20"]  # the collection's own measure stays
    assert trec["AP"] == official["AP"]  # only NDCG depends on the discount
    assert trec["settings"]["discount"] == "trec"


def test_evaluate_cut_off_and_explicit_measures(cached_data, capsys, sample_dir):
    at10 = _json_out(capsys, _evaluate(sample_dir, "--json", "--k", "10"))
    assert {"nDCG_csfcube@10", "P@10", "R@10", "nDCG_csfcube@20"} <= set(at10)
    chosen = _json_out(capsys, _evaluate(sample_dir, "--json", "--measures", "nDCG@20, RR@10"))
    assert list(chosen) == ["nDCG@20", "RR@10", "queries", "settings"]
    assert _rounded(chosen["nDCG@20"]) == TREC_SPECTER
    assert chosen["settings"] == {"dataset": "csfcube", "measures": ["nDCG@20", "RR@10"], "aggregate": "folds",
                                  "protocol": "pool"}


def test_evaluate_plain_mean_aggregate(cached_data, capsys, sample_dir):
    folds = _json_out(capsys, _evaluate(sample_dir, "--json"))
    plain = _json_out(capsys, _evaluate(sample_dir, "--json", "--aggregate", "mean"))
    assert plain["nDCG_csfcube@20"]["all"] != folds["nDCG_csfcube@20"]["all"]
    assert plain["p-MRR"] == folds["p-MRR"]


def test_evaluate_trec_file_gives_the_same_numbers(cached_data, capsys, sample_dir, specter, tmp_path):
    path = tmp_path / "specter.trec"
    runs.write_trec(path, specter, "specter")
    from_official = _json_out(capsys, _evaluate(sample_dir, "--json"))
    from_trec = _json_out(capsys, _evaluate(path, "--json", name=None))
    assert from_trec == from_official


def test_evaluate_writes_per_query_csv(cached_data, capsys, sample_dir, tmp_path):
    csv = tmp_path / "per_query.csv"
    summary = _json_out(capsys, _evaluate(sample_dir, "--json", "--per-query", str(csv)))
    table = pd.read_csv(csv, index_col="qid")
    assert len(table) == 50 and list(table.columns) == ["stratum", "fold", *[m for m in TABLE if m != "p-MRR"], "p-MRR"]
    by_fold = table[table.stratum == "background"].groupby("fold")["nDCG_csfcube@20"].mean()
    assert by_fold.mean() == pytest.approx(summary["nDCG_csfcube@20"]["background"], abs=1e-12)


def test_json_writes_null_for_nan(cached_data, capsys, sample_dir, tmp_path):
    """One facet only: no p-MRR pair is covered and two strata have no query."""
    shutil.copyfile(csfcube_official.official_path(sample_dir, "specter", "background"),
                    csfcube_official.official_path(tmp_path, "specter", "background"))
    assert cli.main(_evaluate(tmp_path, "--json")) == 0
    out = capsys.readouterr().out
    assert "NaN" not in out
    summary = json.loads(out)
    assert summary["p-MRR"] == {p: None for p in PARTS}
    assert summary["nDCG_csfcube@20"]["method"] is None
    assert round(summary["nDCG_csfcube@20"]["background"], 4) == OFFICIAL_SPECTER["background"]
    assert summary["queries"] == {"background": 16, "method": 0, "result": 0, "all": 16}
    assert cli.main(_evaluate(tmp_path)) == 0  # the table shows NaN as "-"
    ap_row = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("AP "))
    assert ap_row.split() == ["AP", "43.95", "-", "-", "43.95"]  # the excluded seed is not judged


def test_human_json_has_the_same_shape(capsys):
    summary = _json_out(capsys, ["human", "--json"])
    assert list(summary) == TABLE + ["queries", "settings"]
    assert all(list(summary[m]) == PARTS for m in TABLE)
    assert round(summary["nDCG_csfcube@20"]["all"], 4) == 0.7738  # pool recipe, seed excluded as for models
    assert all(not math.isnan(v) for v in summary["p-MRR"].values())


def test_data_prints_the_verified_folder(capsys, data):
    assert cli.main(["data", "--path"]) == 0
    assert capsys.readouterr().out.strip() == str(data.root)
    assert cli.main(["data"]) == 0
    assert "50 queries, 4205 papers, sha256 verified" in capsys.readouterr().out


def test_models_lists_the_profile(capsys):
    assert cli.main(["models"]) == 0
    rows = [line.split("\t") for line in capsys.readouterr().out.splitlines()]
    assert ["bm25", "bm25", "agnostic", "BM25"] in rows


def test_each_command_is_handled_by_its_own_module():
    """The CLI split by command: `evalkit NAME` is parsed and handled in `evalkit/cli/NAME.py`."""
    import argparse

    commands = next(a for a in cli.build_parser()._actions if isinstance(a, argparse._SubParsersAction)).choices
    assert list(commands) == ["run", "evaluate", "human", "models", "report", "export", "plan", "verify", "data"]
    assert {name: sub.get_default("func").__module__ for name, sub in commands.items()} == \
        {name: f"evalkit.cli.{name}" for name in commands}


def test_protocol_choices_are_the_library_protocols():
    """Every command's --protocol offers exactly `evalkit.data.protocols.PROTOCOLS` (one definition),
    and refuses another name by the request's rule (`check_protocol`), not argparse's choices."""
    import argparse

    from evalkit.cli.options import choices
    from evalkit.data.protocols import PROTOCOLS

    parser = cli.build_parser()
    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices
    offered = {name: next(a for a in sub._actions if a.dest == "protocol")
               for name, sub in commands.items() if any(a.dest == "protocol" for a in sub._actions)}
    assert set(offered) >= {"run", "evaluate", "human", "plan"}
    assert all(a.metavar == choices(PROTOCOLS) and a.choices is None for a in offered.values()), offered


def test_installed_command_prints_one_json_object(sample_dir):
    done = _subprocess(_evaluate(sample_dir, "--json"))
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert _rounded(summary["nDCG_csfcube@20"]) == OFFICIAL_SPECTER
    assert summary["p-MRR"]["all"] == 0.0


# --- run + evaluate round trip on a BEIR folder -------------------------------------------------


@pytest.fixture(scope="module")
def beir_run(tmp_path_factory):
    """`evalkit run` with BM25 over the BEIR fixture: (dataset spec, run folder, runs dir)."""
    root = tmp_path_factory.mktemp("beir")
    spec = f"beir:{write_beir(root / 'scifix')}"
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        assert cli.main(["run", "--dataset", spec, "--model", "bm25", "--runs-dir", str(root / "runs")]) == 0
    return spec, Path(out.getvalue().strip()), root / "runs"


def test_run_writes_a_run_store_folder(beir_run):
    spec, folder, runs_dir = beir_run
    store_name = load_dataset(spec).store_name  # the folder's name and its data's identity
    assert store_name.startswith("scifix-") and folder == runs_dir / "offline" / store_name / "pool" / "bm25"
    assert sorted(p.name for p in folder.iterdir()) == ["run.trec", "sidecar.json"]
    assert sorted(runs.read_trec(folder / "run.trec")) == ["q1", "q2", "q3", "q4"]


def test_run_then_evaluate_round_trip(beir_run, capsys, tmp_path):
    spec, folder, _ = beir_run
    csv = tmp_path / "pq.csv"
    summary = _json_out(capsys, _evaluate(folder, "--json", "--per-query", str(csv), name=None, dataset=spec))
    assert list(summary) == ["nDCG@10", "queries", "settings"]  # the collection's own measures
    assert summary["queries"] == {"all": 3}  # the test half of the dev/test fold
    run = runs.read_trec(folder / "run.trec")
    collection = load_dataset(spec)
    expected = measures.judged_values(collection.qrels, run, ["nDCG@10"], 1)["nDCG@10"]
    assert summary["nDCG@10"]["all"] == pytest.approx(expected[["q1", "q2", "q3"]].mean())
    assert pd.read_csv(csv, index_col="qid")["nDCG@10"].to_dict() == pytest.approx(expected.to_dict())
    # the run file alone gives the same numbers; the plain mean counts the dev query too
    assert _json_out(capsys, _evaluate(folder / "run.trec", "--json", name=None, dataset=spec)) == summary
    plain = _json_out(capsys, _evaluate(folder, "--json", "--aggregate", "mean", name=None, dataset=spec))
    assert plain["queries"] == {"all": 4}
    chosen = _json_out(capsys, _evaluate(folder, "--json", "--measures", "AP,P@5", name=None, dataset=spec))
    assert list(chosen) == ["AP", "P@5", "queries", "settings"]


def test_instructir_robustness(capsys, tmp_path):
    spec = f"instructir:{write_instructir(tmp_path / 'instructir')}"
    assert cli.main(["run", "--dataset", spec, "--model", "bm25", "--runs-dir", str(tmp_path / "runs")]) == 0
    folder = capsys.readouterr().out.strip()
    csv = tmp_path / "pq.csv"
    summary = _json_out(capsys, _evaluate(folder, "--json", "--per-query", str(csv), name=None, dataset=spec))
    assert list(summary) == ["nDCG@10", "robustness@10", "queries", "settings"]
    assert summary["settings"]["aggregate"] == "mean"  # no folds: the plain mean
    ndcg = pd.read_csv(csv, index_col="qid", dtype={"qid": str})["nDCG@10"]
    groups = [["7_1", "7_2"], ["8_1"]]
    assert summary["robustness@10"] == {"all": pytest.approx(sum(ndcg[g].min() for g in groups) / 2)}
    assert summary["nDCG@10"]["all"] == pytest.approx(ndcg.mean())


def test_run_a_query_subset(beir_run, capsys, tmp_path):
    spec, _, _ = beir_run
    assert cli.main(["run", "--dataset", spec, "--model", "bm25", "--queries", "q2,q1,q2",
                     "--runs-dir", str(tmp_path)]) == 0
    folder = Path(capsys.readouterr().out.strip())
    assert folder.parent == tmp_path / "offline" / load_dataset(spec).store_name / "pool"
    assert folder.name.startswith("bm25@subset-")
    assert sorted(runs.read_trec(folder / "run.trec")) == ["q1", "q2"]


def test_run_reuses_a_matching_stored_run_and_writes_nothing(beir_run, capsys, tmp_path, monkeypatch):
    spec, _, _ = beir_run
    argv = ["run", "--dataset", spec, "--model", "bm25", "--runs-dir", str(tmp_path)]
    assert cli.main(argv) == 0
    folder = Path(capsys.readouterr().out.strip())
    before = {p.name: p.stat().st_ino for p in [folder, *folder.iterdir()]}

    def no_scoring(*args, **kwargs):
        raise AssertionError("scored again although a matching run is stored")

    monkeypatch.setattr("evalkit.pipeline.runner.compute", no_scoring)
    assert cli.main(argv) == 0
    assert Path(capsys.readouterr().out.strip()) == folder
    assert {p.name: p.stat().st_ino for p in [folder, *folder.iterdir()]} == before
    assert sorted(p.name for p in folder.parent.iterdir()) == ["bm25"]


def test_run_csfcube_seeds_select_their_queries(cached_data, capsys, tmp_path, monkeypatch):
    seen = {}
    monkeypatch.setattr("evalkit.pipeline.runner.obtain",
                        lambda bound, **options: SimpleNamespace(folder=tmp_path,
                                                                 settings=seen.setdefault("s", bound.settings)))
    assert cli.main(["run", "--dataset", "csfcube", "--model", "bm25", "--seeds", "929877,10014168",
                     "--runs-dir", str(tmp_path)]) == 0
    # in collection order, however the seeds are listed (one selection, one run key)
    assert seen["s"].queries == ("10014168_background", "929877_background", "929877_method")
    assert cli.main(["run", "--dataset", "csfcube", "--model", "bm25", "--seeds", "10014168,929877",
                     "--runs-dir", str(tmp_path)]) == 0
    assert seen["s"].queries == ("10014168_background", "929877_background", "929877_method")


# --- bad input: status 2, one line naming the problem, no traceback -------------------------------


def _edit_official(directory: Path, facet: str, edit) -> Path:
    path = csfcube_official.official_path(directory, "specter", facet)
    body = json.loads(path.read_text())
    edit(body)
    path.write_text(json.dumps(body))
    return path


def _malformed(ctx):
    path = csfcube_official.official_path(ctx["runs"], "specter", "method")
    path.write_text('{"5052952": [["123", 1.0],')
    return _evaluate(ctx["runs"]), [str(path), "malformed JSON"]


def _unknown_seed(ctx):
    _edit_official(ctx["runs"], "background", lambda b: b.update({"999999": [["388", 1.0]]}))
    return _evaluate(ctx["runs"]), [str(ctx["runs"]), "unknown query 999999_background"]


def _outside_pool(ctx):
    pool = set(ctx["data"].queries["10014168_background"].pool)
    outsider = next(pid for pid in ctx["data"].papers if pid not in pool)
    _edit_official(ctx["runs"], "background", lambda b: b["10014168"].append([outsider, 1e9]))
    return _evaluate(ctx["runs"]), [str(ctx["runs"]), f"document {outsider} for 10014168_background"]


def _duplicate(ctx):
    path = _edit_official(ctx["runs"], "result", lambda b: b["8781666"].append(b["8781666"][0]))
    return _evaluate(ctx["runs"]), [str(path), "duplicate candidate"]


def _non_numeric(ctx):
    path = _edit_official(ctx["runs"], "method", lambda b: b["5052952"][0].__setitem__(1, "far"))
    return _evaluate(ctx["runs"]), [str(path), "non-numeric score 'far'"]


def _nan_distance(ctx):
    path = _edit_official(ctx["runs"], "method", lambda b: b["5052952"][0].__setitem__(1, float("nan")))
    assert "NaN" in path.read_text()  # the JSON literal
    return _evaluate(ctx["runs"]), [str(path), "NaN score"]


def _missing_runs_dir(ctx):
    missing = ctx["tmp"] / "no-runs-here"
    return _evaluate(missing), [str(missing), "no such run file or directory"]


def _unknown_name(ctx):
    return _evaluate(ctx["runs"], name="scincl"), [str(ctx["runs"]), "test-pid2pool-csfcube-scincl-FACET"]


def _folder_without_name(ctx):
    return _evaluate(ctx["runs"], name=None), [str(ctx["runs"]), "--name"]


def _name_with_trec_file(ctx):
    path = ctx["tmp"] / "run.trec"
    path.write_text("10014168_background Q0 5133576 1 -42.1 x\n")
    return _evaluate(path), [str(path), "drop --name"]


def _missing_data_dir(ctx):
    ctx["monkeypatch"].setenv("CSFCUBE_DIR", "/nonexistent/csfcube")
    return _evaluate(ctx["runs"]), ["/nonexistent/csfcube", "CSFCUBE_DIR"]


def _checksum_mismatch(ctx):
    path = ctx["data_copy"] / "test-pid2anns-csfcube-method.json"
    body = bytearray(path.read_bytes())
    body[100] = body[100] ^ 0x20
    path.write_bytes(bytes(body))
    ctx["monkeypatch"].setenv("CSFCUBE_DIR", str(ctx["data_copy"]))
    return _evaluate(ctx["runs"]), [str(path), "sha256 mismatch"]


def _trec_wrong_columns(ctx):
    path = ctx["tmp"] / "bad.trec"
    path.write_text("10014168_background Q0 5133576 1 -42.1\n")
    return _evaluate(path, name=None), [f"{path}:1", "expected 6 fields"]


def _trec_binary(ctx):
    path = ctx["tmp"] / "binary.trec"
    path.write_bytes(b"\x89PNG\r\n\x1a\n\xff\xfe")
    return _evaluate(path, name=None), [str(path), "not a UTF-8 text file"]


def _empty_trec(ctx):
    path = ctx["tmp"] / "empty.trec"
    path.write_text("")
    return _evaluate(path, name=None), [str(path), "ranks no queries"]


def _per_query_unwritable(ctx):
    target = ctx["tmp"] / "no-such-folder" / "per_query.csv"
    return _evaluate(ctx["runs"], "--per-query", str(target)), [str(target), "cannot write"]


def _per_query_is_the_run(ctx):
    target = csfcube_official.official_path(ctx["runs"], "specter", "method")
    return _evaluate(ctx["runs"], "--per-query", str(target)), [str(target), "input file"]


def _per_query_is_a_data_file(ctx):
    target = ctx["data"].root / "evaluation_splits.json"
    return _evaluate(ctx["runs"], "--per-query", str(target)), [str(target), "input file"]


def _per_query_is_a_folder(ctx):
    return _evaluate(ctx["runs"], "--per-query", str(ctx["tmp"])), [str(ctx["tmp"]), "is a folder"]


def _zero_cut_off(ctx):
    return _evaluate(ctx["runs"], "--k", "0"), ["--k 0", "positive"]


def _unknown_measure(ctx):
    return _evaluate(ctx["runs"], "--measures", "nDCG@20,MAP"), ["'MAP'"]


def _no_measures(ctx):
    return _evaluate(ctx["runs"], "--measures", " , "), ["names no measure"]


def _repeated_measure(ctx):
    return _evaluate(ctx["runs"], "--measures", "AP,AP"), ["AP twice"]


def _measures_with_k(ctx):
    return _evaluate(ctx["runs"], "--measures", "AP", "--k", "10"), ["--k", "--measures"]


def _measure_without_cut_off(ctx):
    return _evaluate(ctx["runs"], "--measures", "P"), ["'P'", "cut-off"]


def _unknown_dataset(ctx):
    return ["evaluate", "--dataset", "msmarco", "--runs", str(ctx["runs"]), "--name", "specter"], ["--dataset msmarco:"]


def _beir_folder_missing(ctx):
    missing = ctx["tmp"] / "no-beir"
    return _evaluate(ctx["runs"], dataset=f"beir:{missing}"), [f"beir:{missing}", "folder not found"]


def _beir_discount(ctx):
    spec = f"beir:{write_beir(ctx['tmp'] / 'beir')}"
    return _evaluate(ctx["trec"], "--discount", "trec", name=None, dataset=spec), ["--discount", "--measures"]


def _beir_pmrr(ctx):
    spec = f"beir:{write_beir(ctx['tmp'] / 'beir')}"
    return _evaluate(ctx["trec"], "--measures", "p-MRR", name=None, dataset=spec), ["p-MRR", "no"]


def _csfcube_run_on_beir(ctx):
    spec = f"beir:{write_beir(ctx['tmp'] / 'beir')}"
    return _evaluate(ctx["trec"], name=None, dataset=spec), ["unknown query 10014168_background"]


def _store_on_the_wrong_dataset(ctx):
    folder = _store(ctx)
    return _evaluate(folder, name=None), [str(folder), "made on 'scifix'"]


def _store_tampered(ctx):
    folder = _store(ctx)
    with open(folder / "run.trec", "a") as fh:
        fh.write("q1 Q0 d9 99 -1.0 bm25\n")
    return _evaluate(folder, name=None, dataset=ctx["store_spec"]), [str(folder), "sidecar.json"]


def _store(ctx) -> Path:
    """A copy of the BEIR fixture run's folder (the data sha256 matches the fixture folder)."""
    spec, folder, _ = ctx["request"].getfixturevalue("beir_run")
    ctx["store_spec"] = spec
    copy = ctx["tmp"] / "store" / "bm25"
    shutil.copytree(folder, copy)
    return copy


BAD_INPUTS = [
    _malformed, _unknown_seed, _outside_pool, _duplicate, _non_numeric, _nan_distance, _missing_runs_dir,
    _unknown_name, _folder_without_name, _name_with_trec_file, _missing_data_dir, _checksum_mismatch,
    _trec_wrong_columns, _trec_binary, _empty_trec, _per_query_unwritable, _per_query_is_the_run,
    _per_query_is_a_data_file, _per_query_is_a_folder, _zero_cut_off, _unknown_measure, _no_measures,
    _repeated_measure, _measures_with_k, _measure_without_cut_off, _unknown_dataset, _beir_folder_missing,
    _beir_discount, _beir_pmrr, _csfcube_run_on_beir, _store_on_the_wrong_dataset, _store_tampered,
]


@pytest.fixture
def ctx(data, sample_copy, specter, tmp_path, monkeypatch, request):
    trec = tmp_path / "specter.trec"
    runs.write_trec(trec, specter, "specter")
    context = {"data": data, "runs": sample_copy, "trec": trec, "tmp": tmp_path, "monkeypatch": monkeypatch,
               "request": request}
    case = request.node.callspec.params.get("case")
    if case is _checksum_mismatch:
        context["data_copy"] = request.getfixturevalue("data_copy")
    if case not in (_checksum_mismatch, _missing_data_dir):
        request.getfixturevalue("cached_data")
    return context


@pytest.mark.parametrize("case", BAD_INPUTS, ids=lambda f: f.__name__.strip("_"))
def test_bad_input_exits_2_with_one_line(capsys, ctx, case):
    argv, fragments = case(ctx)
    assert cli.main(argv + ["--json"]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    _assert_one_line_error(err, fragments)


@pytest.mark.parametrize("case", [_malformed, _missing_data_dir], ids=lambda f: f.__name__.strip("_"))
def test_installed_command_bad_input_has_no_traceback(ctx, case):
    argv, fragments = case(ctx)
    done = _subprocess(argv)  # inherits the environment, CSFCUBE_DIR included, as monkeypatch set it
    assert done.returncode == 2
    assert done.stdout == ""
    _assert_one_line_error(done.stderr, fragments)


# --- run: every argument checked before anything is scored ----------------------------------------


def _run(ctx, *extra, dataset=None):
    return ["run", "--dataset", dataset or ctx["beir"], "--model", "bm25", "--runs-dir", str(ctx["runs_dir"]),
            *extra]


BAD_RUNS = {
    "zero_depth": (lambda c: _run(c, "--protocol", "pooled", "--depth", "0"), ["--depth 0", "positive"]),
    "negative_depth": (lambda c: _run(c, "--protocol", "pooled", "--depth=-3"), ["--depth -3"]),
    "depth_with_pool": (lambda c: _run(c, "--depth", "5"), ["--depth", "pooled"]),
    "empty_queries": (lambda c: _run(c, "--queries", " ,, "), ["--queries", "names no ids"]),
    "empty_seeds": (lambda c: _run(c, "--seeds", ","), ["--seeds", "names no ids"]),
    "unknown_query": (lambda c: _run(c, "--queries", "q1,q9"), ["no query q9"]),
    "seeds_without_seed_papers": (lambda c: _run(c, "--seeds", "1"), ["--seeds", "--queries"]),
    "unknown_csfcube_seed": (lambda c: _run(c, "--seeds", "999", dataset="csfcube"), ["seed paper 999"]),
    "runs_dir_is_a_file": (lambda c: _run(c, "--runs-dir", str(c["file"])), ["a-file", "is a file"]),
    "runs_dir_under_a_file": (lambda c: _run(c, "--runs-dir", str(c["file"] / "x")), ["a-file/x", "is a file"]),
    "unknown_model": (lambda c: _run(c, "--model", "nope"), ["unknown model 'nope'"]),
    "unknown_profile": (lambda c: _run(c, "--profile", "nope"), ["unknown profile 'nope'"]),
    "unknown_first_stage": (lambda c: _run(c, "--protocol", "pooled", "--first-stage", "nope"), ["'nope'"]),
    "unknown_variant": (lambda c: _run(c, "--variant", "generic"), ["--variant generic: beir has the variants base"]),
    "full_without_corpus": (lambda c: _run(c, "--protocol", "full"), ["--corpus"]),
    "corpus_with_pool": (lambda c: _run(c, "--corpus", str(c["file"])), ["--corpus", "full"]),
    "missing_corpus": (lambda c: _run(c, "--protocol", "full", "--corpus", "/no/corpus.zip"), ["/no/corpus.zip"]),
    "empty_prompt": (lambda c: _run(c, "--prompt", " "), ["--prompt"]),
    "aspect_model_on_beir": (lambda c: _run(c, "--model", "minilm-aspire-ot"), ["minilm-aspire-ot", "sentences"]),
    "unknown_dataset_scheme": (lambda c: _run(c, dataset="trec:x"), ["unknown dataset scheme 'trec'"]),
}


@pytest.fixture
def run_ctx(tmp_path, monkeypatch):
    def no_scoring(*args, **kwargs):
        raise AssertionError("a bad argument reached scoring")

    monkeypatch.setattr("evalkit.pipeline.runner.compute", no_scoring)
    monkeypatch.setattr("evalkit.pipeline.runner.prepare", no_scoring)
    (tmp_path / "a-file").write_text("x")
    return {"beir": f"beir:{write_beir(tmp_path / 'beir')}", "runs_dir": tmp_path / "runs",
            "file": tmp_path / "a-file", "tmp": tmp_path}


@pytest.mark.parametrize("case", list(BAD_RUNS))
def test_bad_run_exits_2_before_scoring(capsys, run_ctx, case):
    make_argv, fragments = BAD_RUNS[case]
    assert cli.main(make_argv(run_ctx)) == 2
    out, err = capsys.readouterr()
    assert out == ""
    _assert_one_line_error(err, fragments)
    assert not run_ctx["runs_dir"].exists()


def test_unwritable_runs_dir_is_refused(capsys, run_ctx, monkeypatch):
    monkeypatch.setattr(os, "access", lambda path, mode: False)  # root may write anywhere
    assert cli.main(_run(run_ctx)) == 2
    _assert_one_line_error(capsys.readouterr().err, [str(run_ctx["tmp"]), "not writable"])


# --- argparse errors: one line too ------------------------------------------------------------------


ARGPARSE_ERRORS = {
    "no_command": ([], "required: command"),
    "unknown_command": (["frobnicate"], "invalid choice: 'frobnicate'"),
    "missing_dataset": (["evaluate", "--runs", "x"], "required: --dataset"),
    "missing_runs_dir": (["run", "--dataset", "csfcube", "--model", "bm25"], "required: --runs-dir"),
    "bad_choice": (["evaluate", "--dataset", "csfcube", "--runs", "x", "--format", "median"], "'median'"),
    "bad_int": (["run", "--dataset", "csfcube", "--model", "m", "--runs-dir", "r", "--depth", "many"], "'many'"),
    "unknown_option": (["human", "--frob"], "unrecognized arguments: --frob"),
}


def test_queries_and_seeds_are_refused_by_the_requests_rule(capsys):
    """--queries with --seeds: the selection rule's line (`check_selection`), as the API's seeds= with queries=."""
    argv = ["run", "--dataset", "csfcube", "--model", "m", "--runs-dir", "r", "--queries", "a", "--seeds", "b"]
    assert cli.main(argv) == 2
    _assert_one_line_error(capsys.readouterr().err, ["--seeds: give --seeds or --queries, not both"])


@pytest.mark.parametrize("case", list(ARGPARSE_ERRORS))
def test_argparse_errors_are_one_line(capsys, case):
    argv, fragment = ARGPARSE_ERRORS[case]
    with pytest.raises(SystemExit) as exit_info:
        cli.main(argv)
    assert exit_info.value.code == 2
    out, err = capsys.readouterr()
    assert out == ""
    _assert_one_line_error(err, [fragment])


def test_installed_command_argparse_error_is_one_line():
    done = _subprocess(["evaluate", "--dataset", "csfcube"])
    assert done.returncode == 2 and done.stdout == ""
    _assert_one_line_error(done.stderr, ["required: --runs"])


# --- other commands' bad input ------------------------------------------------------------------------


def test_human_refuses_other_datasets(capsys):
    assert cli.main(["human", "--dataset", "beir:x"]) == 2
    _assert_one_line_error(capsys.readouterr().err, ["only for csfcube"])


def test_report_refuses_a_missing_notebook(capsys, tmp_path):
    assert cli.main(["report", str(tmp_path / "nb.ipynb"), "--out", str(tmp_path / "r.html")]) == 2
    _assert_one_line_error(capsys.readouterr().err, ["nb.ipynb", "no such notebook"])


def test_models_refuses_an_unknown_profile(capsys):
    assert cli.main(["models", "--profile", "nope"]) == 2
    _assert_one_line_error(capsys.readouterr().err, ["unknown profile 'nope'"])


def test_evaluate_pmrr_ties_selects_mteb_order(cached_data, capsys, collection, specter, tmp_path):
    # ties everywhere (distances in bins of 4) and a facet-dependent shift, so p-MRR reads tied ranks
    from evalkit.evaluation import evaluate as evaluation

    tied = {q: {d: float(round(s / 4)) + (0.0 if q.endswith("_background") or int(d) % 3 else 1.0)
                for d, s in scores.items()} for q, scores in specter.items()}
    path = tmp_path / "tied.trec"
    runs.write_trec(path, tied, "tied")
    values = {}
    for ties in ("kit", "mteb"):
        summary = _json_out(capsys, _evaluate(path, "--measures", "p-MRR", "--pmrr-ties", ties, "--json", name=None))
        assert summary["settings"]["pmrr_ties"] == ties
        expected = evaluation.summarize(collection, evaluation.per_query(collection, tied, ["p-MRR"], ties))
        assert summary["p-MRR"] == pytest.approx(expected["p-MRR"], abs=1e-15)
        values[ties] = summary["p-MRR"]["all"]
    assert values["kit"] != pytest.approx(values["mteb"])  # the order matters on this run


@pytest.mark.parametrize("extra, line", [
    (["--workers", "2"], "evalkit: error: --workers 2: applies to the Ray executor; add --executor ray or drop it"),
    (["--executor", "ray", "--workers", "0"],
     "evalkit: error: --workers 0: must be a positive whole number (Ray workers)"),
])
def test_run_refuses_an_executor_request_in_one_line_naming_the_option(tmp_path, capsys, extra, line):
    beir = write_beir(tmp_path / "beir")
    assert cli.main(["run", "--dataset", f"beir:{beir}", "--model", "bm25", "--runs-dir", str(tmp_path / "runs"),
                     *extra]) == 2
    assert capsys.readouterr().err.strip() == line
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").rglob("run.trec"))


def test_the_comparison_header_names_the_aggregate_asked_for(cached_data, capsys, specter, tmp_path):
    """46.7: ``--aggregate mean`` says "the mean over queries", not "the fold aggregate", and its
    values are the plain means of the per-query values."""
    runs.write_trec(tmp_path / "a.trec", specter, "a")
    runs.write_trec(tmp_path / "b.trec", {q: {d: -s for d, s in docs.items()} for q, docs in specter.items()}, "b")
    argv = ["evaluate", "--dataset", "csfcube", "--runs", str(tmp_path / "a.trec"), "--runs", str(tmp_path / "b.trec"),
            "--format", "rows", "--measures", "RR"]
    for aggregate, words in (("mean", "(the mean over queries)"), ("folds", "(the fold aggregate)")):
        assert cli.main([*argv, "--aggregate", aggregate]) == 0
        header = capsys.readouterr().out.splitlines()[0]
        assert words in header and ("fold aggregate" in header) == (aggregate == "folds"), header
    assert cli.main(argv[:5] + ["--aggregate", "mean"]) == 0  # one run: its summary's header
    assert capsys.readouterr().out.splitlines()[0].endswith("on csfcube (mean over all queries), values x100")
    assert cli.main([*argv, "--aggregate", "mean", "--per-query", str(tmp_path / "pq.csv")]) == 0
    rows = capsys.readouterr().out.splitlines()
    per_query = pd.read_csv(tmp_path / "pq.csv", index_col=0)
    mean = 100 * per_query[per_query["run"] == "a"]["RR"].mean()
    line = next(r for r in rows if r.split()[:3] == ["RR", "all", "a"])
    assert float(line.split()[3]) == pytest.approx(mean, abs=0.005)
