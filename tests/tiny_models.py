"""Tiny models built locally (random weights, locally trained tokenizer) for tests.

They load through the same code paths as the real models: a sentence-transformers
folder for the embedding families.
"""

from __future__ import annotations

from pathlib import Path

WORDS = (
    "we propose a novel method for learning sentence embeddings with transformers and evaluate "
    "results on retrieval background motivation prior work problem question analysis data model "
    "experiments findings show improvements over baselines graph neural network corpus annotation"
).split()


def build_sentence_transformer(folder: Path) -> Path:
    """A 2-layer, 32-dim BERT with mean pooling and normalisation, saved as a sentence-transformers folder."""
    import torch
    from sentence_transformers import SentenceTransformer, models
    from tokenizers import Tokenizer, models as tok_models, normalizers, pre_tokenizers, trainers
    from transformers import BertConfig, BertModel, PreTrainedTokenizerFast

    torch.manual_seed(0)
    tokenizer = Tokenizer(tok_models.WordPiece(unk_token="[UNK]"))
    tokenizer.normalizer = normalizers.BertNormalizer(lowercase=True)
    tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    trainer = trainers.WordPieceTrainer(vocab_size=200, special_tokens=["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"])
    tokenizer.train_from_iterator([" ".join(WORDS)] * 5, trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tokenizer, unk_token="[UNK]", pad_token="[PAD]",
                                   cls_token="[CLS]", sep_token="[SEP]", mask_token="[MASK]")
    hf_dir = folder / "hf"
    config = BertConfig(vocab_size=fast.vocab_size, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=64, max_position_embeddings=128)
    BertModel(config).save_pretrained(hf_dir)
    fast.save_pretrained(hf_dir)
    transformer = models.Transformer(str(hf_dir), max_seq_length=64)
    pooling = models.Pooling(transformer.get_embedding_dimension(), pooling_mode="mean")
    model = SentenceTransformer(modules=[transformer, pooling, models.Normalize()], device="cpu")
    out = folder / "tiny-st"
    model.save(str(out))
    return out
