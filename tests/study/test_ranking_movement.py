"""Table 2's ranking movement (`evalkit.study.steps.ranking_movement`): Kendall tau-b between a
seed's two instructions, undefined (not 1, "unchanged") where one side's scores are constant,
and those seeds counted apart from the mean."""

from __future__ import annotations

import math

import pytest

from evalkit.study.steps import kendall_taus, ranking_movement


def test_a_constant_side_is_undefined_and_counted_apart(collection):
    pairs = sorted((a, b) for a, b in collection.pairs.items() if a < b)
    docs = [f"d{i}" for i in range(6)]
    run = {}
    for a, b in pairs:
        run[a] = {d: float(i) for i, d in enumerate(docs)}
        run[b] = dict(run[a])  # unchanged: tau 1
    reversed_pair, constant_pair = pairs[0], pairs[1]
    run[reversed_pair[1]] = {d: -v for d, v in run[reversed_pair[0]].items()}  # tau -1
    run[constant_pair[1]] = dict.fromkeys(docs, 0.5)  # one side constant: tau undefined
    taus = kendall_taus(run, collection)
    assert len(taus) == len(pairs) and sum(math.isnan(t) for t in taus) == 1
    mean, undefined = ranking_movement(run, collection)
    defined = len(pairs) - 1
    assert undefined == 1
    assert mean == pytest.approx(((defined - 1) * 1.0 - 1.0) / defined)  # not read as 1 ("nothing moved")
    everything = {q: dict.fromkeys(docs, 1.0) for q in run}
    assert ranking_movement(everything, collection)[1] == len(pairs) and math.isnan(ranking_movement(everything,
                                                                                                   collection)[0])
