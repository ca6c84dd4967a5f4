"""bench/bench_gpu_check.py on a GPU writes the per-GPU encoding rate it measured into the cost
table the plan reads (issue 47 item 6), and the plan then uses it and says it is measured, with
the card and the date. No GPU here: the GPU and the throughput check's timing are faked."""

from __future__ import annotations

import datetime
import importlib
import shutil
from pathlib import Path

import pytest
import yaml

from evalkit.core.errors import DataError
from evalkit.pipeline import plan, prerequisites

BENCH = Path(__file__).resolve().parents[2] / "bench"
CARD = "NVIDIA H100 80GB HBM3 (faked)"


@pytest.fixture
def costs(tmp_path, monkeypatch):
    copy = tmp_path / "costs.yaml"
    shutil.copy(prerequisites.COSTS_FILE, copy)
    monkeypatch.setattr(prerequisites, "COSTS_FILE", copy)
    prerequisites.costs.cache_clear()
    yield copy
    prerequisites.costs.cache_clear()  # the plan's own table again


def test_a_gpu_runs_throughput_is_recorded_and_the_plan_uses_it_as_measured(costs, collection, monkeypatch):
    torch = pytest.importorskip("torch")
    monkeypatch.syspath_prepend(str(BENCH))
    bench = importlib.import_module("bench_gpu_check")
    monkeypatch.setenv("EVALKIT_CACHE", str(costs.parent / "cache"))  # main sets its own: restored after
    monkeypatch.setenv("EVALKIT_PROGRESS", "off")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: CARD)
    timed = {"check": "throughput", "device": "cuda", "texts": 20000, "kit_texts_per_s": 1234.56}

    def throughput(device, texts, out):  # the timing of a GPU, faked
        out.append(dict(timed))
        return out[-1]

    monkeypatch.setattr(bench, "throughput_check", throughput)
    queries = list(collection.queries.values())
    before = plan.first_stage_plan("paper", "full", queries, collection, 8, "gpu")  # SciNCL: size class small
    assert any("per-GPU rate 1000 texts a second: assumed" in note for note in before.notes)
    text = costs.read_text()

    assert bench.main(["--checks", "throughput", "--costs", str(costs)]) == 0

    today = datetime.date.today().isoformat()
    by = "bench/bench_gpu_check.py throughput, 20000 texts"
    assert yaml.safe_load(costs.read_text())["measured"] == \
        {"encode_per_s": {"gpu": {"small": {"texts_per_s": 1234.6, "card": CARD, "date": today, "by": by}}}}
    changed = [(a, b) for a, b in zip(text.splitlines(), costs.read_text().splitlines()) if a != b]
    assert [a for a, _ in changed] == ["measured: {}"]  # every other line (comments too) as it was
    after = plan.first_stage_plan("paper", "full", queries, collection, 8, "gpu")
    assert f"per-GPU rate 1234.6 texts a second: measured on {CARD} on {today} ({by}); Ray's start: measured" \
        in after.notes
    start = prerequisites.costs()["cluster"]["ray_start_s"]
    assert after.hours == pytest.approx((start + after.texts / (1234.6 * 8)) / 3600)  # 9,877 a second: not driver-bound
    large = prerequisites.costs()["rates"]["encode_per_s"]["gpu"]["large"]
    assert plan.encode_rate("gpu", plan.registry.spec("gritlm-7b", "paper")) == \
        (large, "assumed (rates.encode_per_s in costs.yaml), not measured here")  # a 7B model: not measured


def test_a_rate_not_positive_or_a_table_without_its_line_is_one_line(costs):
    with pytest.raises(DataError) as caught:
        plan.record_measured_rate("gpu", "small", 0, CARD, "2026-12-06", "by hand", costs)
    assert "a positive rate" in str(caught.value)
    costs.write_text(costs.read_text().replace("measured: {}\n", ""))
    with pytest.raises(DataError) as caught:
        plan.record_measured_rate("gpu", "small", 10.0, CARD, "2026-12-06", "by hand", costs)
    assert str(caught.value).endswith("has no single `measured: {...}` line for the measured rates; restore the "
                                      "file") and "\n" not in str(caught.value)
