"""PRP heapsort, the whole ranking, against ielab/llm-rankers' `PairwiseLlmRanker.rerank`
(method "heapsort") re-implemented below from llmrankers/pairwise.py at commit
b36517bf17a3956dc56c4c967f972d02390b1cdd (the same in every earlier version of the file):

- ``ComparableDoc.__gt__(self, other)`` asks ``compare(query, [self.text, other.text])`` (both
  orders) and is true only when the answers read ``["Passage A", "Passage B"]``;
- ``heapSort(arr, k)`` builds a max-heap with ``heapify(arr, n, i)`` for i from n // 2 down to 0
  (a node is compared with its left child, then the right child with the larger), then swaps
  the root to the end and re-heapifies, stopping after k extractions;
- ``rerank`` reads ``reversed(arr)``, keeps its first k, and appends every other document in the
  order of the ranking it was given (``for doc in original_ranking: if doc.docid not in
  top_doc_ids``): below rank k, first-stage order.

The kit runs the same sort through `LLMReranker` (variant heapsort, disagreement incumbent) on
300 simulated judges, position-biased so that the two orders often disagree; the whole
ranking and the comparisons asked must be those of the re-implementation."""

from __future__ import annotations

import random
import re
from collections import Counter

import pytest

from evalkit.data.runs import ranked
from evalkit.llm import LLMReranker
from evalkit.llm.backend import Prompts, Usage


def llm_rankers_heapsort(docids: list[str], compare, k: int, heap_array: bool = False) -> tuple[list[str], Counter]:
    """`PairwiseLlmRanker.rerank` (heapsort) over `docids` in first-stage order; `compare(x, y)`
    returns the two answers ("Passage A"/"Passage B"/other) for x shown first, then y first.
    Also the (self, other) pairs `__gt__` was asked, counted. `heap_array`: return `reversed(arr)`
    whole (what remains of the heap below k), not `rerank`'s output, to show the two differ."""
    asked: Counter = Counter()

    class ComparableDoc:
        def __init__(self, docid):
            self.docid = docid

        def __gt__(self, other):
            asked[self.docid, other.docid] += 1
            out = compare(self.docid, other.docid)
            return out[0] == "Passage A" and out[1] == "Passage B"

    def heapify(arr, n, i):
        largest = i
        left, right = 2 * i + 1, 2 * i + 2
        if left < n and arr[left] > arr[i]:
            largest = left
        if right < n and arr[right] > arr[largest]:
            largest = right
        if largest != i:
            arr[i], arr[largest] = arr[largest], arr[i]
            heapify(arr, n, largest)

    def heap_sort(arr, k):
        n, done = len(arr), 0
        for i in range(n // 2, -1, -1):
            heapify(arr, n, i)
        for i in range(n - 1, 0, -1):
            arr[i], arr[0] = arr[0], arr[i]
            done += 1
            if done == k:
                break
            heapify(arr, i, 0)

    arr = [ComparableDoc(d) for d in docids]
    heap_sort(arr, k)
    ranking = [doc.docid for doc in reversed(arr)]
    if heap_array:
        return ranking, asked
    top = ranking[:k]
    return top + [d for d in docids if d not in set(top)], asked


class Judges:
    """Simulated judges: judge j's P("A") for an order (x first, y second) is fixed at random,
    tilted towards "A" (position bias) and sometimes exactly 0.5 (an answer naming neither)."""

    model, revision, numerics = "simulated", "r1", ""

    def __init__(self):
        self.usage = Usage()
        self.p: dict[tuple[str, str, str], float] = {}

    def set_judge(self, judge: str, docs: list[str], rng: random.Random) -> None:
        strength = {d: rng.random() for d in docs}
        bias = rng.choice([0.0, 0.2, 0.5])
        for x in docs:
            for y in docs:
                if x != y:
                    p = 0.5 if rng.random() < 0.05 else \
                        min(1.0, max(0.0, 0.5 + (strength[x] - strength[y]) + bias * rng.random()))
                    self.p[judge, x, y] = p

    def answers(self, judge: str, x: str, y: str) -> list[str]:
        """What llm-rankers would read: one greedy answer per order."""
        def said(p):
            return "Passage A" if p > 0.5 else "Passage B" if p < 0.5 else "Passage ?"
        return [said(self.p[judge, x, y]), said(self.p[judge, y, x])]

    def truncate(self, text: str, tokens: int) -> str:
        return text

    def first_label_probs(self, prompts: Prompts) -> list[float]:
        judge = re.search(r"judge(\d+)", prompts.prefix).group(1)
        self.usage.prompts += len(prompts.suffixes)
        return [self.p[(judge, *re.findall(r"doc(\d+)", s))] for s in prompts.suffixes]


def test_heapsort_ranks_every_document_as_llm_rankers(tmp_path):
    rng = random.Random(28)
    judges = Judges()
    jobs, cases = [], []
    for j in range(300):
        n = rng.randint(1, 40)
        k = rng.choice([1, 2, 5, 10, 20, n, n + 3])
        docs = [f"{i}" for i in rng.sample(range(1000), n)]
        judges.set_judge(str(j), docs, rng)
        first_stage = {d: float(n - i) for i, d in enumerate(docs)}  # first-stage order: docs as listed
        jobs.append((f"find judge{j}", f"seed of judge{j}", [(d, f"doc{d}") for d in docs], first_stage, k))
        cases.append((str(j), docs, k))
    by_k: dict[int, list[int]] = {}
    for i, job in enumerate(jobs):
        by_k.setdefault(job[4], []).append(i)
    differences = below_k = 0
    for k, members in by_k.items():
        rr = LLMReranker({"cache": tmp_path / f"k{k}.sqlite", "variant": "heapsort", "k": k, "depth": 1000,
                          "disagreement": "incumbent", "template": "prp-qin"}, backend=judges)
        outputs = rr.rerank_many([jobs[i][:4] for i in members])
        asked_reference = 0
        for i, out in zip(members, outputs):
            judge, docs, _ = cases[i]
            reference, asked = llm_rankers_heapsort(docs, lambda x, y, judge=judge: judges.answers(judge, x, y), k)
            differences += ranked(out) != reference
            asked_reference += sum(asked.values())
            below_k += len(docs) > k
        assert rr.accounting()["comparisons"] == asked_reference, k  # the same number of comparisons
    assert differences == 0
    assert below_k > 150  # most cases have documents below rank k: the tail is tested


def test_below_k_the_heap_array_is_not_first_stage_order():
    # what remains of the heap array below k is another order: a kit returning it (or any order
    # but the first stage's) below k fails the test above
    rng = random.Random(1)
    judges = Judges()
    differ = 0
    for j in range(20):
        docs = [str(i) for i in rng.sample(range(1000), 30)]
        judges.set_judge(str(j), docs, rng)
        heap, _ = llm_rankers_heapsort(docs, lambda x, y, j=j: judges.answers(str(j), x, y), 5, heap_array=True)
        order, _ = llm_rankers_heapsort(docs, lambda x, y, j=j: judges.answers(str(j), x, y), 5)
        assert heap[:5] == order[:5]
        differ += heap[5:] != order[5:]
    assert differ == 20


@pytest.mark.parametrize("n, k", [(1, 1), (2, 1), (2, 5), (3, 3)])
def test_tiny_lists(n, k):
    judges = Judges()
    docs = [str(i) for i in range(n)]
    judges.set_judge("0", docs, random.Random(n))
    order, _ = llm_rankers_heapsort(docs, lambda x, y: judges.answers("0", x, y), k)
    assert sorted(order) == docs
