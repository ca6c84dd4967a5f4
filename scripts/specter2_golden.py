"""Golden Specter2 embeddings produced by the real `adapters` library, for tests/encoders/test_encoder_specter2.py.

The kit runs transformers 5.x; `adapters` pins transformers 4.57, so it cannot live in the
kit's venv. This script runs in a separate venv and writes, under tests/golden/specter2/:

- ``base/``: a tiny random BERT (2 layers, hidden 32, 512 positions) and its BERT WordPiece
  tokenizer (vocabulary trained here on a fixed word list), saved with ``save_pretrained``;
- ``adapter_proximity/``: a bottleneck adapter with the Specter2 proximity adapter's
  configuration, saved by ``model.save_adapter`` in AdapterHub format (``adapter_config.json``
  + ``pytorch_adapter.bin``). allenai/specter2 was trained by SciRepEval with
  ``model.add_adapter(task, config="pfeiffer")`` (adapter_fusion.py, renamed "seq_bn" in
  `adapters`), i.e. ``SeqBnConfig()``: reduction_factor 16, non_linearity "relu",
  original_ln_before True, original_ln_after True, residual_before_ln True,
  adapter_residual_before_ln False, ln_before False, ln_after False, mh_adapter False,
  output_adapter True, scaling 1.0, no gating, no PHM, no invertible adapter. The adapter is
  named "[PRX]" as in SciRepEval;
- ``adapter_variant/``: a second adapter (Houlsby-style double adapter with new layer norms,
  GELU, scaling 0.5, reduction 4, layer 1 left out), so the test also covers the other
  sequential bottleneck code paths;
- ``golden.json``: the papers, the versions used, and the [CLS] embeddings the real library
  gives with each adapter active (and with none), computed exactly as the allenai/specter2
  README does: ``AutoAdapterModel.from_pretrained(base)``,
  ``model.load_adapter(folder, load_as="proximity", set_active=True)``,
  text ``title + tokenizer.sep_token + (abstract or '')``,
  ``tokenizer(batch, padding=True, truncation=True, return_tensors="pt",
  return_token_type_ids=False, max_length=512)``, ``output.last_hidden_state[:, 0, :]``.

Adapter weights are re-drawn at a large scale (the library's BERT init is too close to the
identity for a test to tell a wrong adapter forward from a right one), as are the base
model's LayerNorm parameters (the Pfeiffer adapter reuses the output LayerNorm twice).

How the committed goldens were produced (2 CPU cores, no GPU)::

    python -m venv ../adapters-venv
    ../adapters-venv/bin/pip install torch==2.13.0      # CPU build, first
    ../adapters-venv/bin/pip install adapters            # pulled transformers 4.57.6
    ../adapters-venv/bin/python scripts/specter2_golden.py

Versions: adapters 1.3.0, transformers 4.57.6, tokenizers 0.22.2, torch 2.13.0+cpu,
numpy 2.4.6, Python 3 (written into golden.json too).
"""

from __future__ import annotations

import json
import platform
import shutil
from pathlib import Path

OUT = Path(__file__).resolve().parent.parent / "tests" / "golden" / "specter2"

WORDS = (
    "we propose a novel method for learning sentence embeddings with transformers and evaluate "
    "results on retrieval background motivation prior work problem question analysis data model "
    "experiments findings show improvements over baselines graph neural network corpus annotation "
    "scientific papers citation abstract title query document similarity faceted search adapters"
).split()

PAPERS = [
    {"title": "Graph neural networks for citation retrieval",
     "abstract": "We propose a novel method for learning document embeddings with transformers. "
                 "Experiments show improvements over baselines."},
    {"title": "Faceted query by example", "abstract": None},
    {"title": "A corpus of scientific abstracts",
     "abstract": " ".join(WORDS[i % len(WORDS)] for i in range(700))},  # truncated at 512 tokens
    {"title": "Sentence Embeddings, Adapters & Retrieval!",
     "abstract": "Prior work: analysis of data. Results on faceted search; citation graph findings."},
    {"title": "", "abstract": "Only an abstract here, the title is empty."},
]


def build_tokenizer(folder: Path):
    """A BERT WordPiece tokenizer (lower-casing, [CLS] x [SEP]) with a vocabulary trained on WORDS."""
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, trainers
    from transformers import BertTokenizerFast

    tok = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    trainer = trainers.WordPieceTrainer(vocab_size=300,
                                        special_tokens=["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"])
    tok.train_from_iterator([" ".join(WORDS)] * 5, trainer)
    folder.mkdir(parents=True, exist_ok=True)
    vocab = sorted(tok.get_vocab().items(), key=lambda kv: kv[1])
    (folder / "vocab.txt").write_text("".join(f"{t}\n" for t, _ in vocab), encoding="utf-8")
    fast = BertTokenizerFast(vocab_file=str(folder / "vocab.txt"), do_lower_case=True)
    fast.save_pretrained(folder)
    return fast


def embed(model, tokenizer, papers):
    import torch

    texts = [p["title"] + tokenizer.sep_token + (p.get("abstract") or "") for p in papers]
    inputs = tokenizer(texts, padding=True, truncation=True, return_tensors="pt",
                       return_token_type_ids=False, max_length=512)
    with torch.no_grad():
        output = model(**inputs)
    return output.last_hidden_state[:, 0, :].numpy()


def main() -> None:
    import adapters
    import numpy as np
    import tokenizers
    import torch
    import transformers
    from adapters import AutoAdapterModel, DoubleSeqBnConfig, SeqBnConfig
    from transformers import BertConfig, BertModel

    if OUT.exists():
        shutil.rmtree(OUT)
    base_dir = OUT / "base"
    tokenizer = build_tokenizer(base_dir)

    torch.manual_seed(0)
    config = BertConfig(vocab_size=len(tokenizer), hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=64, max_position_embeddings=512, initializer_range=0.2)
    base = BertModel(config)
    with torch.no_grad():  # non-trivial LayerNorms: the Pfeiffer adapter applies the output LN twice
        for name, param in base.named_parameters():
            if "LayerNorm.weight" in name:
                param.copy_(1.0 + 0.3 * torch.randn_like(param))
            elif "LayerNorm.bias" in name:
                param.copy_(0.3 * torch.randn_like(param))
    base.save_pretrained(base_dir)

    adapter_configs = {
        "proximity": ("[PRX]", SeqBnConfig()),
        "variant": ("variant", DoubleSeqBnConfig(reduction_factor=4, non_linearity="gelu", ln_before=True,
                                                 ln_after=True, adapter_residual_before_ln=True, scaling=0.5,
                                                 leave_out=[1])),
    }
    for key, (name, adapter_config) in adapter_configs.items():
        model = AutoAdapterModel.from_pretrained(base_dir)
        model.add_adapter(name, config=adapter_config)
        with torch.no_grad():
            for pname, param in model.named_parameters():
                if f"adapters.{name}." in pname:
                    if "norm" in pname and pname.endswith("weight"):
                        param.copy_(1.0 + 0.3 * torch.randn_like(param))
                    else:
                        param.copy_(0.5 * torch.randn_like(param))
        model.save_adapter(str(OUT / f"adapter_{key}"), name)

    golden = {
        "versions": {"adapters": adapters.__version__, "transformers": transformers.__version__,
                     "tokenizers": tokenizers.__version__, "torch": torch.__version__,
                     "numpy": np.__version__, "python": platform.python_version()},
        "papers": PAPERS,
        "embeddings": {},
    }
    model = AutoAdapterModel.from_pretrained(base_dir)
    model.eval()
    golden["embeddings"]["none"] = embed(model, tokenizer, PAPERS).tolist()
    for key in adapter_configs:
        # Exactly as the allenai/specter2 README: a fresh base model, then load_adapter(..., set_active=True).
        model = AutoAdapterModel.from_pretrained(base_dir)
        model.load_adapter(str(OUT / f"adapter_{key}"), load_as="proximity", set_active=True)
        model.eval()
        golden["embeddings"][key] = embed(model, tokenizer, PAPERS).tolist()
    (OUT / "golden.json").write_text(json.dumps(golden, indent=1) + "\n", encoding="utf-8")
    total = sum(p.stat().st_size for p in OUT.rglob("*") if p.is_file())
    print(f"wrote {OUT} ({total / 1024:.0f} KB)")
    for key, vectors in golden["embeddings"].items():
        print(key, np.round(np.asarray(vectors)[:, :4], 4).tolist())


if __name__ == "__main__":
    main()
