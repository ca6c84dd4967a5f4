"""`make all`'s budget lines (evalkit.make.budget, issue 38 item 10): at its start the stages, the
work and an estimate naming its source (this machine's floor record for the same tag, else
evalkit plan's cost table); at its end each stage's wall time, which the launcher writes beside
the tables (OUTPUT_DIR/timings), never into a table or the executed notebook."""

from __future__ import annotations

import json
import shutil
import time

from notebook_run import ROOT

from evalkit.make import budget, launch

STEMS = ["relevance-offline-pool", "hybrid-offline-pooled"]
RECORD = {"tag": "offline-pool", "floor_s": 600.0, "texts": {"abstracts": 4000, "sentences": 30000, "queries": 900},
          "prompts": 900, "rates": {"texts_per_s": 60.0, "prompts_per_s": 3.0, "fixed_s": 20.0}, "ratio": 1.5,
          "load_before": [3.5, 3.0, 2.0], "cpus": 2}


def test_the_start_names_every_stage_the_work_and_the_floors_estimate(tmp_path, monkeypatch):
    record = tmp_path / "floor.json"
    record.write_text(json.dumps(RECORD))
    monkeypatch.setenv("EVALKIT_FLOOR", str(record))
    monkeypatch.setattr(budget, "_plan_work", lambda *a: (_ for _ in ()).throw(AssertionError("plan used")))
    lines = budget.start_lines(str(tmp_path / "build"), "offline-pool", STEMS, "offline", "pool")
    text = "\n".join(lines)
    assert "stage relevance: bm25,minilm,minilm-probe,minilm-aspire-ot,minilm-aspire-maxsim,smollm2-prp" in text
    assert "stage hybrid (pooled protocol): minilm" in text
    assert "4,000 abstracts, 30,000 sentences, 900 queries to encode; 900 LLM prompts" in text
    assert "floor 10.0 min" in text and "x 1.5" in text and "~15.0 min cold" in text and str(record) in text
    assert (tmp_path / "build" / "timings" / "all-offline-pool.start").is_file()


def test_a_floor_record_of_another_tag_is_not_used_the_plan_is_and_says_so(tmp_path, monkeypatch):
    record = tmp_path / "floor.json"
    record.write_text(json.dumps({**RECORD, "tag": "paper-pool"}))
    monkeypatch.setenv("EVALKIT_FLOOR", str(record))
    monkeypatch.setattr(budget, "_plan_work", lambda *a: (["  work: planned"], 7200.0))
    text = "\n".join(budget.start_lines(str(tmp_path / "build"), "offline-pool", STEMS, "offline", "pool"))
    assert "work: planned" in text and "~120.0 min cold, from evalkit plan's cost table" in text
    assert "floor 10" not in text


def test_the_end_shows_each_stage_run_since_the_start_and_up_to_date_ones(tmp_path, monkeypatch):
    out = str(tmp_path / "build")
    budget.write_stage_time(out, "hybrid-offline-pooled", 1.0)  # from an earlier make all
    monkeypatch.setenv("EVALKIT_FLOOR", str(tmp_path / "none.json"))
    monkeypatch.setattr(budget, "_plan_work", lambda *a: ([], 0.0))
    time.sleep(0.01)
    budget.start_lines(out, "offline-pool", STEMS, "offline", "pool")
    budget.write_stage_time(out, "relevance-offline-pool", 42.0)
    lines = budget.end_lines(out, "offline-pool", STEMS)
    assert lines[0] == "stage times:"
    assert lines[1].split() == ["relevance-offline-pool", "42.0", "s"]
    assert lines[2].split()[0] == "hybrid-offline-pooled" and "up to date (not rerun)" in lines[2]
    assert lines[-1].split()[0] == "total" and lines[-2].startswith("  other (")


def test_the_launcher_writes_the_stage_time_beside_the_tables_never_into_them(tmp_path, monkeypatch):
    """A notebook's wall time goes to OUTPUT_DIR/timings/STEM.json; the tables folder holds the
    notebook's table only, and the executed notebook is what papermill wrote, unchanged."""
    import papermill

    (tmp_path / "notebooks").mkdir()  # the kit's own summary notebook (an edited one has its own tag)
    shutil.copy(ROOT / "notebooks" / "summary.ipynb", tmp_path / "notebooks" / "summary.ipynb")
    build = tmp_path / "build"

    def execute(source, out, **kwargs):
        (build / "tables").mkdir(parents=True, exist_ok=True)
        (build / "tables" / "findings-offline-pool.txt").write_text("findings\n")
        with open(out, "w") as f:
            f.write("executed\n")

    monkeypatch.setattr(papermill, "execute_notebook", execute)
    out = launch.run("summary", {"OUTPUT_DIR": str(build)}, root=tmp_path)
    assert out.read_text() == "executed\n"
    assert sorted(p.name for p in (build / "tables").iterdir()) == ["findings-offline-pool.txt"]
    stage = json.loads((build / "timings" / "summary-offline-pool.json").read_text())
    assert stage["stage"] == "summary-offline-pool" and 0 <= stage["seconds"] < 60
