"""Generic prompts, prompt selection on a collection's folds, published figures."""

import math
import random

import pandas as pd
import pytest

from evalkit.core.errors import KitError
from evalkit.data.collection import Collection, Fold, Query
from evalkit.pipeline import runner
from evalkit.promptriever import load_prompts, load_published, select_prompt, with_prompt


def test_with_prompt_is_the_runners_and_appends_after_one_space():
    assert with_prompt is runner.with_prompt
    assert with_prompt("what is umami", "Be precise.") == "what is umami Be precise."
    assert with_prompt("what is umami", None) == "what is umami"


def test_generic_prompts_are_the_papers_ten_by_default_and_the_kits_on_request():
    prompts = load_prompts()
    assert len(prompts) == 10 == len(set(prompts))
    assert prompts[0].endswith("I will give you a 1000 dollar tip.")
    assert prompts[-1] == "Think carefully about relevance"
    assert any("Use strict critera" in p for p in prompts)  # verbatim, the paper's spelling
    kit = load_prompts(which="kit")
    assert len(kit) == 10 == len(set(kit)) and not set(kit) & set(prompts)
    with pytest.raises(KitError, match="unknown prompt set"):
        load_prompts(which="mine")


def test_selection_without_folds_gives_best_and_a_blank_selected():
    import math

    flat = Collection(name="flat", documents={}, queries={q: Query(q, q) for q in "abcd"}, qrels={})
    result = select_prompt(flat, tables(), "nDCG@10")
    assert result.best_prompt == "p2" and result.best == pytest.approx(0.525)
    assert math.isnan(result.selected) and result.selected_prompts == {}


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


def test_published_figures_each_traced_to_a_table():
    table = load_published()
    assert list(table.columns) == ["source", "table", "model", "dataset", "metric", "value", "note"]
    assert set(table.table) == {"Table 2", "Table 3", "Table 4"} and table.source.str.contains("2409.11136").all()
    assert not table.duplicated(["table", "model", "dataset", "metric"]).any()

    def value(model, dataset, metric):
        rows = table[(table.model == model) & (table.dataset == dataset) & (table.metric == metric)]
        return list(rows.value)

    pr, follow = "Promptriever (LLaMA-2 7B)", "FollowIR average (Robust04/News21/Core17)"
    # Table 2, by hand from the paper's text
    assert value(pr, follow, "p-MRR x100") == [11.2] and value("BM25", follow, "p-MRR x100") == [-2.1]
    assert value("RepLLaMA", follow, "p-MRR x100") == [-3.1]
    assert value(pr, "InstructIR", "Robustness@10 x100") == [63.1]
    # the abstract's gains are differences of Table 2 and Table 4 figures
    assert value(pr, follow, "p-MRR x100")[0] - value("RepLLaMA", follow, "p-MRR x100")[0] == pytest.approx(14.3)
    assert value(pr, follow, "Score x100 (MAP/nDCG average)")[0] - 23.0 == pytest.approx(3.1)
    assert value(pr, "InstructIR", "Robustness@10 x100")[0] - value("RepLLaMA", "InstructIR", "Robustness@10 x100")[0] \
        == pytest.approx(12.9)
    best, none = (value(pr, "BEIR average", f"nDCG@10 x100, {s}")[0] for s in ("Best prompt", "no prompt"))
    assert (none, best) == (55.0, 56.4) and value("BM25", "BEIR average", "nDCG@10 x100, no prompt") == [40.9]
    # Table 4: averages agree with the 13 datasets; Selected only for the 7 with dev/train data
    beir = table[(table.table == "Table 4") & (table.dataset != "BEIR average")]
    for (model, metric), rows in beir.groupby(["model", "metric"]):
        if "Selected" in metric:
            assert len(rows) == 7
        else:
            assert len(rows) == 13 and rows.value.mean() == pytest.approx(value(model, "BEIR average", metric)[0],
                                                                          abs=0.06)
    assert value(pr, "BEIR SciFact", "nDCG@10 x100, Selected prompt") == [75.9]
    assert value("RepLLaMA", "TREC DL19", "nDCG@10 x100") == [74.5]
    assert value("GritLM-7B", follow, "p-MRR x100") == []  # not in the paper's tables: dropped


def test_published_bad_file(tmp_path):
    path = tmp_path / "p.csv"
    path.write_text("source,model,value\nx,y,1\n")
    with pytest.raises(KitError, match="columns must be"):
        load_published(path)
    path.write_text("source,table,model,dataset,metric,value,note\na,b,c,d,e,high,\n")
    with pytest.raises(KitError, match=r"p\.csv:2: value must be a number"):
        load_published(path)


def _dev_tables(values, recall=None):
    """Tables of two dev queries (fold1's dev half a, b) and two test queries, per prompt."""
    out = {}
    for p, (x, y) in values.items():
        frame = {"stratum": "all", "fold": ["fold2", "fold2", "fold1", "fold1"], "nDCG@10": [x, y, 0.5, 0.5]}
        if recall is not None:
            frame["R@100"] = [recall[p], recall[p], 0.0, 0.0]
        out[p] = pd.DataFrame(frame, index=pd.Index(list("abcd"), name="qid"))
    return out


def test_promptriever_rule_rounds_to_a_tenth_then_recall_then_lowest_hash():
    from evalkit.promptriever.prompts import prompt_hash, promptriever_choice

    assert prompt_hash("Be careful.") == __import__("hashlib").md5(b"Be careful.").hexdigest()
    choose = promptriever_choice("nDCG@10")
    dev = {p: t.loc[["a", "b"]] for p, t in _dev_tables({"p1": (0.40120, 0.40120), "p2": (0.40140, 0.40140)},
                                                         {"p1": 0.9, "p2": 0.5}).items()}
    # 40.12 and 40.14 both round to 40.1: the tie goes to the higher Recall@100 (p1), not the higher mean
    assert choose(dev) == "p1"
    assert __import__("evalkit.evaluation.selection", fromlist=["best_mean"]).best_mean("nDCG@10")(dev) == "p2"
    same_recall = {p: t.loc[["a", "b"]] for p, t in _dev_tables({"p1": (0.4012, 0.4012), "p2": (0.4014, 0.4014)},
                                                                {"p1": 0.5, "p2": 0.5}).items()}
    assert choose(same_recall) == min(["p1", "p2"], key=prompt_hash)  # then the lowest md5 hex
    clear = {p: t.loc[["a", "b"]] for p, t in _dev_tables({"p1": (0.40, 0.40), "p2": (0.42, 0.42)}).items()}
    assert choose(clear) == "p2"  # a difference after rounding decides; no recall column needed


def test_select_prompt_rules(monkeypatch):
    # md5: "p2" 1d66... < "p1" ec6e...; p2 has the lower unrounded dev mean, equal after rounding
    tied = {None: tables()[None]["nDCG@10"].tolist()} | {"p1": [0.4014, 0.4014, 0.1, 0.1],
                                                           "p2": [0.4012, 0.4012, 0.1, 0.1]}
    frames = tables(tied)
    assert select_prompt(COLLECTION, frames, "nDCG@10").selected_prompts["fold1"] == "p2"
    assert select_prompt(COLLECTION, frames, "nDCG@10", rule="mean").selected_prompts["fold1"] == "p1"
    with pytest.raises(KitError, match="unknown prompt-selection rule"):
        select_prompt(COLLECTION, frames, "nDCG@10", rule="best")


def test_csfcube_prompt_selection_uses_the_authors_rule(collection, tmp_path, monkeypatch):
    """The CSFCube prompt-selection table chooses on each fold's dev half by the recipe's rule
    (`select_prompt`: dev nDCG rounded to 0.1, then Recall@100, then the lowest md5), not by the
    plain mean: its Selected column equals select_prompt's on the same runs."""
    from evalkit.evaluation.evaluate import per_query
    from evalkit.pipeline.runner import RunSettings, bind, obtain
    from evalkit.promptriever.prompts import TIEBREAK, select_prompt
    from evalkit.study import params, prompt_selection, steps

    monkeypatch.setenv("EVALKIT_CACHE", str(tmp_path / "cache"))
    prompts = ["Find the method.", "Be thorough."]
    study = params.check("promptriever", PROFILE="offline", PROTOCOL="pool", MODELS="bm25", DISCOUNT="csfcube",
                         RUNS_DIR=str(tmp_path / "runs"))
    runs = steps.load_prompt_runs(study, collection, prompts)  # the notebook's steps
    values = prompt_selection.per_query(runs, study.measure)
    row = prompt_selection.selection_table(values, prompt_selection.status(runs), collection, study.measure).iloc[0]
    runs = {p: obtain(bind(RunSettings(model="bm25", prompt=p), collection, tmp_path / "runs")).run
            for p in [None, *prompts]}
    tables = {p: per_query(collection, run, [study.measure, TIEBREAK]) for p, run in runs.items()}
    expected = select_prompt(collection, tables, study.measure)
    assert row.Selected == pytest.approx(100 * expected.selected) and row.none == pytest.approx(100 * expected.none)
    assert {row[f"selected on {fold} dev"] for fold in collection.folds} <= set(prompts)
    assert [row[f"selected on {fold} dev"] for fold in collection.folds] == list(expected.selected_prompts.values())


# --- the authors' get_best_dev_prompt on random dev tables ------------------------------------------------


def _authors_get_best_dev_prompt(dev_data: dict):
    """orionw/promptriever at commit cde6c3a18ae94389e421c8171cc884f7946ed326,
    scripts/tables/make_prompt_table_from_results.py `get_best_dev_prompt`, re-implemented:
    dev_data["Prompted"] maps a prompt hash to (ndcg@10, recall@100) as its CSV holds them."""
    if not len(dev_data) or not dev_data["Prompted"]:
        return None, None
    rounded_scores = {k: (f"{v[0]:.1f}", v[1]) for k, v in dev_data["Prompted"].items()}
    max_ndcg = max(v[0] for v in rounded_scores.values())  # strings: "9.5" > "10.2"
    best_prompts = {k: v for k, v in rounded_scores.items() if v[0] == max_ndcg and k not in ["none", None]}
    if len(best_prompts) == 1:
        return list(best_prompts.keys())[0], max_ndcg
    max_recall = max(v[1] or 0 for v in best_prompts.values())
    best_prompts = {k: v for k, v in best_prompts.items() if v[1] == max_recall}
    if len(best_prompts) == 1:
        return list(best_prompts.keys())[0], max_ndcg
    return min(best_prompts.keys()), max_ndcg


def _as_the_authors_csv_holds_it(values: list[float]) -> float:
    """trec_eval's "all" line (the mean, printed %6.4f), then gather_results.py's
    float(...) * 100, written to and read back from its CSV (str of a float)."""
    printed = "%6.4f" % (sum(values) / len(values))
    return float(str(float(printed) * 100))


def test_promptriever_rule_equals_the_authors_function_on_random_dev_tables():
    from evalkit.promptriever.prompts import TIEBREAK, prompt_hash, promptriever_choice

    rng = random.Random(3)
    choose = promptriever_choice("nDCG@10")
    prompts = [f"Prompt number {i}." for i in range(6)]
    hashes = {prompt_hash(p): p for p in prompts}
    raw_rule_differs = 0
    for _ in range(800):
        base = [rng.uniform(0.2, 0.95) for _ in range(8)]  # nDCG values with two digits before the point
        dev, prompted = {}, {}
        for p in prompts:
            ndcg = [min(1.0, max(0.1, b + rng.gauss(0, 0.004))) for b in base]
            recall = [rng.choice([0.5, 0.75, 1.0]) for _ in base]  # ties at 4 decimals are common
            dev[p] = pd.DataFrame({"nDCG@10": ndcg, TIEBREAK: recall}, index=[f"q{i}" for i in range(8)])
            prompted[prompt_hash(p)] = (_as_the_authors_csv_holds_it(ndcg), _as_the_authors_csv_holds_it(recall))
        authors, _ = _authors_get_best_dev_prompt({"Prompted": prompted})
        assert choose(dev) == hashes[authors]
        # the former rule (the unrounded mean x100 to 0.1, recall unrounded) chooses otherwise now and then
        raw = {p: float(f"{100 * t['nDCG@10'].mean():.1f}") for p, t in dev.items()}
        tied = [p for p in prompts if raw[p] == max(raw.values())]
        recall = {p: dev[p][TIEBREAK].mean() for p in tied}
        former = min((p for p in tied if recall[p] == max(recall.values())), key=prompt_hash)
        raw_rule_differs += former != hashes[authors]
    assert raw_rule_differs > 5  # 27 of these 800 tables


def test_the_authors_string_comparison_is_the_one_exception():
    # "9.5" > "10.2" as strings: the authors' script picks the prompt at 9.5; the kit, at 10.2
    from evalkit.promptriever.prompts import TIEBREAK, prompt_hash, promptriever_choice

    low, high = "Prompt number 0.", "Prompt number 1."
    dev = {low: pd.DataFrame({"nDCG@10": [0.095], TIEBREAK: [1.0]}, index=["q"]),
           high: pd.DataFrame({"nDCG@10": [0.102], TIEBREAK: [1.0]}, index=["q"])}
    prompted = {prompt_hash(p): (_as_the_authors_csv_holds_it(t["nDCG@10"].tolist()), 100.0) for p, t in dev.items()}
    assert _authors_get_best_dev_prompt({"Prompted": prompted})[0] == prompt_hash(low)
    assert promptriever_choice("nDCG@10")(dev) == high


def test_a_tied_prompt_without_recall_loses_to_one_with_recall_zero_as_in_the_authors_function():
    # both round to 40.1; "no recall" has no R@100 value, "zero recall" has 0.0: the authors keep the latter
    from evalkit.promptriever.prompts import TIEBREAK, prompt_hash, promptriever_choice

    names = sorted(["no recall A.", "zero recall B.", "no recall C."], key=prompt_hash)
    zero = names[-1]  # the highest md5 hex: a rule keeping all three would choose another by the hash
    dev = {p: pd.DataFrame({"nDCG@10": [0.4012], TIEBREAK: [0.0 if p == zero else math.nan]}, index=["q"])
           for p in names}
    prompted = {prompt_hash(p): (40.12, 0.0 if p == zero else None) for p in names}
    assert _authors_get_best_dev_prompt({"Prompted": prompted})[0] == prompt_hash(zero)
    assert promptriever_choice("nDCG@10")(dev) == zero
    without = {p: t.drop(columns=TIEBREAK) if p != zero else t for p, t in dev.items()}  # no column at all
    assert promptriever_choice("nDCG@10")(without) == zero
    nobody = {p: t.drop(columns=TIEBREAK) for p, t in dev.items()}  # the script fails here; the kit: lowest md5
    assert promptriever_choice("nDCG@10")(nobody) == names[0]
