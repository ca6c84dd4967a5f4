"""PRP sorting under the oracle judge: exact top k, and the number of comparisons."""

from __future__ import annotations

import random

import pytest

from evalkit.llm.oracle import oracle
from evalkit.llm.prp import all_pairs, heapsort_top, sliding_window


def counted(compare):
    calls = []

    def wrapped(pairs):
        calls.extend(pairs)
        return compare(pairs)

    return wrapped, calls


def shuffled(n: int, seed: int) -> list[str]:
    docs = [f"d{i:03d}" for i in range(n)]
    random.Random(seed).shuffle(docs)
    return docs


def distinct_grades(docs):
    return {d: float(int(d[1:])) for d in docs}  # d199 best


def graded(docs, seed):
    """CSFCube-like grades 0-3, many ties."""
    rng = random.Random(seed)
    return {d: rng.choice([0, 0, 0, 1, 1, 2, 3]) for d in docs}


ORDERS = {"random": lambda d: d, "ascending": sorted, "descending": lambda d: sorted(d, reverse=True)}


@pytest.mark.parametrize("arrange", ORDERS)
@pytest.mark.parametrize("seed", range(3))
def test_heapsort_returns_the_exact_top_k_within_700_comparisons(arrange, seed):
    docs = ORDERS[arrange](shuffled(200, seed))
    grades = distinct_grades(docs)
    compare, calls = counted(oracle(grades))
    order = heapsort_top(docs, compare, k=20)
    assert order[:20] == sorted(docs, key=lambda d: -grades[d])[:20]
    assert order[20:] == [d for d in docs if d not in set(order[:20])]
    assert len(calls) <= 700


@pytest.mark.parametrize("seed", range(5))
def test_heapsort_top_k_with_tied_grades(seed):
    docs = shuffled(150, seed)
    grades = graded(docs, seed)
    order = heapsort_top(docs, oracle(grades), k=20)
    assert [grades[d] for d in order[:20]] == sorted(grades.values(), reverse=True)[:20]


@pytest.mark.parametrize("n,k", [(1, 20), (5, 20), (20, 20), (21, 20), (30, 1)])
def test_heapsort_small_inputs(n, k):
    docs = shuffled(n, 0)
    grades = distinct_grades(docs)
    order = heapsort_top(docs, oracle(grades), k)
    assert sorted(order) == sorted(docs)
    assert order[:k] == sorted(docs, key=lambda d: -grades[d])[:k]


def test_all_pairs_makes_n_choose_2_comparisons_and_sorts():
    docs = shuffled(40, 1)
    grades = distinct_grades(docs)
    compare, calls = counted(oracle(grades))
    assert all_pairs(docs, compare) == sorted(docs, key=lambda d: -grades[d])
    assert len(calls) == 40 * 39 // 2
    assert len({frozenset(p) for p in calls}) == len(calls)


def test_all_pairs_count_at_200():
    docs = shuffled(200, 2)
    compare, calls = counted(oracle(distinct_grades(docs)))
    all_pairs(docs, compare)
    assert len(calls) == 19_900


def test_all_pairs_ties_keep_input_order():
    docs = ["c", "a", "b"]
    assert all_pairs(docs, lambda pairs: [0.5] * len(pairs)) == docs


@pytest.mark.parametrize("passes", [1, 5, 10])
def test_sliding_window_puts_the_top_passes_first(passes):
    docs = shuffled(60, 3)
    grades = distinct_grades(docs)
    compare, calls = counted(oracle(grades))
    order = sliding_window(docs, compare, passes)
    assert order[:passes] == sorted(docs, key=lambda d: -grades[d])[:passes]
    assert sorted(order) == sorted(docs)
    assert len(calls) == sum(60 - 1 - p for p in range(passes))


def test_sliding_window_with_tied_grades():
    docs = shuffled(80, 4)
    grades = graded(docs, 4)
    order = sliding_window(docs, oracle(grades), 10)
    assert [grades[d] for d in order[:10]] == sorted(grades.values(), reverse=True)[:10]


@pytest.mark.parametrize("sort", [lambda d, c: heapsort_top(d, c, 3), lambda d, c: sliding_window(d, c, 3)])
def test_ties_are_broken_by_input_order(sort):
    docs = shuffled(12, 5)
    assert sort(docs, lambda pairs: [0.5] * len(pairs)) == docs
