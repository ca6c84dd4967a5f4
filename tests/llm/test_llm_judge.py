"""Judgments in both orders, disagreement, the judgment cache and the reranker's output, on a fake backend."""

from __future__ import annotations

import pytest
from fake_llm import FakeBackend

from evalkit.core.errors import KitError
from evalkit.data.runs import ranked
from evalkit.llm import LLMReranker
from evalkit.llm.templates import load_template

GRADES = {f"{i:02d}": g for i, g in enumerate([0, 3, 1, 0, 2, 0, 3, 1, 0, 0, 2, 1])}


def by_grade(a: str, b: str) -> float:
    return 0.9 if GRADES[a] > GRADES[b] else 0.1 if GRADES[a] < GRADES[b] else 0.5


def query():
    candidates = [(d, f"doc{d} text of candidate {d}") for d in GRADES]
    first_stage = {d: 100.0 - i for i, d in enumerate(GRADES)}
    return "find the same method", "seed paper title and abstract", candidates, first_stage


def reranker(tmp_path, fake, **settings):
    return LLMReranker({"cache": tmp_path / "judgments.sqlite", **settings}, backend=fake)


@pytest.mark.parametrize("variant", ["heapsort", "sliding", "allpairs"])
def test_prp_output_puts_the_top_k_first_and_keeps_first_stage_order_below(tmp_path, variant):
    rr = reranker(tmp_path, FakeBackend(by_grade), variant=variant, k=4, depth=10)
    instruction, seed, candidates, first_stage = query()
    order = ranked(rr.rerank(instruction, seed, candidates, first_stage))
    assert [GRADES[d] for d in order[:4]] == sorted((GRADES[d] for d in list(GRADES)[:10]), reverse=True)[:4]
    assert order[4:] == [d for d in ranked(first_stage) if d not in order[:4]]
    stats = rr.accounting()
    assert stats["judgments"] == 2 * stats["comparisons"] and stats["queries"] == 1
    assert stats["disagreement_share"] > 0  # equal grades: both orders say "A"


def test_a_win_needs_both_orders(tmp_path):
    judge = reranker(tmp_path, FakeBackend(lambda a, b: 0.9), disagreement="half").judge  # always "A"
    _, _, candidates, _ = query()
    compare = judge.for_query("i", "s", dict(candidates), sorting=False).compare
    assert compare([("00", "01"), ("01", "00")]) == [0.5, 0.5]
    stats = judge.tally.as_dict()
    assert stats["disagreement_share"] == 1.0 and stats["a_win_share"] == 1.0
    assert stats["disagreement_wins"]["tie"] == 2


def test_disagreement_incumbent_keeps_the_document_in_place(tmp_path):
    """llm-rankers: x > y only when both orders agree; the challenger (first of a sort's pair) loses."""
    judge = reranker(tmp_path, FakeBackend(lambda a, b: 0.9)).judge  # default rule, always "A"
    compare = judge.for_query("i", "s", dict(query()[2])).compare
    assert compare([("00", "01"), ("05", "02")]) == [0.0, 0.0]
    stats = judge.tally.as_dict()
    # the incumbent won each time, decided by the order showing it as passage A
    assert stats["disagreement_wins"] == {"winner_first": 2, "winner_second": 0, "neither": 0, "tie": 0}
    assert stats["disagreements_first_stage_kept"] == 1  # 00 ahead of 01 in the first stage, 02 ahead of 05
    allpairs = reranker(tmp_path, FakeBackend(lambda a, b: 0.9)).judge
    assert allpairs.for_query("i", "s", dict(query()[2]), sorting=False).compare([("00", "01")]) == [0.5]


def test_agreeing_orders_give_a_full_win(tmp_path):
    judge = reranker(tmp_path, FakeBackend(by_grade)).judge
    compare = judge.for_query("i", "s", dict(query()[2])).compare
    assert compare([("01", "00"), ("00", "01")]) == [1.0, 0.0]
    assert judge.tally.disagreements == 0 and judge.tally.a_wins == 2


def test_disagreement_keep_lets_the_first_stage_order_stand(tmp_path):
    judge = reranker(tmp_path, FakeBackend(lambda a, b: 0.1), disagreement="keep").judge  # always "B"
    compare = judge.for_query("i", "s", dict(query()[2])).compare
    assert compare([("00", "01"), ("05", "02")]) == [1.0, 0.0]


def test_disagreement_average_lets_the_more_confident_order_decide(tmp_path):
    bias = {("00", "01"): 0.9, ("01", "00"): 0.7}  # always "A", more strongly for 00 first
    judge = reranker(tmp_path, FakeBackend(lambda a, b: bias[a, b]), disagreement="average").judge
    compare = judge.for_query("i", "s", dict(query()[2])).compare
    assert compare([("00", "01"), ("01", "00")]) == pytest.approx([0.6, 0.4])


def test_rerun_is_served_by_the_cache(tmp_path):
    instruction, seed, candidates, first_stage = query()
    first = FakeBackend(by_grade)
    scores = reranker(tmp_path, first, k=5).rerank(instruction, seed, candidates, first_stage)
    assert first.calls > 0
    second = FakeBackend(by_grade)
    again = reranker(tmp_path, second, k=5)
    assert again.rerank(instruction, seed, candidates, first_stage) == scores
    assert second.calls == 0
    stats = again.accounting()
    assert stats["prompts_sent"] == 0 and stats["cache_hits"] == stats["judgments"] > 0


def test_interrupted_run_resumes_without_repeating_judgments(tmp_path):
    instruction, seed, candidates, first_stage = query()
    done = []

    def dies_after_three(a, b):
        if len(done) == 3:
            raise KeyboardInterrupt
        done.append((a, b))
        return by_grade(a, b)

    with pytest.raises(KeyboardInterrupt):
        reranker(tmp_path, FakeBackend(dies_after_three), variant="allpairs", chunk=1).rerank(
            instruction, seed, candidates, first_stage)
    resumed = reranker(tmp_path, FakeBackend(by_grade), variant="allpairs", chunk=1)
    resumed.rerank(instruction, seed, candidates, first_stage)
    stats = resumed.accounting()
    assert stats["cache_hits"] == 3 and stats["prompts_sent"] == stats["judgments"] - 3


def test_cache_key_separates_instructions_models_and_templates(tmp_path):
    instruction, seed, candidates, first_stage = query()
    reranker(tmp_path, FakeBackend(by_grade)).rerank(instruction, seed, candidates, first_stage)
    other_model = FakeBackend(by_grade)
    other_model.revision = "r2"
    for backend, instr, settings in [(FakeBackend(by_grade), "another instruction", {}),
                                     (other_model, instruction, {}),
                                     (FakeBackend(by_grade), instruction, {"budgets": {"candidate": 5}})]:
        rr = reranker(tmp_path, backend, **settings)
        rr.rerank(instr, seed, candidates, first_stage)
        assert rr.accounting()["cache_hits"] < rr.accounting()["judgments"]


def test_pointwise_orders_by_p_yes_and_breaks_ties_by_first_stage(tmp_path):
    relevance = {d: {3: 0.9, 2: 0.7}.get(g, 0.2) for d, g in GRADES.items()}
    backend = FakeBackend(relevance=relevance)
    rr = reranker(tmp_path, backend, method="pw", depth=8)
    instruction, seed, candidates, first_stage = query()
    order = ranked(rr.rerank(instruction, seed, candidates, first_stage))
    head = list(GRADES)[:8]
    assert order[:8] == sorted(head, key=lambda d: -relevance[d])
    assert order[8:] == list(GRADES)[8:]
    assert backend.calls == 1 and rr.accounting()["judgments"] == 8


def test_missing_candidate_text_is_a_kit_error(tmp_path):
    instruction, seed, candidates, first_stage = query()
    with pytest.raises(KitError, match="no text for candidate"):
        reranker(tmp_path, FakeBackend(by_grade)).rerank(instruction, seed, candidates[:3], first_stage)


@pytest.mark.parametrize("settings,message", [
    ({"method": "listwise"}, "method"),
    ({"variant": "quicksort"}, "variant"),
    ({"k": 0}, "positive"),
    ({"method": "pw", "template": "prp"}, "does not suit"),
    ({"template": "nope"}, "no template"),
    ({"disagreement": "coin"}, "disagreement"),
    ({"backend": "nope"}, "unknown LLM backend"),
    ({"backend": "openai", "base_url": "http://x", "model": "m", "temperature": 1}, "no setting .temperature."),
])
def test_bad_settings_are_kit_errors(tmp_path, settings, message):
    backend = None if "backend" in settings else FakeBackend(by_grade)
    with pytest.raises(KitError, match=message):
        reranker(tmp_path, backend, **settings)


def test_templates_load_with_budget_overrides_and_fingerprints():
    prp, tighter = load_template("prp"), load_template("prp", {"seed": 10})
    assert prp.pairwise and not load_template("pointwise").pairwise
    assert tighter.budgets["seed"] == 10 and tighter.budgets["candidate"] == prp.budgets["candidate"]
    assert prp.digest != tighter.digest
    assert "Output Passage A or Passage B" in prp.suffix


def test_describe_names_model_and_template(tmp_path):
    info = reranker(tmp_path, FakeBackend(by_grade)).describe()
    assert info["model"] == "fake" and info["template"] == "prp" and info["variant"] == "heapsort"
