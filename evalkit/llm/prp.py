"""Pairwise Ranking Prompting (Qin et al., 2023): orderings built from pairwise comparisons.

Each variant is written as a generator of comparison batches (`*_steps`): it yields a
list of pairs (x, y), is sent x's share of the win (1, 0.5 or 0) for each, and returns
all documents, reordered. A scheduler can so run many queries' sorts at once
(`evalkit.llm.schedule`); `drive(steps, compare)` runs one with a plain callable, and
`all_pairs`, `sliding_window`, `heapsort_top` are those drivers.

- all pairs: every pair once (N(N-1)/2 comparisons, one batch); order by wins, equal wins in
  the order the documents first scored, as llm-rankers' allpair sorts its win dict (the
  documents that never score last, in input order).
- sliding window: `passes` bubble passes from the bottom (N-1, N-2, ... comparisons, one at
  a time); after pass i the i best are on top, the rest keep their relative order as bubbled.
  llm-rankers' ``bubblesort`` skips the unchanged pairs at the bottom of each pass: the same
  order, fewer comparisons; `llm_rankers_sliding_steps` replays it on the kit's judgments to
  count them (the run's accounting reports both).
- heapsort: llm-rankers' heapsort (ielab/llm-rankers, `PairwiseLlmRanker.heapSort`): build a
  max-heap over all N (about 2N comparisons; the sift-downs of one heap level touch disjoint
  subtrees and are asked together), then k extractions (about 2 log2 N each, one at a
  time): the top k in order, the rest in input order. As there, a node is compared with its
  left child, then the right child with the larger of the two.

In the sorts every pair is (challenger, incumbent): the document that moves ahead when it
wins (heap child, lower neighbour) comes first. A tie (share 0.5) is broken by the input
order, so under a judge that ties everything they return the input unchanged.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Sequence

Compare = Callable[[Sequence[tuple[str, str]]], list[float]]
Steps = Generator[list[tuple[str, str]], list[float], list[str]]


def drive(steps: Generator, answer: Callable[[list], list]):
    """Run a step generator to its end, answering every request with `answer(request)`."""
    try:
        request = next(steps)
        while True:
            request = steps.send(answer(request))
    except StopIteration as stop:
        return stop.value


def together(gens: list[Generator]) -> Generator:
    """Step generators run in lockstep: their requests joined into one, answers split back."""
    waiting = []
    for gen in gens:
        try:
            waiting.append((gen, next(gen)))
        except StopIteration:
            pass
    while waiting:
        answers = yield [item for _, request in waiting for item in request]
        resumed, at = [], 0
        for gen, request in waiting:
            part, at = answers[at:at + len(request)], at + len(request)
            try:
                resumed.append((gen, gen.send(part)))
            except StopIteration:
                pass
        waiting = resumed


def _ahead(docs: Sequence[str]):
    position = {doc: i for i, doc in enumerate(docs)}

    def ahead(x: str, y: str):
        """x before y: x wins, or they tie and x comes first in docs."""
        share = (yield [(x, y)])[0]
        return share > 0.5 or (share == 0.5 and position[x] < position[y])

    return ahead


def all_pairs_steps(docs: Sequence[str], k: int = 0) -> Steps:
    """Every pair once; documents by wins, equal wins in the order they first scored (llm-rankers'
    allpair: its win dict's insertion order, pairs in input order, x before y on a half win),
    those that never scored after them in input order."""
    pairs = [(x, y) for i, x in enumerate(docs) for y in docs[i + 1:]]
    wins = dict.fromkeys(docs, 0.0)
    first_scored: dict[str, int] = {}
    shares = (yield pairs) if pairs else []
    for (x, y), share in zip(pairs, shares):
        wins[x] += share
        wins[y] += 1.0 - share
        for doc, got in ((x, share), (y, 1.0 - share)):
            if got > 0:
                first_scored.setdefault(doc, len(first_scored))
    return sorted(docs, key=lambda d: (-wins[d], first_scored.get(d, len(docs))))


def sliding_steps(docs: Sequence[str], passes: int) -> Steps:
    order, ahead = list(docs), _ahead(docs)
    for top in range(min(passes, len(order) - 1)):
        for i in range(len(order) - 1, top, -1):
            if (yield from ahead(order[i], order[i - 1])):
                order[i - 1], order[i] = order[i], order[i - 1]
    return order


def llm_rankers_sliding_steps(docs: Sequence[str], passes: int) -> Steps:
    """llm-rankers' sliding window (ielab/llm-rankers, `PairwiseLlmRanker.rerank`, method
    ``bubblesort``), for its comparison count: the same bubble passes, but each pass starts at
    the window's end, which moves up by one for every comparison before a pass's first swap
    (and back down by one at that swap, unless at the bottom), so unchanged pairs at the bottom
    are not asked again. Under one fixed set of judgments it asks a subset of `sliding_steps`'
    comparisons and returns the same order (tests/llm/test_llm_rankers_allpairs_sliding.py)."""
    order, ahead = list(docs), _ahead(docs)
    end = len(order) - 1
    for top in range(min(passes, len(order))):
        i, changed = end, False
        while i > top:
            if (yield from ahead(order[i], order[i - 1])):
                order[i - 1], order[i] = order[i], order[i - 1]
                if not changed:
                    changed = True
                    if end != len(order) - 1:
                        end += 1
            if not changed:
                end -= 1
            i -= 1
    return order


def replay(steps: Steps, share: Callable[[str, str], float]) -> tuple[list[str], int]:
    """A sort answered from judgments already made (`share(x, y)`: x's share of the win): its
    order and the comparisons it asked."""
    asked = 0

    def answer(pairs):
        nonlocal asked
        asked += len(pairs)
        return [share(x, y) for x, y in pairs]

    return drive(steps, answer), asked


def heapsort_steps(docs: Sequence[str], k: int) -> Steps:
    heap, ahead = list(docs), _ahead(docs)

    def sift_down(i: int, size: int):
        while True:
            largest, left, right = i, 2 * i + 1, 2 * i + 2
            if left < size and (yield from ahead(heap[left], heap[largest])):
                largest = left
            if right < size and (yield from ahead(heap[right], heap[largest])):
                largest = right
            if largest == i:
                return
            heap[i], heap[largest] = heap[largest], heap[i]
            i = largest

    inner = len(heap) // 2  # nodes 0 .. inner-1 have children
    depth = inner.bit_length() - 1 if inner else -1
    for level in range(depth, -1, -1):  # deepest level first, as the sequential loop from inner-1 down to 0
        nodes = range(min(2 ** (level + 1) - 2, inner - 1), 2 ** level - 2, -1)
        yield from together([sift_down(i, len(heap)) for i in nodes])
    size, top = len(heap), []
    for _ in range(min(k, size)):
        top.append(heap[0])
        size -= 1
        if len(top) < k:
            heap[0] = heap[size]
            yield from sift_down(0, size)
    chosen = set(top)
    return top + [d for d in docs if d not in chosen]


def all_pairs(docs: Sequence[str], compare: Compare) -> list[str]:
    return drive(all_pairs_steps(docs), compare)


def sliding_window(docs: Sequence[str], compare: Compare, passes: int) -> list[str]:
    return drive(sliding_steps(docs, passes), compare)


def heapsort_top(docs: Sequence[str], compare: Compare, k: int) -> list[str]:
    return drive(heapsort_steps(docs, k), compare)


STEPS = {"heapsort": heapsort_steps, "sliding": sliding_steps, "allpairs": all_pairs_steps}
