"""Generic prompts, prompt selection on a collection's folds, published figures."""

import pandas as pd
import pytest

from evalkit import runner
from evalkit.collection import Collection, Fold, Query
from evalkit.errors import KitError
from evalkit.promptriever import load_prompts, load_published, select_prompt, with_prompt


def test_with_prompt_is_the_runners_and_appends_after_one_space():
    assert with_prompt is runner.with_prompt
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
    path.write_text("prompts: [a, a]\n")
    with pytest.raises(KitError, match="listed twice"):
        load_prompts(path)
    with pytest.raises(KitError, match="not found"):
        load_prompts(tmp_path / "absent.yaml")


# Two folds swapping halves, as CSFCube's: fold1 dev a, b / test c, d; fold2 the reverse.
COLLECTION = Collection(
    name="toy", documents={}, queries={q: Query(q, q) for q in "abcd"}, qrels={},
    folds={"fold1": Fold(dev=("a", "b"), test=("c", "d")), "fold2": Fold(dev=("c", "d"), test=("a", "b"))})
VALUES = {None: [0.1, 0.3, 0.2, 0.4], "p1": [0.9, 0.7, 0.1, 0.3], "p2": [0.2, 0.4, 0.9, 0.6]}


def tables(values=VALUES):
    """Per-query tables as `evaluation.per_query` gives them (stratum, fold, measure)."""
    return {p: pd.DataFrame({"stratum": "all", "fold": ["fold2", "fold2", "fold1", "fold1"], "nDCG@10": v},
                            index=pd.Index(list("abcd"), name="qid")) for p, v in values.items()}


def test_select_prompt_none_best_selected():
    result = select_prompt(COLLECTION, tables(), "nDCG@10")
    # fold1: dev a,b: p1 0.8 > p2 0.3 -> p1; test c,d: p1 = 0.2  (its test half alone would pick p2)
    # fold2: dev c,d: p2 0.75 > p1 0.2 -> p2; test a,b: p2 = 0.3
    assert result.selected_prompts == {"fold1": "p1", "fold2": "p2"}
    assert result.selected == pytest.approx((0.2 + 0.3) / 2)
    assert result.none == pytest.approx((0.3 + 0.2) / 2)  # fold mean of the test halves
    # Best (oracle on the test halves): p1 (0.2 + 0.8) / 2 = 0.5; p2 (0.75 + 0.3) / 2 = 0.525
    assert (result.best_prompt, result.best) == ("p2", pytest.approx(0.525))


def test_selection_never_sees_its_test_half():
    skewed = {**VALUES, "p1": [0.9, 0.7, -100.0, -100.0], "p2": [0.2, 0.4, 100.0, 100.0]}
    assert select_prompt(COLLECTION, tables(skewed), "nDCG@10").selected_prompts["fold1"] == "p1"


def test_selection_errors():
    with pytest.raises(KitError, match="run without a prompt"):
        select_prompt(COLLECTION, {p: t for p, t in tables().items() if p}, "nDCG@10")
    with pytest.raises(KitError, match="no prompts to select from"):
        select_prompt(COLLECTION, {None: tables()[None]}, "nDCG@10")


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
