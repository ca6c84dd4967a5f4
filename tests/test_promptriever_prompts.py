"""Prompt selection (none / Best / Selected), fold-wise selection, generic prompts, published figures."""

import pandas as pd
import pytest

import evalkit.promptriever.prompts as prompts_module
from evalkit.errors import KitError
from evalkit.promptriever import load_prompts, load_published, select_by_folds, select_prompt, with_prompt


def test_with_prompt_appends_after_one_space():
    assert with_prompt("what is umami", "Be precise.") == "what is umami Be precise."
    assert with_prompt("what is umami", None) == "what is umami"


def test_generic_prompts_are_ten_distinct_strings():
    prompts = load_prompts()
    assert len(prompts) == 10 == len(set(prompts))
    assert any("$1000 tip" in p for p in prompts)


def test_malformed_prompt_file(tmp_path):
    path = tmp_path / "p.yaml"
    path.write_text("prompts: just one string\n")
    with pytest.raises(KitError, match="list of non-empty strings"):
        load_prompts(path)
    with pytest.raises(KitError, match="not found"):
        load_prompts(tmp_path / "absent.yaml")


TOY = {
    (None, "test"): 0.50,
    ("p1", "dev"): 0.80, ("p1", "test"): 0.60,
    ("p2", "dev"): 0.65, ("p2", "test"): 0.70,
    ("p3", "dev"): 0.80, ("p3", "test"): 0.55,
}  # fmt: skip


def test_select_prompt_none_best_selected():
    calls = []

    def evaluate(prompt, split):
        calls.append((prompt, split))
        return TOY[(prompt, split)]

    result = select_prompt(evaluate, ["p1", "p2", "p3"])
    assert result.none == 0.50
    assert (result.best_prompt, result.best) == ("p2", 0.70)  # oracle on test
    # dev tie p1 = p3 = 0.80: the first listed wins; reported on test
    assert (result.selected_prompts, result.selected) == ({"dev": "p1"}, 0.60)
    assert (None, "dev") not in calls  # "none" is never a candidate


def test_select_prompt_accepts_per_query_values():
    def evaluate(prompt, split):
        mean = TOY[(prompt, split)]
        return {"q1": mean - 0.1, "q2": mean + 0.1}

    result = select_prompt(evaluate, ["p1", "p2", "p3"])
    assert result.none == pytest.approx(0.50) and result.selected == pytest.approx(0.60)


# CSFCube-style folds: fold2 swaps fold1's halves, as in evaluation_splits.json.
FOLDS = {"fold1_dev": ["a", "b"], "fold1_test": ["c", "d"], "fold2_dev": ["c", "d"], "fold2_test": ["a", "b"]}
VALUES = pd.DataFrame(
    {"none": [0.1, 0.3, 0.2, 0.4], "p1": [0.9, 0.7, 0.1, 0.3], "p2": [0.2, 0.4, 0.9, 0.6]},
    index=["a", "b", "c", "d"],
)


def test_select_by_folds_values():
    result = select_by_folds(VALUES, FOLDS)
    # fold1: dev a,b: p1 0.8 > p2 0.3 -> p1; test c,d: p1 = 0.2  (test alone would pick p2: 0.75)
    # fold2: dev c,d: p2 0.75 > p1 0.2 -> p2; test a,b: p2 = 0.3
    assert result.selected_prompts == {"fold1": "p1", "fold2": "p2"}
    assert result.selected == pytest.approx((0.2 + 0.3) / 2)
    # none: (mean c,d 0.3 + mean a,b 0.2) / 2 = 0.25
    assert result.none == pytest.approx(0.25)
    # Best (oracle, official aggregate): p1 (0.2 + 0.8) / 2 = 0.5; p2 (0.75 + 0.3) / 2 = 0.525
    assert (result.best_prompt, result.best) == ("p2", pytest.approx(0.525))


def test_fold_choice_never_sees_test_values(monkeypatch):
    seen = []
    choose = prompts_module.choose_prompt

    def spy(dev_values):
        seen.append(list(dev_values.index))
        return choose(dev_values)

    monkeypatch.setattr(prompts_module, "choose_prompt", spy)
    select_by_folds(VALUES, FOLDS)
    assert seen == [FOLDS["fold1_dev"], FOLDS["fold2_dev"]]


def test_fold_choice_ignores_its_test_half():
    # Make fold1's test half (c, d) favour p2 overwhelmingly: fold1 still chooses p1 from its dev half.
    skewed = VALUES.copy()
    skewed.loc[["c", "d"], "p2"] = 100.0
    skewed.loc[["c", "d"], "p1"] = -100.0
    assert select_by_folds(skewed, FOLDS).selected_prompts["fold1"] == "p1"


def test_fold_errors():
    with pytest.raises(KitError, match="folds lack fold2_test"):
        select_by_folds(VALUES, {k: v for k, v in FOLDS.items() if k != "fold2_test"})
    with pytest.raises(KitError, match="query d of fold2_dev has no values"):
        select_by_folds(VALUES.drop(index="d"), FOLDS)
    with pytest.raises(KitError, match="lack the 'none' column"):
        select_by_folds(VALUES.drop(columns="none"), FOLDS)


def test_published_figures():
    table = load_published()
    assert list(table.columns) == ["source", "table", "model", "dataset", "metric", "value", "note"]

    def value(model, dataset, metric):
        rows = table[(table.model == model) & (table.dataset.str.startswith(dataset)) & (table.metric == metric)]
        return list(rows.value)

    assert value("Promptriever (LLaMA-2 7B)", "FollowIR average", "p-MRR x100") == [11.2]
    assert value("BM25", "FollowIR average", "p-MRR x100") == [-2.1]
    assert value("GritLM-7B", "FollowIR average", "p-MRR x100") == [0.0]
    assert value("BM25", "BEIR average", "nDCG@10 x100") == [40.9]
    assert value("Promptriever (LLaMA-2 7B)", "BEIR average", "nDCG@10 x100") == [55.0, 56.4]
    assert table.source.str.contains("2409.11136").all()


def test_published_bad_file(tmp_path):
    path = tmp_path / "p.csv"
    path.write_text("source,model,value\nx,y,1\n")
    with pytest.raises(KitError, match="columns must be"):
        load_published(path)
    path.write_text("source,table,model,dataset,metric,value,note\na,b,c,d,e,high,\n")
    with pytest.raises(KitError, match=r"p\.csv:2: value must be a number"):
        load_published(path)
