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
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Normalize, Pooling, Transformer
    from tokenizers import Tokenizer, normalizers, pre_tokenizers, trainers
    from tokenizers import models as tok_models
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
    transformer = Transformer(str(hf_dir), max_seq_length=64)
    pooling = Pooling(transformer.get_embedding_dimension(), pooling_mode="mean")
    model = SentenceTransformer(modules=[transformer, pooling, Normalize()], device="cpu")
    out = folder / "tiny-st"
    model.save(str(out))
    return out


LM_SENTENCES = [
    "Given a query, which of the following two passages is more relevant to the query?",
    "Instruction: find papers with the same method. Seed paper: graph neural networks for text.",
    "Passage A: a method for parsing. Passage B: a result on retrieval. Output Passage A or Passage B:",
    "Passage A Passage B Passage A Passage B Yes No Yes No answer Yes or No.",
    "Candidate paper: sentence embeddings with transformers. Does the candidate paper match?",
]
CHAT = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
        "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")


def build_tiny_lm(folder, chat: bool = True):
    """A 2-layer, 32-wide Llama with a byte-level BPE tokenizer, saved as a transformers folder."""
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    specials = ["<pad>", "<s>", "</s>", "<|im_start|>", "<|im_end|>"]
    trainer = trainers.BpeTrainer(vocab_size=400, special_tokens=specials,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tokenizer.train_from_iterator(LM_SENTENCES * 20, trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tokenizer, pad_token="<pad>", bos_token="<s>", eos_token="</s>")
    if chat:
        fast.chat_template = CHAT
    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=len(fast), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=1024,
                         pad_token_id=0, bos_token_id=1, eos_token_id=2)
    LlamaForCausalLM(config).save_pretrained(folder)
    fast.save_pretrained(folder)
    return folder
