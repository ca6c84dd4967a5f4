"""The published CSFCube record (evalkit/config/published_csfcube.csv) and `evalkit verify`."""

from __future__ import annotations

import json
import math

import pandas as pd
import pytest

from evalkit import cli
from evalkit.core.errors import KitError
from evalkit.data.protocols import PROTOCOLS
from evalkit.study import record

HEADER = ",".join(record.COLUMNS)


def test_record_has_every_required_row_with_a_source():
    table = record.load_record()
    aggregates = {(r["row"], r["metric"]): r["all"] for _, r in table.iterrows()}
    assert aggregates[("SPECTER", "MAP")] == 34.23 and aggregates[("SPECTER", "NDCG%20")] == 53.28
    assert aggregates[("all-mpnet-base-v2 (sbmpnet1B)", "MAP")] == 34.64
    assert aggregates[("all-mpnet-base-v2 (sbmpnet1B)", "NDCG%20")] == 54.94
    assert aggregates[("otAspire (paper: mean of three runs)", "MAP")] == 40.79
    assert aggregates[("otAspire (released checkpoint)", "NDCG%20")] == 61.81
    assert all(table["source"].str.len() > 20)
    assert set(table["protocol"]) <= set(PROTOCOLS)
    specter = table[table["row"] == "SPECTER"].set_index("metric")
    assert specter.loc["MAP", "method"] == 22.44 and specter.loc["NDCG%20", "result"] == 56.67
    assert math.isnan(table[table["row"] == "otAspire (released checkpoint)"]["background"].iloc[0])


def test_the_release_sample_reproduces_the_specter_row(collection, specter):
    compared = record.compare(record.load_record(), "SPECTER", record.official_figures(collection, specter))
    assert len(compared) == 8 and (compared["difference"] == 0).all() and not compared["flag"].any()


@pytest.mark.parametrize("line, message", [
    ("x,,paper,pool,MRR,1,2,3,4,src,", "metric 'MRR'"),
    ("x,,paper,pool,MAP,1,2,3,4, ,", "needs its source"),
    ("x,,paper,pool,MAP,1,2,3,140,src,", "between 0 and 100"),
    ("x,,paper,pool,MAP,1,two,3,4,src,", "method must be a number"),
])
def test_bad_record_lines_are_one_line_errors(tmp_path, line, message):
    path = tmp_path / "record.csv"
    path.write_text(f"{HEADER}\n{line}\n")
    with pytest.raises(KitError, match=message):
        record.load_record(path)


def test_ranking_agreement_ignores_documents_the_reference_lacks():
    reference = {"q": {"a": 3.0, "b": 2.0}, "r": {"a": 1.0, "b": 2.0}}
    run = {"q": {"seed": 9.0, "a": 2.0, "b": 1.0}, "r": {"a": 2.0, "b": 1.0}}
    assert record.ranking_agreement(run, reference) == (1, 2)


def test_verify_prints_kit_against_published_and_flags_differences(collection, capsys, tmp_path, monkeypatch):
    monkeypatch.setattr("evalkit.cli.verify.load_dataset", lambda spec: collection)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("EVALKIT_CACHE", str(tmp_path / "cache"))
    path = tmp_path / "record.csv"
    rows = [line for line in record.RECORD.read_text().splitlines()[1:] if line.startswith("SPECTER,")]
    path.write_text("\n".join([HEADER, *rows, "BM25 as published,bm25,offline,pool,MAP,,,,99.00,a made-up source,"])
                    + "\n")
    monkeypatch.setattr(record, "RECORD", path)
    status = cli.main(["verify", "--runs-dir", str(tmp_path / "runs"), "--models", "bm25"])
    out = capsys.readouterr().out
    assert status == 1
    assert "release sample (SPECTER rankings)     MAP        all      34.23 34.23        0.00" in out
    bm25 = next(line for line in out.splitlines() if "BM25 as published" in line and " MAP " in line)
    assert bm25.split()[-1] == "DIFFERS"
    assert "more than 0.5 points from the record" in out and "a made-up source" in out
    assert (tmp_path / "runs" / "offline" / "csfcube" / "pool" / "bm25").is_dir()  # the run is stored, reused


def test_verify_reports_absent_weights_and_unknown_models(collection, capsys, tmp_path, monkeypatch):
    monkeypatch.setattr("evalkit.cli.verify.load_dataset", lambda spec: collection)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("EVALKIT_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("EVALKIT_MODELS", str(tmp_path / "models.yaml"))
    (tmp_path / "models.yaml").write_text(json.dumps({"profiles": {"paper": {"first_stage": "specter", "depth": 5,
        "models": {"specter": {"family": "paper-cls", "model": str(tmp_path / "absent")}}}}}))
    assert cli.main(["verify", "--runs-dir", str(tmp_path / "runs"), "--models", "specter"]) == 0
    out = capsys.readouterr().out
    assert f"SPECTER: not run ({tmp_path / 'absent'}: cannot load the tokenizer" in out and "DIFFERS" not in out
    assert cli.main(["verify", "--runs-dir", str(tmp_path / "runs"), "--models", "nope"]) == 2
    assert "has no row in the published record" in capsys.readouterr().err


def test_the_relevance_notebooks_official_section_sets_the_record_beside_the_kit(collection, tmp_path, monkeypatch):
    """OFFICIAL=yes: every model's MAP_csfcube and nDCG_csfcube%20 (as `official_figures` of its run),
    then every published row of the record, each naming its protocol; refused off the pools."""
    from notebook_cells import run_cells

    from evalkit.pipeline.runner import RunSettings, bind, obtain
    from evalkit.study import params
    from evalkit.study.record import load_record, official_figures

    monkeypatch.setenv("EVALKIT_CACHE", str(tmp_path / "cache"))
    study = params.check("relevance", PROFILE="offline", PROTOCOL="pool", MODELS="bm25", REFERENCE_MODEL="bm25",
                         DISCOUNT="csfcube",
                         RUNS_DIR=str(tmp_path / "runs"), OUTPUT_DIR=str(tmp_path / "build"), OFFICIAL="yes")
    assert study.official and study.tag.startswith("offline-pool-custom-")
    run_cells("relevance", study)  # the notebook's own official cell
    table = pd.read_csv(tmp_path / "build" / "tables" / f"relevance-official-{study.tag}.csv")
    kit = table[table["source"] == "kit"].set_index("measure")
    expected = official_figures(collection, obtain(bind(RunSettings(model="bm25"), collection, tmp_path / "runs")).run)
    for metric, parts in expected.items():
        shown = kit.loc[metric, ["background", "method", "result", "all"]].tolist()
        assert shown == pytest.approx(list(parts.values()))
    published = table[table["role"] == "published"]
    assert len(published) == len(load_record()) and set(published["protocol"]) <= {"pool", "released"}
    off = params.check("relevance", PROFILE="offline", PROTOCOL="pool", MODELS="bm25", REFERENCE_MODEL="bm25",
                       DISCOUNT="csfcube",
                       RUNS_DIR=str(tmp_path / "runs"), OUTPUT_DIR=str(tmp_path / "off"))
    run_cells("relevance", off)
    assert not list((tmp_path / "off" / "tables").glob("relevance-official-*"))  # a sentence says how, no table
    with pytest.raises(KitError, match="OFFICIAL=yes: the official measures are defined on the judged pools"):
        params.check("relevance", PROFILE="offline", PROTOCOL="pooled", MODELS="bm25", OFFICIAL="yes")
