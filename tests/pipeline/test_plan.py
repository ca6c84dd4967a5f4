"""`evalkit plan` and the prerequisite checks: hand-computed work, tokens and cost on a tiny
collection; missing keys, servers and GPUs listed with their fixes; the paper profile's figures."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from evalkit import cli
from evalkit.data.collection import Collection, Document, Query
from evalkit.llm.reranker import expected_comparisons
from evalkit.llm.templates import SEPARATOR, load_template
from evalkit.models import registry
from evalkit.pipeline import plan, prerequisites
from tests.loopback import Loopback

PROFILE = {
    "first_stage": "bm25",
    "depth": 3,
    "study": {"reference": "bm25", "relevance": ["bm25", "api-prp"]},
    "models": {
        "bm25": {"family": "bm25"},
        "api-prp": {"family": "llm", "backend": "openai", "base_url": "https://api.example.org/v1", "model": "gpt-4o",
                    "api_key_env": "EVALKIT_TEST_KEY", "method": "prp", "variant": "sliding", "k": 1, "depth": 3,
                    "first_stage": "bm25"},
        "local-server": {"family": "llm", "backend": "openai", "base_url": "http://127.0.0.1:9/v1",
                         "model": "meta-llama/Meta-Llama-3-70B-Instruct", "method": "pw", "depth": 3,
                         "first_stage": "bm25"},
        "served": {"family": "llm", "backend": "openai", "serve": "vllm",
                   "model": "meta-llama/Meta-Llama-3-70B-Instruct", "tensor_parallel_size": 4, "method": "pw",
                   "depth": 3, "first_stage": "bm25"},
        "big-llm": {"family": "llm", "model": "mistralai/Mistral-7B-Instruct-v0.2",
                    "dtype": {"cuda": "float16", "cpu": "float32"}, "method": "pw", "depth": 3,
                    "first_stage": "bm25"},
    },
}


@pytest.fixture
def tiny_registry(tmp_path, monkeypatch):
    path = tmp_path / "models.yaml"
    path.write_text(yaml.safe_dump({"profiles": {"t": PROFILE}}))
    monkeypatch.setenv("EVALKIT_MODELS", str(path))
    monkeypatch.delenv("EVALKIT_TEST_KEY", raising=False)
    return path


def tiny_collection() -> Collection:
    """One query; its candidates have 3, 6 and 1 words (x1.3 rounds to 4, 8 and 1 tokens)."""
    docs = {"d1": Document("d1", "T1", "a b"), "d2": Document("d2", "T2", "a b c d e"), "d3": Document("d3", "T3", "")}
    query = Query("q1", "seed words here now", "Find papers")
    return Collection("tiny", docs, {"q1": query}, {"q1": {"d1": 1}}, candidates={"q1": ("d1", "d2", "d3")})


def test_api_prp_row_work_tokens_and_cost_by_hand(tiny_registry, monkeypatch):
    monkeypatch.setattr(prerequisites, "gpu_count", lambda: 0)
    row = plan.row_plan(registry.spec("api-prp", "t"), list(tiny_collection().queries.values()), tiny_collection(),
                        "pool")
    assert row.comparisons == 2  # sliding, one pass over 3 documents: (d2, d3), (d1, winner)
    assert row.prompts == 4  # both orders
    template = load_template("prp")
    frame = template.prefix.format(instruction="", seed="") + SEPARATOR + template.suffix.format(a="", b="")
    fixed = round(len(frame.split()) * 1.3)
    per_prompt = 3 + 5 + fixed + 2 * (4 + 8 + 1) / 3  # "Find papers" 2 words -> 3, the seed 4 -> 5
    assert row.prompt_tokens == round(4 * per_prompt)
    assert row.output_tokens == 4 * 5  # max_tokens 5 a prompt
    assert row.cost_usd == pytest.approx((row.prompt_tokens * 2.50 + 20 * 10.00) / 1e6)
    assert row.tokens_by.startswith("approximation: 1.3 tokens per word")
    assert row.hub == [] and row.api_key_env == "EVALKIT_TEST_KEY" and row.server == "https://api.example.org/v1"
    assert [m.reason for m in row.missing] == ["no API key (EVALKIT_TEST_KEY is not set)"]
    monkeypatch.setenv("EVALKIT_TEST_KEY", "sk-test")
    assert prerequisites.missing(registry.spec("api-prp", "t")) == []


def test_only_the_pooled_and_full_protocols_plan_a_first_stage(tiny_registry, monkeypatch):
    """The released protocol ranks the pools as given, as pool does: no first-stage row (the plan
    once gave released the pooled protocol's corpus encoding row)."""
    monkeypatch.setattr(prerequisites, "gpu_count", lambda: 0)
    collection = tiny_collection()
    rows = {protocol: [row["model"] for row in plan.plan("t", protocol, collection, ["bm25"])["rows"]]
            for protocol in ("pool", "released", "pooled")}
    assert rows["pool"] == rows["released"] == ["bm25"]
    assert len(rows["pooled"]) == 2 and rows["pooled"][-1] == "bm25"


def test_local_model_needs_a_gpu_and_its_memory_is_estimated(tiny_registry, monkeypatch):
    spec = registry.spec("big-llm", "t")
    monkeypatch.setattr(prerequisites, "gpu_count", lambda: 0)
    assert prerequisites.gpu_memory_gb(spec) == pytest.approx(7.24 * 2 * 1.2)  # float16 on CUDA, 1.2 overhead
    (found,) = prerequisites.missing(spec)
    assert found.reason == "no GPU for the 7B model mistralai/Mistral-7B-Instruct-v0.2"
    assert "CUDA GPU with at least 17 GB" in found.fix
    assert prerequisites.not_run_reason(spec) == "not run: " + found.reason
    monkeypatch.setattr(prerequisites, "gpu_count", lambda: 1)
    assert prerequisites.missing(spec) == []


class Models(Loopback):
    def respond_get(self, path, headers):
        return 200, {"data": [{"id": "m"}]}


def test_a_local_server_must_answer(tiny_registry, tmp_path):
    spec = registry.spec("local-server", "t")
    (found,) = prerequisites.missing(spec)  # nothing listens on port 9
    assert found.reason == "no server at http://127.0.0.1:9/v1"
    assert "vllm serve meta-llama/Meta-Llama-3-70B-Instruct" in found.fix and "serve: vllm" in found.fix
    with Models() as server:
        profile = {**PROFILE, "models": {**PROFILE["models"], "local-server": {
            **PROFILE["models"]["local-server"], "base_url": server.url}}}
        tiny_registry.write_text(yaml.safe_dump({"profiles": {"t": profile}}))
        assert prerequisites.missing(registry.spec("local-server", "t")) == []


def test_plan_lists_every_missing_prerequisite_together(tiny_registry, monkeypatch):
    monkeypatch.setattr(prerequisites, "gpu_count", lambda: 0)
    result = plan.plan("t", "pool", tiny_collection(), ["bm25", "api-prp", "big-llm", "local-server"])
    assert [r["model"] for r in result["rows"]] == ["bm25", "api-prp", "big-llm", "local-server"]
    assert [m["model"] for m in result["missing"]] == ["api-prp", "big-llm", "local-server"]
    text = plan.render(result)
    assert "missing prerequisites (3):" in text and "fix: export EVALKIT_TEST_KEY=" in text
    assert text.count("status: ready") == 1  # bm25


def test_the_paper_profiles_gpt4o_prp_on_the_full_corpus(collection, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    row = plan.row_plan(registry.spec("gpt-4o-prp", "paper"), list(collection.queries.values()), collection, "full")
    assert row.comparisons == 50 * expected_comparisons("prp", "heapsort", 200, 20) == 50 * 657
    assert row.prompts == 65_700  # the "roughly 65,000 prompts"
    assert 10_000_000 < row.prompt_tokens < 100_000_000  # "tens of millions of tokens"
    assert row.cost_usd > 50


def test_cli_plan_json_for_a_smoke_run(monkeypatch, capsys):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    assert cli.main(["plan", "--profile", "paper", "--protocol", "pooled", "--models", "gpt-4o-pw,bm25",
                     "--seeds", "929877", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["queries"] == 2 and [r["model"] for r in result["rows"]] == ["first stage: scincl", "gpt-4o-pw",
                                                                              "bm25"]
    assert result["rows"][0]["texts"] == 4205 + 2 and result["rows"][1]["prompts"] == 2 * 200
    assert {"model": "gpt-4o-pw", "reason": "no API key (OPENAI_API_KEY is not set)",
            "fix": "export OPENAI_API_KEY=... (the key for https://api.openai.com/v1)"} in result["missing"]
    assert cli.main(["plan", "--profile", "paper", "--models", "nope"]) == 2
    assert "unknown model 'nope'" in capsys.readouterr().err


def test_a_server_the_kit_starts_needs_vllm_and_gpus(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))  # no vllm executable
    monkeypatch.setattr(prerequisites, "gpu_count", lambda: 0)
    spec = registry.spec("llama3-70b-prp", "paper")
    assert spec.settings["serve"] == "vllm" and prerequisites.server_url(spec) is None
    reasons = [m.reason for m in prerequisites.missing(spec) if not m.reason.startswith("first stage")]
    assert reasons == ["vllm is not installed (the kit starts `vllm serve` for this row)",
                       "no GPU for the vLLM server of meta-llama/Meta-Llama-3-70B-Instruct"]


def test_make_plan_hands_parameters_over_as_data(tmp_path):
    import subprocess

    root = Path(__file__).resolve().parents[2]
    if not (root / ".venv" / "bin" / "evalkit").exists():
        pytest.skip("make plan runs the kit from .venv")
    done = subprocess.run(["make", "-s", "plan", "PROFILE=offline", f"MODELS=bm25;touch {tmp_path}/pwned"],
                          cwd=root, capture_output=True, text=True, timeout=120)
    assert done.returncode != 0 and "unknown model 'bm25;touch" in done.stderr
    assert not (tmp_path / "pwned").exists()


def test_workers_divide_the_corpus_encoding_and_add_rays_start(collection, monkeypatch):
    """--workers N: the first stage's corpus encoding is texts / (rate x N) plus Ray's fixed start,
    or texts / the driver's measured commit rate where N workers would encode faster than the driver
    commits (32 x 1,000 > 14,000); GPU-hours are N GPUs for that whole time; without workers the time
    is one process's."""
    monkeypatch.setattr(prerequisites, "gpu_count", lambda: 0)
    queries = list(collection.queries.values())
    rate = prerequisites.costs()["rates"]["encode_per_s"]["gpu"]["small"]  # SciNCL: 0.11B
    start = prerequisites.costs()["cluster"]["ray_start_s"]
    one = plan.first_stage_plan("paper", "full", queries, collection, device="gpu")
    assert one.hours == pytest.approx(one.texts / rate / 3600) and one.gpu_hours == pytest.approx(one.hours)
    assert one.workers == 1
    driver = prerequisites.costs()["cluster"]["driver_docs_per_s"]
    for workers in (1, 8, 32):
        row = plan.first_stage_plan("paper", "full", queries, collection, workers, "gpu")
        assert row.hours == pytest.approx((start + row.texts / min(rate * workers, driver)) / 3600)
        assert any("bound by the driver" in note for note in row.notes) is (rate * workers > driver)
        assert any("assumed" in note for note in row.notes)
        assert row.gpu_hours == pytest.approx(workers * row.hours) and row.workers == workers
        assert any("spread over" in note and "Ray's start" in note for note in row.notes)
    cpu = plan.first_stage_plan("paper", "full", queries, collection, 8, "cpu")
    assert cpu.gpu_hours == 0 and cpu.hours > row.hours


def test_a_served_models_judgments_split_over_replicas_and_the_rest_stays_on_the_driver(tiny_registry, monkeypatch):
    monkeypatch.setattr(prerequisites, "gpu_count", lambda: 0)
    collection, rate = tiny_collection(), prerequisites.costs()["rates"]["prompts_per_s"]["gpu"]["server"]
    start = prerequisites.costs()["cluster"]["ray_start_s"]
    queries = list(collection.queries.values())
    one = plan.row_plan(registry.spec("served", "t"), queries, collection, "pool", device="gpu")
    two = plan.row_plan(registry.spec("served", "t"), queries, collection, "pool", 2, "gpu")
    assert one.hours == pytest.approx(one.prompts / rate / 3600) and one.gpu_hours == pytest.approx(4 * one.hours)
    assert two.hours == pytest.approx((start + two.prompts / rate / 2) / 3600)
    assert two.gpu_hours == pytest.approx(2 * 4 * two.hours)  # tensor_parallel_size 4 a replica
    api = [plan.row_plan(registry.spec("api-prp", "t"), queries, collection, "pool", w, "gpu") for w in (None, 4)]
    assert api[0].hours == api[1].hours and api[1].gpu_hours == 0
    assert "runs on the driver: the workers do not shorten it" in api[1].notes
    with pytest.raises(Exception, match="workers=0: must be a positive whole number"):
        plan.plan("t", "pool", collection, ["bm25"], workers=0)


def test_cli_plan_workers(monkeypatch, capsys):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    assert cli.main(["plan", "--profile", "paper", "--protocol", "pooled", "--models", "bm25", "--seeds", "929877",
                     "--workers", "3", "--device", "gpu", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["workers"] == 3 and result["device"] == "gpu" and result["rows"][0]["workers"] == 3
    assert result["total"]["gpu_hours"] == pytest.approx(sum(r["gpu_hours"] for r in result["rows"]))
    assert result["total"]["gpu_hours"] > 0
    assert cli.main(["plan", "--profile", "paper", "--workers", "0"]) == 2
    assert "--workers 0: must be a positive whole number (Ray workers)" in capsys.readouterr().err


def test_a_70b_model_on_one_80_gb_gpu_is_flagged_not_planned(tiny_registry, monkeypatch):
    """Llama-3-70B served by vLLM: 70.6B parameters x 2 bytes (bfloat16) x 1.2 overhead = 169.4 GB (by hand), more
    than one 80 GB GPU and than two: a replica of 1 GPU (no tensor_parallel_size, workers) is
    "not run" with the fix (at least 3 GPUs); the entry with tensor_parallel_size 4 fits."""
    monkeypatch.setattr(prerequisites, "gpu_count", lambda: 8)
    monkeypatch.setattr(prerequisites, "missing", lambda spec: [])  # (vllm, weights: not this test's)
    collection, queries = tiny_collection(), list(tiny_collection().queries.values())
    spec = registry.spec("served", "t")
    spec.settings.pop("tensor_parallel_size")
    row = plan.row_plan(spec, queries, collection, "pool", 2, "gpu")
    assert row.gpu_memory_gb == pytest.approx(70.6 * 2 * 1.2)
    assert [(m.reason, m.fix) for m in row.missing] == [
        ("~169 GB (bfloat16) does not fit 1 GPU(s) of 80 GB (gpu_memory_gb in costs.yaml)",
         "set tensor_parallel_size to at least 3 in its entry (the GPUs one copy spans)")]
    assert plan.row_plan(registry.spec("served", "t"), queries, collection, "pool", 2, "gpu").missing == []
    assert plan.row_plan(spec, queries, collection, "pool", 2, "cpu").missing == []  # no GPU planned
