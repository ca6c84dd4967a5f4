"""PRP all pairs and the sliding window against ielab/llm-rankers' `PairwiseLlmRanker.rerank`
(methods "allpair" and "bubblesort"), re-implemented below from llmrankers/pairwise.py at commit
b36517bf17a3956dc56c4c967f972d02390b1cdd:

- allpair: every pair of the ranking (``itertools.combinations``), both orders; a win (the two
  answers ``["Passage A", "Passage B"]`` for the first, the reverse for the second) adds 1 to
  the winner's entry of a ``defaultdict(float)``, anything else 0.5 to both (first, then
  second); the documents are the dict's, sorted by score with ``reverse=True`` (stable: equal
  scores keep the insertion order, the order they first scored); ``rerank`` keeps the first k
  and appends the others in first-stage order;
- bubblesort: k passes from the bottom; a pass starts at ``last_end``, which moves up by one
  for every comparison before the pass's first swap and, at that swap, back down by one unless
  it is at the bottom; ``compare`` (both orders) counts one in ``total_compare``.

The kit runs them through `LLMReranker` (disagreement incumbent) on the simulated judges of the
heapsort test: all pairs gives the whole ranking llm-rankers gives; the sliding window gives the
same ranking with full passes, and its accounting reports both its own comparisons and the
ones llm-rankers would count under the same judgments."""

from __future__ import annotations

import random
from collections import defaultdict
from itertools import combinations

from evalkit.data.runs import ranked
from evalkit.llm import LLMReranker
from tests.llm.test_llm_rankers_heapsort import Judges


def llm_rankers_allpair(docids: list[str], answers, k: int) -> list[str]:
    scores: dict[str, float] = defaultdict(float)
    for doc1, doc2 in combinations(docids, 2):
        out1, out2 = answers(doc1, doc2)[0], answers(doc2, doc1)[0]
        if out1 == "Passage A" and out2 == "Passage B":
            scores[doc1] += 1
        elif out1 == "Passage B" and out2 == "Passage A":
            scores[doc2] += 1
        else:
            scores[doc1] += 0.5
            scores[doc2] += 0.5
    ranking = [d for d, _ in sorted(scores.items(), key=lambda item: item[1], reverse=True)]
    top = ranking[:k]
    return top + [d for d in docids if d not in set(top)]


def llm_rankers_bubblesort(docids: list[str], answers, k: int) -> tuple[list[str], int]:
    ranking, asked = list(docids), 0
    last_end = len(ranking) - 1
    for i in range(min(k, len(ranking))):
        current, is_change = last_end, False
        while current > i:
            asked += 1
            if answers(ranking[current], ranking[current - 1]) == ["Passage A", "Passage B"]:
                ranking[current - 1], ranking[current] = ranking[current], ranking[current - 1]
                if not is_change:
                    is_change = True
                    if last_end != len(ranking) - 1:
                        last_end += 1
            if not is_change:
                last_end -= 1
            current -= 1
    top = ranking[:k]
    return top + [d for d in docids if d not in set(top)], asked


class CoinJudges(Judges):
    """Judges whose every answer is a coin toss: cycles and equal win counts at rank k are common."""

    def set_judge(self, judge: str, docs: list[str], rng: random.Random) -> None:
        for x in docs:
            for y in docs:
                if x != y:
                    self.p[judge, x, y] = rng.choice([0.2, 0.5, 0.8])


def _cases(seed: int, count: int, judges: Judges):
    rng = random.Random(seed)
    for j in range(count):
        n = rng.randint(2, 30)
        k = rng.choice([1, 3, 5, 10, n])
        docs = [f"{i}" for i in rng.sample(range(1000), n)]
        judges.set_judge(str(j), docs, rng)
        first_stage = {d: float(n - i) for i, d in enumerate(docs)}
        yield str(j), docs, k, (f"find judge{j}", f"seed of judge{j}", [(d, f"doc{d}") for d in docs], first_stage)


def _rerank(tmp_path, judges, variant, k, jobs):
    rr = LLMReranker({"cache": tmp_path / f"{variant}{k}.sqlite", "variant": variant, "k": k, "depth": 1000,
                      "disagreement": "incumbent", "template": "prp-qin"}, backend=judges)
    return rr, rr.rerank_many(jobs)


def test_all_pairs_ranks_every_document_as_llm_rankers_ties_at_rank_k_included(tmp_path):
    judges = CoinJudges()
    cases = list(_cases(38, 300, judges))
    differences = tie_decides = 0
    for k in sorted({c[2] for c in cases}):
        chosen = [c for c in cases if c[2] == k]
        _, outputs = _rerank(tmp_path, judges, "allpairs", k, [c[3] for c in chosen])
        for (judge, docs, _, _), out in zip(chosen, outputs):
            reference = llm_rankers_allpair(docs, lambda x, y, j=judge: judges.answers(j, x, y), k)
            differences += ranked(out) != reference
            wins = _wins(judges, judge, docs)
            by_input = sorted(docs, key=lambda d: -wins[d])  # equal wins in input order: the former rule
            tie_decides += set(by_input[:k]) != set(reference[:k])
    assert differences == 0
    assert tie_decides > 5  # cases where the tie order at rank k changes which documents enter the top k
    print(f"all pairs: equal wins in input order would change the top k in {tie_decides} of {len(cases)}")


def test_all_pairs_a_cycle_puts_the_first_to_score_on_top():
    # 1 beats 0, 0 beats 2, 2 beats 1: one win each; llm-rankers' dict holds 1 first (it won the
    # first pair), so the top 1 is 1, not 0 (first in input order)
    from evalkit.llm.prp import all_pairs

    beats = {("1", "0"), ("0", "2"), ("2", "1")}
    order = all_pairs(["0", "1", "2"], lambda pairs: [1.0 if p in beats else 0.0 for p in pairs])
    answers = {(x, y): ["Passage A", "Passage B"] if (x, y) in beats else ["Passage B", "Passage A"]
               for x in "012" for y in "012" if x != y}
    assert order[0] == "1" == llm_rankers_allpair(["0", "1", "2"], lambda x, y: answers[x, y], 1)[0]


def _wins(judges, judge, docs):
    wins = dict.fromkeys(docs, 0.0)
    for x, y in combinations(docs, 2):
        out = [judges.answers(judge, x, y)[0], judges.answers(judge, y, x)[0]]
        share = 1.0 if out == ["Passage A", "Passage B"] else 0.0 if out == ["Passage B", "Passage A"] else 0.5
        wins[x] += share
        wins[y] += 1 - share
    return wins


def test_the_sliding_window_ranks_as_llm_rankers_and_reports_its_count(tmp_path):
    judges = Judges()
    cases = list(_cases(61, 300, judges))
    differences = kit = reference_count = sent = 0
    for k in sorted({c[2] for c in cases}):
        chosen = [c for c in cases if c[2] == k]
        rr, outputs = _rerank(tmp_path, judges, "sliding", k, [c[3] for c in chosen])
        counted = 0
        for (judge, docs, _, _), out in zip(chosen, outputs):
            reference, asked = llm_rankers_bubblesort(docs, lambda x, y, j=judge: judges.answers(j, x, y), k)
            differences += ranked(out) != reference
            counted += asked
        accounting = rr.accounting()
        assert accounting["llm_rankers_comparisons"] == counted, k  # what llm-rankers would count
        kit += accounting["comparisons"]
        reference_count += counted
        sent += accounting["prompts_sent"]
    assert differences == 0
    # the kit's full passes ask more comparisons than llm-rankers counts, but repeated pairs are
    # answered from the memo: the model receives fewer prompts than llm-rankers' 2 per comparison
    assert kit > reference_count and sent < 2 * reference_count
    print(f"sliding: kit {kit} comparisons, llm-rankers {reference_count}, prompts sent {sent} "
          f"(llm-rankers sends {2 * reference_count})")
