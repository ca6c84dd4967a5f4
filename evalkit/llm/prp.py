"""Pairwise Ranking Prompting (Qin et al., 2023): orderings built from pairwise comparisons.

`compare(pairs)` gives x's share of the win (1, 0.5 or 0) for every pair (x, y). Each
function takes documents in first-stage order and returns them all, reordered:
- `all_pairs`: every pair once (N(N-1)/2 comparisons); order by wins, ties in input order.
- `sliding_window`: `passes` bubble passes from the bottom (N-1, N-2, ... comparisons);
  after pass i the i best are on top, the rest keep their relative order as bubbled.
- `heapsort_top`: a max-heap over all N (about 2N comparisons), then k extractions
  (about 2 log2 N each): the top k in order, the rest in input order.
In the sorts a tie (share 0.5) is broken by the input order, so under a judge that
ties everything they return the input unchanged.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

Compare = Callable[[Sequence[tuple[str, str]]], list[float]]


def _ahead(docs: Sequence[str], compare: Compare) -> Callable[[str, str], bool]:
    """x before y: x wins, or they tie and x comes first in docs."""
    position = {doc: i for i, doc in enumerate(docs)}

    def ahead(x: str, y: str) -> bool:
        share = compare([(x, y)])[0]
        return share > 0.5 or (share == 0.5 and position[x] < position[y])

    return ahead


def all_pairs(docs: Sequence[str], compare: Compare) -> list[str]:
    pairs = [(x, y) for i, x in enumerate(docs) for y in docs[i + 1:]]
    wins = dict.fromkeys(docs, 0.0)
    for (x, y), share in zip(pairs, compare(pairs)):
        wins[x] += share
        wins[y] += 1.0 - share
    return sorted(docs, key=lambda d: -wins[d])


def sliding_window(docs: Sequence[str], compare: Compare, passes: int) -> list[str]:
    order, ahead = list(docs), _ahead(docs, compare)
    for top in range(min(passes, len(order) - 1)):
        for i in range(len(order) - 1, top, -1):
            if ahead(order[i], order[i - 1]):
                order[i - 1], order[i] = order[i], order[i - 1]
    return order


def heapsort_top(docs: Sequence[str], compare: Compare, k: int) -> list[str]:
    heap, ahead = list(docs), _ahead(docs, compare)

    def beats(i: int, j: int) -> bool:
        return ahead(heap[i], heap[j])

    def sift_down(i: int, size: int) -> None:
        while (child := 2 * i + 1) < size:
            if child + 1 < size and beats(child + 1, child):
                child += 1
            if not beats(child, i):
                return
            heap[i], heap[child] = heap[child], heap[i]
            i = child

    for i in range(len(heap) // 2 - 1, -1, -1):
        sift_down(i, len(heap))
    size, top = len(heap), []
    for _ in range(min(k, size)):
        top.append(heap[0])
        size -= 1
        if len(top) < k:
            heap[0] = heap[size]
            sift_down(0, size)
    chosen = set(top)
    return top + [d for d in docs if d not in chosen]
