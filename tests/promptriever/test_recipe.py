"""The Promptriever recipe end to end: BM25, a dense model, an LLM reranker and the PRP oracle on
BEIR-, FollowIR- and InstructIR-format fixtures through the one runner, checked against values
computed by hand; the facet hybrid and multi-vector models refused in one line; fail-early
checks and row keeping."""

from __future__ import annotations

import hashlib
import json
import math

import pandas as pd
import pytest
from fixtures_datasets import write_beir, write_followir, write_instructir, write_qrels
from fixtures_recipe import write_beir_recipe, write_followir_recipe
from tiny_models import build_sentence_transformer, build_tiny_lm

import evalkit.promptriever.recipe as recipe
from evalkit.core.errors import KitError
from evalkit.data.runs import ranked
from evalkit.datasets import load_dataset
from evalkit.pipeline import runner
from evalkit.pipeline.runner import RunSettings, bind, obtain
from evalkit.promptriever import recipe_table

PROMPTS = ["glacier", "desert"]  # prompt words held by documents c2 and c3 of the recipe fixtures
L3, L6, L7 = math.log2(3), math.log2(6), math.log2(7)


@pytest.fixture(scope="module")
def registry_file(tmp_path_factory):
    folder = tmp_path_factory.mktemp("models")
    tiny = str(build_sentence_transformer(folder))
    path = folder / "models.yaml"
    path.write_text(json.dumps({"profiles": {"test": {"first_stage": "bm25", "depth": 10, "models": {
        "bm25": {"family": "bm25", "label": "BM25"},
        "tiny": {"family": "dense", "model": tiny},
        "tiny-hybrid": {"family": "dense", "model": tiny, "hybrid_alpha": 0.5},
        "tiny-mv": {"family": "multivector", "model": tiny},
        "tiny-prp": {"family": "llm", "model": str(build_tiny_lm(folder / "lm")), "method": "prp",
                     "variant": "heapsort", "k": 2, "depth": 4, "first_stage": "tiny", "role": "reranker"},
        "oracle": {"family": "oracle", "variant": "heapsort", "k": 3, "depth": 6, "first_stage": "bm25",
                   "role": "oracle"},
    }}}}))
    return path


@pytest.fixture(autouse=True)
def env(registry_file, tmp_path, monkeypatch):
    monkeypatch.setenv("EVALKIT_MODELS", str(registry_file))
    monkeypatch.setenv("EVALKIT_CACHE", str(tmp_path / "cache"))


@pytest.fixture
def folders(tmp_path):
    return {"beir": write_beir_recipe(tmp_path / "data" / "scifact-mini"),
            "followir": write_followir_recipe(tmp_path / "data" / "robust04"),
            "instructir": write_instructir(tmp_path / "data" / "instructir")}


def table(model, folders, runs, **kwargs):
    result = recipe_table("test", [model], [str(folders["beir"])], [str(folders["followir"])],
                          [str(folders["instructir"])], runs_dir=runs, prompts=PROMPTS, **kwargs)
    return result.set_index("dataset")


# --- independent hand computations from a run's scores ------------------------------------


def order(scores):
    """Best first: score descending, then document id ascending (the kit's stated tie rule)."""
    return sorted(scores, key=lambda d: (-scores[d], d))


def ndcg(scores, grades, k=10):
    ranking = order(scores)[:k]
    dcg = sum(grades.get(d, 0) / math.log2(i + 2) for i, d in enumerate(ranking))
    ideal = sum(g / math.log2(i + 2) for i, g in enumerate(sorted(grades.values(), reverse=True)[:k]))
    return dcg / ideal


def ap(scores, grades):
    relevant = {d for d, g in grades.items() if g >= 1}
    hits, total = 0, 0.0
    for i, d in enumerate(order(scores)[:1000], start=1):
        if d in relevant:
            hits += 1
            total += hits / i
    return total / len(relevant)


def pmrr(og_scores, changed_scores, og_grades, changed_grades):
    changed = [d for d, g in og_grades.items() if g >= 1 and changed_grades.get(d, 0) < 1]
    rank_og = {d: i for i, d in enumerate(order(og_scores), start=1)}
    rank_ch = {d: i for i, d in enumerate(order(changed_scores), start=1)}
    terms = [rank_ch[d] / rank_og[d] - 1 if rank_og[d] > rank_ch[d] else 1 - rank_og[d] / rank_ch[d] for d in changed]
    return sum(terms) / len(terms)


BEIR_TEST = {"q1": {"c3": 1}, "q3": {"c1": 2, "c5": 1}}
BEIR_DEV = {"q2": {"c2": 1}}
FOLLOWIR_QRELS = {"401-og": {"c1": 1, "c4": 1}, "401-changed": {"c1": 0, "c4": 1},
                  "402-og": {"c1": 1, "c3": 1}, "402-changed": {"c1": 1, "c3": 0}}


def mean(values):
    values = list(values)
    return sum(values) / len(values)


def expected_from_runs(model, folders, runs):
    """The recipe's values re-derived by hand from the model's stored runs."""
    out = {}
    beir = load_dataset(f"beir:{folders['beir']}")

    def run(collection, prompt=None):
        settings = RunSettings(model=model, dataset=collection.name, profile="test", protocol="pool", prompt=prompt)
        return obtain(bind(settings, collection, runs)).run

    def test_mean(ranking):
        return mean(ndcg(ranking[q], g) for q, g in BEIR_TEST.items())

    rankings = {p: run(beir, p) for p in [None, *PROMPTS]}
    on_test = {p: test_mean(rankings[p]) for p in PROMPTS}
    on_dev = {p: ndcg(rankings[p]["q2"], BEIR_DEV["q2"]) for p in PROMPTS}
    best = max(PROMPTS, key=lambda p: (on_test[p], -PROMPTS.index(p)))
    # the authors' dev choice: x100 rounded to 0.1, then the higher Recall@100, then the lowest md5 of the prompt
    recall = {p: len(set(ranked(rankings[p]["q2"])[:100]) & {d for d, g in BEIR_DEV["q2"].items() if g >= 1})
              / sum(g >= 1 for g in BEIR_DEV["q2"].values()) for p in PROMPTS}
    top = max(round(100 * on_dev[p], 1) for p in PROMPTS)
    tied = [p for p in PROMPTS if round(100 * on_dev[p], 1) == top]
    tied = [p for p in tied if recall[p] == max(recall[q] for q in tied)]
    selected = min(tied, key=lambda p: hashlib.md5(p.encode()).hexdigest())
    out["beir"] = {"nDCG@10 (none)": test_mean(rankings[None]), "nDCG@10 (Best)": on_test[best],
                   "nDCG@10 (Selected)": on_test[selected], "best prompt": best, "selected prompt": selected}
    followir = run(load_dataset(f"followir:{folders['followir']}"))
    out["followir"] = {
        "AP@1000 (none)": mean(ap(followir[f"{t}-og"], FOLLOWIR_QRELS[f"{t}-og"]) for t in ("401", "402")),
        "p-MRR (none)": mean(pmrr(followir[f"{t}-og"], followir[f"{t}-changed"], FOLLOWIR_QRELS[f"{t}-og"],
                                  FOLLOWIR_QRELS[f"{t}-changed"]) for t in ("401", "402"))}
    instructir = run(load_dataset(f"instructir:{folders['instructir']}"))
    values = {q: ndcg(instructir[q], {target: 1}) for q, target in (("7_1", "d5"), ("7_2", "d6"), ("8_1", "d6"))}
    out["instructir"] = {"nDCG@10 (none)": mean(values.values()),
                         "robustness@10 (none)": (min(values["7_1"], values["7_2"]) + values["8_1"]) / 2}
    return out


def check_row(row, expected):
    for column, value in expected.items():
        if isinstance(value, str):
            assert row[column] == value, column
        else:
            assert row[column] == pytest.approx(100 * value, abs=1e-9), column


# --- proof: hand-computed values -----------------------------------------------------------


def test_bm25_matches_values_computed_by_hand(folders, tmp_path):
    """BM25 scores a document > 0 exactly when it holds a query word (fixtures_recipe), the rest
    0 in id order.

    BEIR (test q1, q3; dev q2), nDCG@10, ideal DCG of q3 = 2 + 1/log2(3):
      none:    q1 "lava": c1 c2 c3 -> c3 at 3: 1/log2(4) = 0.5
               q3 "ember": c1 (grade 2) at 1, c5 at 5: (2 + 1/log2(6)) / (2 + 1/log2(3)) = 0.907228
               mean 0.703614
      glacier: q1: c2 c1 c3 -> 0.5; q3: c2 c1 .. c5 -> (2/log2(3) + 1/log2(6)) / (2 + 1/log2(3))
               = 0.626665; mean 0.563333; dev q2 "rain glacier": c2 first -> 1
      desert:  q1: c3 first -> 1; q3 as glacier 0.626665; mean 0.813333; dev q2: c3 c1 c2 -> 0.5
      Best = desert 0.813333; Selected = glacier (dev 1 > 0.5), on test 0.563333.
    FollowIR (robust04: AP@1000 on the original instructions, p-MRR):
      401 og "mountain volcano": c1 c2 c3 c4; relevant c1, c4: AP = (1/1 + 2/4) / 2 = 0.75
          changed "mountain glacier": c2 c1 c3 c4; changed doc c1: og 1 < changed 2: 1 - 1/2 = +0.5
      402 og "mountain tundra": c1 c2 c3 c4 (all 0); relevant c1, c3: AP = (1 + 2/3) / 2 = 5/6
          changed "mountain desert": c3 c1 c2 c4; changed doc c3: og 3 > changed 1: 1/3 - 1 = -2/3
      AP@1000 = (0.75 + 5/6) / 2 = 0.791667; p-MRR = (0.5 - 2/3) / 2 = -1/12
    InstructIR (fixtures_datasets): "what is umami I am a chef." -> d5 (umami) first: 1;
      "... a student." target d6: d5 d1 d2 d3 d4 d6 -> 1/log2(7) = 0.356207; "what is a fever I am a
      nurse." -> d6 first: 1. nDCG@10 = (2 + 1/log2(7)) / 3 = 0.785402;
      robustness@10 = (min(1, 0.356207) + 1) / 2 = 0.678104
    """
    runs = tmp_path / "runs"
    result = table("bm25", folders, runs)
    q3 = lambda dcg: dcg / (2 + 1 / L3)  # noqa: E731
    check_row(result.loc["scifact-mini"], {
        "nDCG@10 (none)": (0.5 + q3(2 + 1 / L6)) / 2, "nDCG@10 (Best)": (1 + q3(2 / L3 + 1 / L6)) / 2,
        "nDCG@10 (Selected)": (0.5 + q3(2 / L3 + 1 / L6)) / 2, "best prompt": "desert", "selected prompt": "glacier"})
    check_row(result.loc["robust04"], {"AP@1000 (none)": (0.75 + 5 / 6) / 2, "p-MRR (none)": -1 / 12})
    check_row(result.loc["instructir"], {"nDCG@10 (none)": (2 + 1 / L7) / 3, "robustness@10 (none)": (1 / L7 + 1) / 2})
    assert result.loc["robust04", "label"] == "BM25" and result.loc["robust04", "kind"] == "followir"
    # the rankings the docstring states, as the runner stored them
    collection = load_dataset(f"followir:{folders['followir']}")
    followir = obtain(bind(RunSettings(model="bm25", dataset="robust04", profile="test"), collection, runs)).run
    assert [order(followir[q]) for q in ("401-og", "401-changed", "402-og", "402-changed")] == [
        ["c1", "c2", "c3", "c4"], ["c2", "c1", "c3", "c4"], ["c1", "c2", "c3", "c4"], ["c3", "c1", "c2", "c4"]]
    # each prompt is a real run with its sidecar
    stored = sorted(p.parent.name for p in (runs / "test").glob("scifact-mini*/pool/*/sidecar.json"))
    assert len(stored) == 3 and stored[0] == "bm25"


@pytest.mark.parametrize("model", ["tiny", "tiny-prp", "oracle"])
def test_dense_llm_and_oracle_values_equal_a_hand_computation_from_their_runs(model, folders, tmp_path):
    runs = tmp_path / "runs"
    result = table(model, folders, runs)
    expected = expected_from_runs(model, folders, runs)
    for kind, name in (("beir", "scifact-mini"), ("followir", "robust04"), ("instructir", "instructir")):
        check_row(result.loc[name], expected[kind])
    if model == "oracle":  # it reads the grades: every relevant document of an original query first
        assert result.loc["robust04", "AP@1000 (none)"] == pytest.approx(100)


@pytest.mark.parametrize("model", ["tiny-hybrid", "tiny-mv"])
def test_facet_hybrid_and_multivector_are_refused_in_one_line_before_any_run(model, folders, tmp_path):
    with pytest.raises(KitError, match=f"model {model} cannot rank scifact-mini: it needs .*sentences") as err:
        recipe_table("test", ["bm25", model], [str(folders["beir"])], [], [], runs_dir=tmp_path / "runs",
                     prompts=PROMPTS)
    assert "\n" not in str(err.value)
    assert not (tmp_path / "runs").exists()


# --- failing early ---------------------------------------------------------------------------------


def test_a_mistyped_folder_fails_before_any_run(folders, tmp_path):
    runs = tmp_path / "runs"
    with pytest.raises(KitError, match="folder not found"):
        recipe_table("test", ["bm25"], [str(folders["beir"])], [str(tmp_path / "robust4")], [], runs_dir=runs)
    with pytest.raises(KitError, match="folder not found; give a BEIR folder .* or irds:ID") as err:
        recipe_table("test", ["bm25"], ["beir/scifact/test"], [], [], runs_dir=runs)
    assert "install" not in str(err.value)
    assert not runs.exists()


def test_qrels_naming_an_absent_document_fail_before_any_run(folders, tmp_path):
    write_qrels(folders["instructir"] / "qrels" / "test.tsv", [("7_1", "d5", 1), ("7_2", "d9", 1)])
    with pytest.raises(KitError, match="instructir: qrels of query 7_2 name document d9, absent from the corpus"):
        table("bm25", folders, tmp_path / "runs")
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize("models, kwargs, message", [
    (["nope"], {}, "unknown model 'nope' in profile test"),
    ([], {}, "no models given"),
    (["bm25"], {"prompts": []}, "prompts: expected a non-empty list"),
    (["bm25"], {"prompts": ["a", "a"]}, "a prompt is listed twice"),
])
def test_bad_parameters_fail_before_any_run(folders, tmp_path, models, kwargs, message):
    with pytest.raises(KitError, match=message):
        recipe_table("test", models, [str(folders["beir"])], [], [], runs_dir=tmp_path / "runs", **kwargs)
    assert not (tmp_path / "runs").exists()


def test_no_datasets_and_two_datasets_of_one_name(tmp_path):
    with pytest.raises(KitError, match="no datasets given"):
        recipe_table("test", ["bm25"], [], [], [], runs_dir=tmp_path / "runs")
    one, two = write_beir(tmp_path / "a" / "scifact"), write_beir(tmp_path / "b" / "scifact")
    with pytest.raises(KitError, match="are both named scifact"):
        recipe_table("test", ["bm25"], [str(one), str(two)], [], [], runs_dir=tmp_path / "runs")


def test_dataset_specs():
    assert recipe.dataset_spec("beir", "dl19") == "irds:dl19"
    assert recipe.dataset_spec("beir", "irds:beir/scifact/test") == "irds:beir/scifact/test"
    assert recipe.dataset_spec("followir", "news21") == "followir:news21"
    assert recipe.dataset_spec("instructir", "/data/instructir") == "instructir:/data/instructir"


# --- losing nothing ----------------------------------------------------------------------------------


def test_finished_rows_are_kept_when_a_later_dataset_fails_and_a_rerun_reuses_their_runs(
        folders, tmp_path, monkeypatch):
    runs, out = tmp_path / "runs", tmp_path / "tables" / "recipe.csv"
    real = recipe.obtain

    def failing(bound, *args, **kwargs):
        if bound.collection.name == "instructir":
            raise KitError("instructir: simulated failure")
        return real(bound, *args, **kwargs)

    monkeypatch.setattr(recipe, "obtain", failing)
    with pytest.raises(KitError, match=r"simulated failure \(2 finished rows kept in .*recipe.csv"):
        table("bm25", folders, runs, out=out)
    kept = pd.read_csv(out)
    assert kept.dataset.tolist() == ["scifact-mini", "robust04"]
    assert kept["p-MRR (none)"].iloc[1] == pytest.approx(-100 / 12)

    monkeypatch.setattr(recipe, "obtain", real)
    executed = []
    compute = runner.compute
    monkeypatch.setattr(runner, "compute", lambda bound: executed.append(bound.collection.name) or compute(bound))
    result = table("bm25", folders, runs, out=out)
    assert executed == ["instructir"]  # the finished rows' runs were reused
    assert pd.read_csv(out).dataset.tolist() == ["scifact-mini", "robust04", "instructir"]
    assert result.loc["robust04", "p-MRR (none)"] == pytest.approx(kept["p-MRR (none)"].iloc[1])


def test_followir_fixture_of_the_dataset_tests_runs_too(tmp_path):
    """The shared FollowIR fixture (fixtures_datasets) through the recipe: BM25 on topic 303, whose
    instructions change nothing, adds no p-MRR term (NaN is skipped, not counted as 0)."""
    folder = write_followir(tmp_path / "news21")
    result = recipe_table("test", ["bm25"], [], [str(folder)], [], runs_dir=tmp_path / "runs")
    assert set(result.columns) >= {"nDCG@5 (none)", "p-MRR (none)"}
    assert result["p-MRR (none)"].notna().all()
