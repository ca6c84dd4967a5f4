"""Benchmark: `evalkit.evaluation.measures` (ir_measures for every measure) against the kit's own code.

Decides which measures go through ir_measures and which through the kit's own code: the
kit keeps ir_measures (one evaluator, less code) unless its own code is clearly faster.

The run has 50 queries x 250 candidates on the real CSFCube judgments: each query's judged
pool (cut to 250 where larger) filled up to 250 with unjudged CSFCube papers, scored with
seeded random numbers. Timed, best of several repeats (time.perf_counter):

- ``measures.judged_values`` with all six measures (nDCG@20, AP, RR, P@20, R@20, nDCG_csfcube@20);
- the binary measures (AP, RR, P@20, R@20): their marginal cost inside the one
  ir_measures call (nDCG@20 + the four, minus nDCG@20 alone) versus a pure-Python
  implementation on the kit's ranking (`own_binary`);
- nDCG_csfcube@20 through `measures.judged_values` (the ir_measures custom measure) versus a
  direct loop over the kit's ranking (`own_csfcube`);
- ``measures.p_mrr`` over CSFCube's 32 pairs;
- for scale, ir_measures alone on the raw run (no tie rule) for the five standard measures.

    .venv/bin/python bench/bench_evaluate.py [--repeats 7] [--seed 0]
"""

from __future__ import annotations

import argparse
import random
import time

import ir_measures

from evalkit.data.runs import ranked
from evalkit.datasets import csfcube
from evalkit.evaluation import measures

CANDIDATES = 250
STANDARD = ["nDCG@20", "AP", "RR", "P@20", "R@20"]
BINARY = ["AP", "RR", "P@20", "R@20"]
CSFCUBE = ["nDCG_csfcube@20"]


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


def own_binary(qrels, run, level: int, k: int) -> dict[str, dict[str, float]]:
    """AP, RR, P@k, R@k under trec_eval's conventions, in Python on the kit's ranking."""
    out = {}
    for qid, scores in run.items():
        relevant = {d for d, g in qrels[qid].items() if g >= level}
        positions = [r for r, d in enumerate(ranked(scores), start=1) if d in relevant]
        total, top = len(relevant), sum(1 for r in positions if r <= k)
        out[qid] = {
            "AP": sum(h / r for h, r in enumerate(positions, start=1)) / total if total else 0.0,
            "RR": 1.0 / positions[0] if positions else 0.0,
            f"P@{k}": top / k,
            f"R@{k}": top / total if total else 0.0,
        }
    return out


def own_csfcube(qrels, run, k: int) -> dict[str, float]:
    """nDCG_csfcube@k in a direct loop over the kit's ranking."""
    return {qid: measures.ndcg_csfcube([qrels[qid].get(d, 0) for d in ranked(scores)], k)
            for qid, scores in run.items()}


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
    collection = csfcube.to_collection(data)
    run = synthetic_run(data, args.seed)
    qrels, level = collection.qrels, collection.relevance_level
    assert len(run) == 50 and all(len(docs) == CANDIDATES for docs in run.values())

    # the two implementations agree before they are timed
    library, own = measures.judged_values(qrels, run, BINARY, level), own_binary(qrels, run, level, 20)
    for qid in run:
        for name in BINARY:
            assert abs(library.loc[qid, name] - own[qid][name]) < 1e-12, (qid, name)
    custom, direct = measures.judged_values(qrels, run, CSFCUBE, level), own_csfcube(qrels, run, 20)
    assert all(abs(custom.loc[q, CSFCUBE[0]] - direct[q]) < 1e-12 for q in run)

    raw_measures = [measures.parse_measure(name, level) for name in STANDARD]
    cases = [
        ("measures.judged_values, all six measures (ir_measures)",
         lambda: measures.judged_values(qrels, run, STANDARD + CSFCUBE, level)),
        ("measures.judged_values, nDCG@20 only", lambda: measures.judged_values(qrels, run, ["nDCG@20"], level)),
        ("measures.judged_values, nDCG@20 + AP, RR, P@20, R@20",
         lambda: measures.judged_values(qrels, run, STANDARD, level)),
        ("binary AP, RR, P@20, R@20: own Python code", lambda: own_binary(qrels, run, level, 20)),
        ("measures.judged_values, nDCG_csfcube@20 only (custom measure)",
         lambda: measures.judged_values(qrels, run, CSFCUBE, level)),
        ("nDCG_csfcube@20: own direct loop", lambda: own_csfcube(qrels, run, 20)),
        ("measures.p_mrr, 32 pairs", lambda: measures.p_mrr(qrels, run, collection.pairs, level)),
        ("ir_measures alone, raw run, 5 standard measures",
         lambda: list(ir_measures.iter_calc(raw_measures, qrels, run))),
    ]
    for _, work in cases:
        work()  # warm up (imports, first evaluator)
    print(f"run: {len(run)} queries x {CANDIDATES} candidates, best of {args.repeats}")
    for label, work in cases:
        print(f"{label:<60} {best_of(args.repeats, work) * 1000:8.2f} ms")


if __name__ == "__main__":
    main()
