"""What llm-rankers' way of running PRP changes against the paper profile's, on a stand-in judge.

The paper profile's PRP rows (template ``prp-qin``, the transformers backend's default answer
reading: P(" A") against P(" B") after "Passage", budgets 1,024 tokens) differ from
ielab/llm-rankers' `PairwiseLlmRanker` (run.py defaults at commit b36517bf: ``--passage_length
128``, ``--query_length 128``; the Llama branch appends " Passage:" and reads one greedy token)
in the answer reading and the truncation. The sort itself (heapsort, the top k, first-stage
order below k, the disagreement rule) is the same (tests/llm/test_llm_rankers_heapsort.py).

This benchmark runs PRP heapsort over BM25's top ``--depth`` of the 50 CSFCube queries (pool
protocol, base instructions) with a stand-in judge, the tiny random chat Llama of
tests/tiny_models.py with its output head tilted towards "A" and "B" along a direction of the
answer position's hidden state that varies with the text (as tests/llm/test_llm_answer_reading.py does), under:

- ``paper``: template prp-qin, answer labels, budgets {instruction 64, seed 1024, candidate 1024};
- ``paper-128``: the same, seed and candidates cut to 128 tokens (the truncation alone);
- ``llm-rankers``: template prp-qin-llmrankers, answer greedy, seed and candidates cut to 128
  tokens (the instruction keeps 64; llm-rankers cuts the whole query, instruction and seed
  together, to 128).

and prints NDCG_csfcube@20 and p-MRR (x100, the CSFCube aggregate) of each, BM25's alongside.
A random judge says nothing of a real model's figures: the differences show how much the
choice can move a row, not which way it moves a real one.

Usage: ``python bench/bench_prp_reading.py [--depth 6] [--k 3] [--out FILE]`` (8 min 54 s
on two busy cores at the defaults, most of it the 1,024-token prompts; judgments go to a temporary cache).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import sys
import tempfile
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))  # the tiny stand-in lives there
sys.path.insert(0, str(ROOT))

from common import emit  # noqa: E402

SETTINGS = {
    "paper": {"template": "prp-qin", "budgets": {"instruction": 64, "seed": 1024, "candidate": 1024}},
    "paper-128": {"template": "prp-qin", "budgets": {"instruction": 64, "seed": 128, "candidate": 128}},
    "llm-rankers": {"template": "prp-qin-llmrankers", "answer": "greedy",
                    "budgets": {"instruction": 64, "seed": 128, "candidate": 128}},
}


def tilted_lm(folder: Path, texts: list[str]) -> Path:
    """The tiny chat Llama, its head tilted towards "A" and "B" along a text-dependent direction (the
    tests' `tiny_models.tilt_towards_a_and_b`)."""
    from tiny_models import build_tiny_lm, tilt_towards_a_and_b

    tilt_towards_a_and_b(build_tiny_lm(folder), lambda tokenizer: texts)
    return folder


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--depth", type=int, default=6)
    parser.add_argument("--k", type=int, default=3)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()

    from evalkit import cli
    from evalkit.datasets import csfcube

    data = csfcube.load()
    papers = list(data.papers.values())[:24]
    texts = [f'Passage A: "{a.text[:300]}" Passage B: "{b.text[:300]}" Output Passage A or Passage B: Passage:'
             for a, b in zip(papers, papers[1:])]
    report = {"depth": args.depth, "k": args.k, "settings": SETTINGS, "figures": {}}
    with tempfile.TemporaryDirectory() as scratch:
        scratch = Path(scratch)
        lm = tilted_lm(scratch / "lm", texts)
        models = {"bm25": {"family": "bm25", "label": "BM25", "role": "agnostic"}}
        for name, extra in SETTINGS.items():
            models[name] = {"family": "llm", "model": str(lm), "method": "prp", "variant": "heapsort",
                            "k": args.k, "depth": args.depth, "disagreement": "incumbent",
                            "first_stage": "bm25", "cache": str(scratch / "judgments.sqlite"),
                            "label": f"stand-in PRP ({name})", "role": "reranker", **extra}
        registry = scratch / "models.yaml"
        registry.write_text(yaml.safe_dump({"profiles": {"stand-in": {
            "first_stage": "bm25", "depth": args.depth,
            "study": {"reference": "bm25"}, "models": models}}}))
        os.environ["EVALKIT_MODELS"] = str(registry)
        os.environ["EVALKIT_CACHE"] = str(scratch / "cache")
        for name in models:
            runs_dir = scratch / "runs"
            if cli.main(["run", "--dataset", "csfcube", "--profile", "stand-in", "--model", name,
                         "--runs-dir", str(runs_dir)]) != 0:
                raise SystemExit(f"run {name} failed")
            folder = next(p.parent for p in runs_dir.rglob("run.trec") if p.parent.name == name)
            out = io.StringIO()
            with contextlib.redirect_stdout(out):
                cli.main(["evaluate", "--dataset", "csfcube", "--runs", str(folder), "--json"])
            summary = json.loads(out.getvalue())
            report["figures"][name] = {m: round(100 * summary[m]["all"], 2)
                                       for m in ("nDCG_csfcube@20", "p-MRR")}
            print(name, report["figures"][name], file=sys.stderr)
    emit(report, args.out)


if __name__ == "__main__":
    main()
