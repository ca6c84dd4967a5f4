"""The `evalkit` command: official figures as JSON, TREC input, and one-line errors with status 2."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from evalkit import cli, runs

OFFICIAL_SPECTER = {"background": 0.6624, "method": 0.3765, "result": 0.5643, "all": 0.5314}
PARTS = ["background", "method", "result", "all"]


def _evaluate(runs_path, *extra, name="specter"):
    argv = ["evaluate", "--dataset", "csfcube", "--runs", str(runs_path)]
    if name:
        argv += ["--name", name]
    return argv + list(extra)


def _json_out(capsys, argv) -> dict:
    assert cli.main(argv) == 0
    out, err = capsys.readouterr()
    assert err == ""
    assert len(out.strip().splitlines()) == 1  # exactly one JSON object on one line
    return json.loads(out)


def _command() -> list[str]:
    script = Path(sys.executable).parent / "evalkit"
    return [str(script)] if script.exists() else [sys.executable, "-m", "evalkit.cli"]


def _subprocess(args):
    return subprocess.run(_command() + args, capture_output=True, text=True, env=dict(os.environ), timeout=120)


# --- evaluate ------------------------------------------------------------------------------


@pytest.fixture
def cached_data(data, monkeypatch):
    """Skip re-verifying and re-parsing the release in tests about output (the first test does it for real)."""
    monkeypatch.setattr(cli.csfcube, "load", lambda root=None: data)


def test_evaluate_json_gives_the_official_figures(capsys, sample_dir):
    summary = _json_out(capsys, _evaluate(sample_dir, "--json"))
    assert list(summary["ndcg@20"]) == PARTS and list(summary["p-mrr"]) == PARTS
    assert {p: round(v, 4) for p, v in summary["ndcg@20"].items()} == OFFICIAL_SPECTER
    assert summary["p-mrr"] == {p: 0.0 for p in PARTS}
    assert summary["queries"] == {"background": 16, "method": 17, "result": 17, "all": 50}
    assert summary["settings"] == {"discount": "csfcube", "aggregate": "folds", "k": 20}
    assert {"map", "mrr", "p@20", "r@20"} <= set(summary)


def test_evaluate_trec_discount_differs(cached_data, capsys, sample_dir):
    official = _json_out(capsys, _evaluate(sample_dir, "--json"))
    trec = _json_out(capsys, _evaluate(sample_dir, "--json", "--discount", "trec"))
    assert {p: round(v, 4) for p, v in trec["ndcg@20"].items()} == {
        "background": 0.6644, "method": 0.3814, "result": 0.5682, "all": 0.5350,
    }
    assert all(trec["ndcg@20"][p] != official["ndcg@20"][p] for p in PARTS)
    assert trec["map"] == official["map"]  # only NDCG depends on the discount
    assert trec["settings"]["discount"] == "trec"


def test_evaluate_plain_mean_aggregate(cached_data, capsys, sample_dir):
    folds = _json_out(capsys, _evaluate(sample_dir, "--json"))
    plain = _json_out(capsys, _evaluate(sample_dir, "--json", "--aggregate", "mean"))
    assert plain["ndcg@20"]["all"] != folds["ndcg@20"]["all"]
    assert plain["p-mrr"] == folds["p-mrr"]


def test_evaluate_trec_file_gives_the_same_numbers(cached_data, capsys, sample_dir, specter, tmp_path):
    path = tmp_path / "specter.trec"
    runs.write_trec(path, specter, "specter")
    from_official = _json_out(capsys, _evaluate(sample_dir, "--json"))
    from_trec = _json_out(capsys, _evaluate(path, "--json", name=None))
    assert from_trec == from_official


def test_evaluate_writes_per_query_csv(cached_data, capsys, sample_dir, tmp_path):
    csv = tmp_path / "per_query.csv"
    summary = _json_out(capsys, _evaluate(sample_dir, "--json", "--per-query", str(csv)))
    table = pd.read_csv(csv, index_col="qid", dtype={"seed": str})
    assert len(table) == 50
    background = table[table.facet == "background"]
    by_fold = background.groupby("fold")["ndcg@20"].mean()
    assert (by_fold.mean()) == pytest.approx(summary["ndcg@20"]["background"], abs=1e-12)


def test_evaluate_prints_a_table_without_json(cached_data, capsys, sample_dir):
    assert cli.main(_evaluate(sample_dir)) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0] == "specter on CSFCube (test folds)"
    ndcg_row = next(line for line in out.splitlines() if line.startswith("ndcg@20"))
    assert ndcg_row.split()[1:] == ["0.6624", "0.3765", "0.5643", "0.5314"]


def test_human_json_has_the_same_shape(capsys):
    summary = _json_out(capsys, ["human", "--json"])
    assert list(summary["ndcg@20"]) == PARTS and list(summary["p-mrr"]) == PARTS
    assert round(summary["ndcg@20"]["all"], 4) == 0.7759
    assert all(not math.isnan(v) for v in summary["p-mrr"].values())


def test_data_prints_the_verified_folder(capsys, data):
    assert cli.main(["data", "--path"]) == 0
    assert capsys.readouterr().out.strip() == str(data.root)
    assert cli.main(["data"]) == 0
    assert "50 queries, 4205 papers, sha256 verified" in capsys.readouterr().out


def test_installed_command_prints_one_json_object(sample_dir):
    done = _subprocess(_evaluate(sample_dir, "--json"))
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert {p: round(v, 4) for p, v in summary["ndcg@20"].items()} == OFFICIAL_SPECTER
    assert summary["p-mrr"]["all"] == 0.0


# --- bad input: status 2, one line naming the file, no traceback ---------------------------


def _edit_official(directory: Path, facet: str, edit) -> Path:
    path = runs.official_path(directory, "specter", facet)
    body = json.loads(path.read_text())
    edit(body)
    path.write_text(json.dumps(body))
    return path


def _malformed(ctx):
    path = runs.official_path(ctx["runs"], "specter", "method")
    path.write_text('{"5052952": [["123", 1.0],')
    return _evaluate(ctx["runs"]), [str(path), "malformed JSON"]


def _unknown_seed(ctx):
    _edit_official(ctx["runs"], "background", lambda b: b.update({"999999": [["388", 1.0]]}))
    return _evaluate(ctx["runs"]), [str(ctx["runs"]), "unknown seed/facet 999999_background"]


def _outside_pool(ctx):
    pool = set(ctx["data"].queries["10014168_background"].pool)
    outsider = next(pid for pid in ctx["data"].papers if pid not in pool)
    _edit_official(ctx["runs"], "background", lambda b: b["10014168"].append([outsider, 0.0]))
    return _evaluate(ctx["runs"]), [str(ctx["runs"]), f"candidate {outsider} for 10014168_background"]


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


def _zero_cut_off(ctx):
    return _evaluate(ctx["runs"], "--k", "0"), ["k=0"]


def _unknown_dataset(ctx):
    return ["evaluate", "--dataset", "msmarco", "--runs", str(ctx["runs"]), "--name", "specter"], ["'msmarco'"]


BAD_INPUTS = [
    _malformed, _unknown_seed, _outside_pool, _duplicate, _non_numeric, _nan_distance, _missing_runs_dir,
    _unknown_name, _missing_data_dir, _checksum_mismatch, _trec_wrong_columns, _trec_binary, _empty_trec,
    _per_query_unwritable, _zero_cut_off, _unknown_dataset,
]


@pytest.fixture
def ctx(data, sample_copy, tmp_path, monkeypatch, request):
    context = {"data": data, "runs": sample_copy, "tmp": tmp_path, "monkeypatch": monkeypatch}
    if request.node.callspec.params.get("case") is _checksum_mismatch:
        context["data_copy"] = request.getfixturevalue("data_copy")
    return context


@pytest.mark.parametrize("case", BAD_INPUTS, ids=lambda f: f.__name__.strip("_"))
def test_bad_input_exits_2_with_one_line(capsys, ctx, case):
    argv, fragments = case(ctx)
    assert cli.main(argv + ["--json"]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("evalkit: error: ")
    for fragment in fragments:
        assert fragment in lines[0]
    assert "Traceback" not in err


@pytest.mark.parametrize("case", [_malformed, _missing_data_dir], ids=lambda f: f.__name__.strip("_"))
def test_installed_command_bad_input_has_no_traceback(ctx, case):
    argv, fragments = case(ctx)
    done = _subprocess(argv)  # inherits the environment, CSFCUBE_DIR included, as monkeypatch set it
    assert done.returncode == 2
    assert done.stdout == ""
    assert len(done.stderr.splitlines()) == 1, done.stderr
    assert done.stderr.startswith("evalkit: error: ")
    assert all(fragment in done.stderr for fragment in fragments)
    assert "Traceback" not in done.stderr
