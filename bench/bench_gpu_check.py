"""GPU check: what only a GPU machine can show, in a few minutes on one GPU and with no hub.

One JSON line per check (and, with --out, the list as one JSON file):

1. ``encoder``: every embedding model of the paper profile (SciNCL, Specter2, otAspire,
   GritLM-7B, E5-Mistral, Promptriever) on its tiny local stand-in (tests/tiny_models.py:
   `build_paper_stand_ins`, random weights, the same architectures and code paths), built
   through the registry on ``--device`` in the dtype the profile uses there
   (each family's declared ``gpu_dtype``, evalkit/models/families/: bfloat16 for GritLM and
   Promptriever, float32 for the BERT models), against float32 on the CPU: the largest score difference over CSFCube
   queries' pools and whether the rankings agree (identical orders, and the mean Kendall tau);
2. ``throughput``: a BERT-base-sized model (12 layers, 768 dims, random weights) encoding
   ``--texts`` (20,000) synthetic abstracts through the kit's SciNCL path (family paper-cls,
   [CLS] of title [SEP] abstract, the embedding cache) against bare transformers (the same
   tokenizer, batch size and max length, [CLS] under inference_mode): texts per second of each;
3. ``faiss``: exact inner-product search of ``--vectors`` random 768-dim vectors for 50
   queries (top 200) on the GPU (faiss's GPU build), against the CPU index: time and whether
   the ids agree; "skipped" with faiss-cpu;
4. ``search``: the kit's whole-corpus search (`evalkit.retrieval.vector_index.VectorIndex`) of the same
   ``--vectors`` for 50 queries (top 200) with its block stage in torch on ``--device``
   (`torch_hits`, full float32) against the numpy stage on the CPU: time of each and whether
   every ranking and score is identical (it must be: the shortlist is rescored on the CPU).

    .venv/bin/python bench/bench_gpu_check.py [--device cuda] [--texts 20000] [--vectors 800000] [--out FILE]

``--device cpu`` runs the same checks CPU against CPU (a smoke test of the script where no GPU
is; use small --texts and --vectors there).

On a GPU the throughput check's kit rate is written into the cost table the plan reads (the
``measured`` line of evalkit/config/costs.yaml, or ``--costs FILE``; ``--no-record`` to leave
it): the per-GPU rate of a BERT-base-sized model, with the card's name and the date, which
`evalkit plan` then uses and calls measured instead of the assumed estimate. Commit the file.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))  # the stand-ins live there
sys.path.insert(0, str(ROOT))

ENCODERS = ("scincl", "specter2", "otaspire", "gritlm-7b", "e5-mistral-instruct", "promptriever")
LOCATION_KEYS = ("model", "base", "adapter")
SEEDS = ("929877", "3264891")


def line(record: dict, out: list) -> None:
    out.append(record)
    print(json.dumps(record), flush=True)


def check_registry(stand_ins: dict[str, str], device: str) -> Path:
    """A registry of two entries per paper encoder: NAME@device (the profile's GPU dtype) and NAME@cpu."""
    import yaml

    from evalkit.models import registry

    paper = yaml.safe_load(registry.MODELS_FILE.read_text(encoding="utf-8"))["profiles"]["paper"]["models"]
    models = {}
    for name in ENCODERS:
        entry = {k: v for k, v in paper[name].items() if k not in ("first_stage", "depth")}
        for key in LOCATION_KEYS:
            if key in entry:
                entry[key] = stand_ins[entry[key]]
        family = entry["family"]
        for where in (device, "cpu"):
            placed = dict(entry)
            if family == "dense":
                placed["devices"] = [where]
            else:
                placed["device"] = where
            if family in ("gritlm", "promptriever"):
                placed["dtype"] = "float32" if where == "cpu" else registry.KIT[family].gpu_dtype
            models[f"{name}@{where}"] = placed
    path = Path(tempfile.mkdtemp(prefix="gpu-check-")) / "models.yaml"
    path.write_text(yaml.safe_dump({"profiles": {"check": {"first_stage": f"scincl@{device}", "depth": 200,
                                                           "models": models}}}))
    return path


def encoder_checks(device: str, out: list) -> None:
    import numpy as np
    from scipy import stats
    from tiny_models import build_paper_stand_ins

    from evalkit.data.runs import ranked
    from evalkit.datasets import csfcube
    from evalkit.models import registry

    stand_ins = build_paper_stand_ins(Path(tempfile.mkdtemp(prefix="stand-ins-")))
    os.environ["EVALKIT_MODELS"] = str(check_registry(stand_ins, device))
    collection = csfcube.load_collection()
    queries = [q for q in collection.queries.values() if q.seed is not None and q.seed.doc_id in SEEDS]
    for name in ENCODERS:
        start = time.perf_counter()
        scores = {}
        for where in (device, "cpu"):
            spec = registry.spec(f"{name}@{where}", "check")
            scorer = registry.build(spec, collection)
            candidates = {q.qid: collection.candidates_of(q.qid) for q in queries}
            scorer.prepare([d for docs in candidates.values() for d in docs])
            scores[where] = {q.qid: scorer.score(q, candidates[q.qid]) for q in queries}
        diffs, same, taus = [], 0, []
        for qid, gpu in scores[device].items():
            cpu = scores["cpu"][qid]
            docs = sorted(cpu)
            diffs.append(max(abs(gpu[d] - cpu[d]) for d in docs))
            same += ranked(gpu) == ranked(cpu)
            taus.append(stats.kendalltau([gpu[d] for d in docs], [cpu[d] for d in docs]).statistic)
        spec = registry.spec(f"{name}@{device}", "check")
        line({"check": "encoder", "model": name, "device": device,
              "dtype": spec.settings.get("dtype", "float32"), "queries": len(queries),
              "max_abs_score_diff": float(max(diffs)), "rankings_identical": f"{same}/{len(queries)}",
              "mean_kendall_tau": float(np.mean(taus)), "seconds": round(time.perf_counter() - start, 1)}, out)


def synthetic_papers(n: int, seed: int = 0) -> list[tuple[str, str]]:
    from tiny_models import WORDS

    rng = random.Random(seed)
    return [(" ".join(rng.choices(WORDS, k=10)),
             " ".join(" ".join(rng.choices(WORDS, k=rng.randint(12, 24))) + "." for _ in range(rng.randint(5, 9))))
            for _ in range(n)]


def build_bert_base(folder: Path) -> Path:
    """A BERT-base-sized model (12 x 768, random weights) with a locally trained WordPiece tokenizer."""
    import torch
    from tiny_models import WORDS
    from tokenizers import Tokenizer, normalizers, pre_tokenizers, trainers
    from tokenizers import models as tok_models
    from transformers import BertConfig, BertModel, PreTrainedTokenizerFast

    torch.manual_seed(0)
    tokenizer = Tokenizer(tok_models.WordPiece(unk_token="[UNK]"))
    tokenizer.normalizer = normalizers.BertNormalizer(lowercase=True)
    tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tokenizer.train_from_iterator([" ".join(WORDS)] * 5, trainers.WordPieceTrainer(
        vocab_size=300, special_tokens=["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]))
    fast = PreTrainedTokenizerFast(tokenizer_object=tokenizer, unk_token="[UNK]", pad_token="[PAD]",
                                   cls_token="[CLS]", sep_token="[SEP]", mask_token="[MASK]")
    BertModel(BertConfig(vocab_size=fast.vocab_size)).save_pretrained(folder)
    fast.save_pretrained(folder)
    return folder


def throughput_check(device: str, texts: int, out: list) -> dict:
    import numpy as np
    import torch
    from transformers import AutoModel, AutoTokenizer

    from evalkit.data.collection import Document
    from evalkit.encoders.bert_cls import cls_vectors
    from evalkit.models.paper import build_paper_cls

    folder = build_bert_base(Path(tempfile.mkdtemp(prefix="bert-base-")))
    papers = synthetic_papers(texts)
    docs = [Document(f"p{i}", title, abstract) for i, (title, abstract) in enumerate(papers)]
    batch, length = 16, 512  # the paper-cls family's defaults
    os.environ["EVALKIT_CACHE"] = tempfile.mkdtemp(prefix="gpu-check-cache-")
    kit = build_paper_cls({"model": str(folder), "device": device, "batch_size": batch, "max_length": length})
    start = time.perf_counter()
    kit_vectors = kit.doc_vectors(docs)
    kit_s = time.perf_counter() - start
    tokenizer = AutoTokenizer.from_pretrained(folder)
    model = AutoModel.from_pretrained(folder, dtype=torch.float32).to(device).eval()
    strings = [f"{title}{tokenizer.sep_token}{abstract}" for title, abstract in papers]
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    start = time.perf_counter()
    bare = cls_vectors(tokenizer, model, strings, length, batch, device)
    bare_s = time.perf_counter() - start
    line({"check": "throughput", "model": "BERT-base-sized (12 x 768, random)", "device": device, "texts": texts,
          "kit_texts_per_s": round(texts / kit_s, 1), "bare_texts_per_s": round(texts / bare_s, 1),
          "ratio": round(bare_s / kit_s, 3), "max_abs_vector_diff": float(np.abs(kit_vectors - bare).max())}, out)
    return out[-1]


def record_rate(found: dict, costs: Path | None, today: str | None = None) -> dict:
    """The throughput check's kit rate on a GPU written into the plan's cost table (costs.yaml's
    ``measured`` line, `evalkit.pipeline.plan.record_measured_rate`) as the per-GPU rate of a
    BERT-base-sized model (size class small), with the card's name and today's date."""
    import datetime

    import torch

    from evalkit.pipeline.plan import record_measured_rate

    card = torch.cuda.get_device_name(torch.device(found["device"]))
    today = today or datetime.date.today().isoformat()
    return record_measured_rate("gpu", "small", found["kit_texts_per_s"], card, today,
                                f"bench/bench_gpu_check.py throughput, {found['texts']} texts", costs)


def faiss_check(device: str, vectors: int, out: list) -> None:
    import faiss
    import numpy as np

    if not device.startswith("cuda") or not hasattr(faiss, "StandardGpuResources"):
        line({"check": "faiss", "device": device, "status": "skipped: " + (
            "faiss has no GPU support here (faiss-cpu)" if device.startswith("cuda") else "CPU run")}, out)
        return
    rng = np.random.default_rng(0)
    base = rng.standard_normal((vectors, 768), dtype=np.float32)
    queries = rng.standard_normal((50, 768), dtype=np.float32)
    cpu = faiss.IndexFlatIP(768)
    cpu.add(base)
    start = time.perf_counter()
    _, cpu_ids = cpu.search(queries, 200)
    cpu_s = time.perf_counter() - start
    gpu = faiss.index_cpu_to_gpu(faiss.StandardGpuResources(), 0, cpu)
    start = time.perf_counter()
    _, gpu_ids = gpu.search(queries, 200)
    gpu_s = time.perf_counter() - start
    line({"check": "faiss", "device": device, "vectors": vectors, "cpu_search_s": round(cpu_s, 3),
          "gpu_search_s": round(gpu_s, 3), "ids_agree": float((cpu_ids == gpu_ids).mean())}, out)


def search_check(device: str, vectors: int, out: list) -> None:
    import numpy as np

    from evalkit.data.collection import Document
    from evalkit.retrieval import exact_search, vector_index
    from evalkit.retrieval.corpus import Corpus
    from evalkit.retrieval.vector_index import VectorIndex

    rng = np.random.default_rng(1)
    base = rng.standard_normal((vectors, 768), dtype=np.float32)
    queries = rng.standard_normal((50, 768), dtype=np.float32)
    corpus = Corpus(f"random-{vectors}", lambda: (Document(f"d{i}", "", "") for i in range(vectors)), vectors,
                    f"random-{vectors}")
    index = VectorIndex.open(corpus, lambda docs: base[[int(d.doc_id[1:]) for d in docs]], {"check": "search"})
    similarity = lambda q, rows: np.einsum("ij,j->i", rows, q)  # noqa: E731  (BiEncoder.similarity)
    nothing = [None] * len(queries)
    original = vector_index.block_hits  # looked up there by the search
    stages = {"numpy": lambda _device, *args: original("cpu", *args),  # each stage's block stage, whatever is visible
              device: lambda _device, *args: exact_search.torch_hits(device, *args)}
    times, found = {}, {}
    for stage, hits in stages.items():
        vector_index.block_hits = hits
        try:
            index.search(queries[:2], 200, nothing[:2], "cosine", similarity)  # warm-up (CUDA context)
            start = time.perf_counter()
            found[stage] = index.search(queries, 200, nothing, "cosine", similarity)
            times[stage] = time.perf_counter() - start
        finally:
            vector_index.block_hits = original
    line({"check": "search", "device": device, "vectors": vectors, "queries": len(queries), "k": 200,
          "numpy_cpu_search_s": round(times["numpy"], 3), "torch_stage_search_s": round(times[device], 3),
          "identical": found["numpy"] == found[device]}, out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cuda", help="cuda (default) or cpu (a smoke test of the script)")
    parser.add_argument("--texts", type=int, default=20_000, help="synthetic abstracts for the throughput check")
    parser.add_argument("--vectors", type=int, default=800_000, help="vectors for the FAISS and search checks")
    parser.add_argument("--checks", default="encoder,throughput,faiss,search", help="comma-separated subset")
    parser.add_argument("--out", type=Path, help="also write the records as one JSON list")
    parser.add_argument("--costs", type=Path, help="the cost table a GPU's measured rate is written into (default: "
                        "the plan's, evalkit/config/costs.yaml)")
    parser.add_argument("--no-record", action="store_true", help="do not write the measured rate into the cost table")
    args = parser.parse_args(argv)
    import torch

    if args.device.startswith("cuda") and not torch.cuda.is_available():
        print("bench_gpu_check: no CUDA GPU visible; run on a GPU machine or pass --device cpu", file=sys.stderr)
        return 2
    os.environ.setdefault("EVALKIT_PROGRESS", "off")
    os.environ["EVALKIT_CACHE"] = tempfile.mkdtemp(prefix="gpu-check-cache-")
    out: list = []
    chosen = {c.strip() for c in args.checks.split(",") if c.strip()}
    if "encoder" in chosen:
        encoder_checks(args.device, out)
    if "throughput" in chosen:
        found = throughput_check(args.device, args.texts, out)
        if args.device.startswith("cuda") and not args.no_record:
            measured = record_rate(found, args.costs)
            print(f"bench_gpu_check: recorded in the cost table: {json.dumps(measured)}", file=sys.stderr)
    if "faiss" in chosen:
        faiss_check(args.device, args.vectors, out)
    if "search" in chosen:
        search_check(args.device, args.vectors, out)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(out, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
