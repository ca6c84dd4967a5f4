"""Benchmark: the kit's per-query evaluation against ir_measures alone, on one synthetic run.

The run has 50 queries x 250 candidates on the real CSFCube judgments: each query's
judged pool (cut to 250 where larger) filled up to 250 with unjudged CSFCube papers,
scored with seeded random numbers. The kit computes NDCG@20, MAP, MRR, P@20, R@20 and
p-MRR per query (`evaluation.per_query`: the kit's tie rule, its own csfcube NDCG and
binary metrics, and pytrec_eval for the trec discount's NDCG), once per discount; the
baseline is ir_measures computing nDCG@20, AP and RR per query on the same run. Both report the best of
several repeats (time.perf_counter).

    .venv/bin/python bench/bench_evaluate.py [--repeats 7] [--seed 0]
"""

from __future__ import annotations

import argparse
import random
import time

import ir_measures

from evalkit import csfcube, evaluation
from evalkit.csfcube import RELEVANT_GRADE

CANDIDATES = 250


def synthetic_run(data: csfcube.CSFCube, seed: int) -> dict[str, dict[str, float]]:
    rng = random.Random(seed)
    corpus = list(data.papers)
    run = {}
    for qid, query in data.queries.items():
        docs = list(query.pool[:CANDIDATES])
        taken = set(docs) | {query.seed}
        while len(docs) < CANDIDATES:
            pid = rng.choice(corpus)
            if pid not in taken:
                taken.add(pid)
                docs.append(pid)
        run[qid] = {doc: rng.random() for doc in docs}
    return run


def best_of(repeats: int, work) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        work()
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    data = csfcube.load()
    run = synthetic_run(data, args.seed)
    qrels = data.qrels()
    assert len(run) == 50 and all(len(docs) == CANDIDATES for docs in run.values())

    measures = [ir_measures.nDCG @ 20, ir_measures.AP(rel=RELEVANT_GRADE), ir_measures.RR(rel=RELEVANT_GRADE)]

    def kit():
        return evaluation.per_query(data, run, 20, "csfcube")

    def kit_trec():
        return evaluation.per_query(data, run, 20, "trec")

    def library():
        return list(ir_measures.iter_calc(measures, qrels, run))

    kit(), library()  # warm up (imports, first evaluator)
    table = kit()
    assert len(table) == 50 and table["p-mrr"].notna().sum() > 0
    assert len(library()) == 3 * 50

    kit_s = best_of(args.repeats, kit)
    kit_trec_s = best_of(args.repeats, kit_trec)
    library_s = best_of(args.repeats, library)
    print(f"run: {len(run)} queries x {CANDIDATES} candidates, best of {args.repeats}")
    print(f"kit per_query, csfcube discount (NDCG@20, MAP, MRR, P@20, R@20, p-MRR): {kit_s * 1000:8.2f} ms")
    print(f"kit per_query, trec discount (NDCG@20 by pytrec_eval, same others):   {kit_trec_s * 1000:8.2f} ms")
    print(f"ir_measures alone (nDCG@20, AP, RR):                                  {library_s * 1000:8.2f} ms")
    print(f"ratio kit / ir_measures: {kit_s / library_s:.2f}x (csfcube), {kit_trec_s / library_s:.2f}x (trec)")


if __name__ == "__main__":
    main()
