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


def word_piece_vocab() -> dict[str, int]:
    """A fixed WordPiece vocabulary: the special tokens, every character of WORDS alone and as a
    continuation (``##c``), then the words. Written out rather than trained: the WordPiece trainer
    breaks equal pair counts in a different order each run, so a trained vocabulary (and every
    score the tiny model gives) changed from one test run to the next."""
    chars = sorted({c for word in WORDS for c in word})
    tokens = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *chars, *(f"##{c}" for c in chars), *sorted(set(WORDS))]
    return {token: i for i, token in enumerate(dict.fromkeys(tokens))}


def build_sentence_transformer(folder: Path, max_seq_length: int = 64) -> Path:
    """A 2-layer, 32-dim BERT with mean pooling and normalisation, saved as a sentence-transformers folder.

    `max_seq_length` above 64 (e.g. 1024) lets it read a whole CSFCube query, instruction included."""
    import torch
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Normalize, Pooling, Transformer
    from tokenizers import Tokenizer, normalizers, pre_tokenizers
    from tokenizers import models as tok_models
    from transformers import BertConfig, BertModel, PreTrainedTokenizerFast

    torch.manual_seed(0)
    tokenizer = Tokenizer(tok_models.WordPiece(vocab=word_piece_vocab(), unk_token="[UNK]"))
    tokenizer.normalizer = normalizers.BertNormalizer(lowercase=True)
    tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    fast = PreTrainedTokenizerFast(tokenizer_object=tokenizer, unk_token="[UNK]", pad_token="[PAD]",
                                   cls_token="[CLS]", sep_token="[SEP]", mask_token="[MASK]")
    hf_dir = folder / "hf"
    config = BertConfig(vocab_size=fast.vocab_size, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=64, max_position_embeddings=max(128, max_seq_length))
    BertModel(config).save_pretrained(hf_dir)
    fast.save_pretrained(hf_dir)
    transformer = Transformer(str(hf_dir), max_seq_length=max_seq_length)
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


def tilt_towards_a_and_b(folder, texts_of):
    """Tilt the tiny Llama saved in `folder` towards the tokens reading "A" and "B", along a
    direction of the last position's hidden state that varies with the texts ``texts_of(tokenizer)``
    (orthogonal to their mean), so that some comparisons read A and others B; saved in place.
    Returns (tokenizer, model)."""
    import torch
    from transformers import AutoTokenizer, LlamaForCausalLM

    tokenizer = AutoTokenizer.from_pretrained(folder)
    model = LlamaForCausalLM.from_pretrained(folder)
    letters = {c: next(t for t in range(len(tokenizer)) if tokenizer.decode([t]).strip().upper() == c) for c in "AB"}
    with torch.no_grad():
        states = torch.stack([model.model(tokenizer([text], return_tensors="pt").input_ids).last_hidden_state[0, -1]
                              for text in texts_of(tokenizer)])
        mean = states.mean(dim=0)
        direction = states[0] - mean
        direction -= (direction @ mean) / (mean @ mean) * mean
        model.lm_head.weight.mul_(0.01)
        model.lm_head.weight[letters["A"]] = 1e3 * direction / direction.norm()
        model.lm_head.weight[letters["B"]] = -1e3 * direction / direction.norm()
    model.save_pretrained(folder)
    return tokenizer, model


GOLDEN = Path(__file__).parent / "golden" / "specter2"


def build_e5_stand_in(mistral: Path, folder: Path) -> Path:
    """A sentence-transformers folder over a tiny Mistral with last-token pooling (E5-Mistral's)."""
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Normalize, Pooling, Transformer
    from transformers import AutoTokenizer

    hf = folder / "hf"
    tokenizer = AutoTokenizer.from_pretrained(mistral)
    tokenizer.pad_token = tokenizer.eos_token
    tokenizer.save_pretrained(hf)
    from transformers import AutoModel

    AutoModel.from_pretrained(mistral).save_pretrained(hf)
    transformer = Transformer(str(hf), max_seq_length=128)
    pooling = Pooling(transformer.get_embedding_dimension(), pooling_mode="lasttoken")
    out = folder / "st"
    SentenceTransformer(modules=[transformer, pooling, Normalize()], device="cpu").save(str(out))
    return out


def build_paper_stand_ins(root: Path) -> dict[str, str]:
    """Hub id -> a tiny local stand-in of the same architecture, for every location the paper
    profile names (tests/models/test_paper_profile.py, bench/bench_gpu_check.py)."""
    mistral = build_tiny_mistral(root / "gritlm")
    llama = build_tiny_llama(root / "llama-base")
    lora = build_random_lora(str(llama), root / "promptriever-lora")
    bert = build_tiny_bert(root / "bert")
    chat = build_tiny_lm(root / "chat-llama")
    e5 = build_e5_stand_in(Path(mistral), root / "e5")
    return {
        "GritLM/GritLM-7B": str(mistral),
        "intfloat/e5-mistral-7b-instruct": str(e5),
        "samaya-ai/promptriever-llama2-7b-v1": str(lora),
        "meta-llama/Llama-2-7b-hf": str(llama),
        "malteos/scincl": str(bert),
        "allenai/specter": str(bert),
        "allenai/aspire-contextualsentence-multim-compsci": str(bert),
        "allenai/specter2_base": str(GOLDEN / "base"),
        "allenai/specter2": str(GOLDEN / "adapter_proximity"),
        "mistralai/Mistral-7B-Instruct-v0.2": str(chat),
        "meta-llama/Meta-Llama-3-8B-Instruct": str(chat),
    }


def build_tiny_llama(folder):
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import LlamaConfig, LlamaModel, PreTrainedTokenizerFast

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=400, special_tokens=["<unk>", "<s>", "</s>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tokenizer.train_from_iterator(LM_SENTENCES * 20, trainer)
    tokenizer.post_processor = processors.TemplateProcessing(single="<s> $A", pair="<s> $A <s> $B",
                                                             special_tokens=[("<s>", 1)])
    fast = PreTrainedTokenizerFast(tokenizer_object=tokenizer, bos_token="<s>", eos_token="</s>", unk_token="<unk>")
    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=len(fast), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=1024,
                         bos_token_id=1, eos_token_id=2, pad_token_id=None)
    LlamaModel(config).save_pretrained(folder)
    fast.save_pretrained(folder)
    return folder


def build_random_lora(base_folder, folder):
    import peft  # an optional library: only the Promptriever tests need it (they skip without it)
    import torch
    from transformers import AutoModel

    base = AutoModel.from_pretrained(base_folder)
    projections = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
    config = peft.LoraConfig(r=4, lora_alpha=8, lora_dropout=0.0, target_modules=projections)
    model = peft.get_peft_model(base, config)
    torch.manual_seed(1)
    for name, parameter in model.named_parameters():
        if "lora_B" in name:
            torch.nn.init.normal_(parameter, std=0.3)
    model.save_pretrained(folder)
    return folder


def build_tiny_mistral(folder):
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import MistralConfig, MistralForCausalLM, PreTrainedTokenizerFast

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=400, special_tokens=["<unk>", "<s>", "</s>", "<|user|>", "<|embed|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tokenizer.train_from_iterator(LM_SENTENCES * 20, trainer)
    tokenizer.post_processor = processors.TemplateProcessing(single="<s> $A", pair="<s> $A <s> $B",
                                                             special_tokens=[("<s>", 1)])
    fast = PreTrainedTokenizerFast(tokenizer_object=tokenizer, bos_token="<s>", eos_token="</s>", unk_token="<unk>",
                                   additional_special_tokens=["<|user|>", "<|embed|>"])
    torch.manual_seed(0)
    config = MistralConfig(vocab_size=len(fast), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                           num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=1024,
                           bos_token_id=1, eos_token_id=2)
    MistralForCausalLM(config).save_pretrained(folder)
    fast.save_pretrained(folder)
    return folder


def build_tiny_bert(folder: Path) -> Path:
    """A 2-layer, 32-wide random BERT (512 positions) with a lower-casing BERT WordPiece tokenizer."""
    import torch
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, trainers
    from transformers import BertConfig, BertModel, BertTokenizer

    tok = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    trainer = trainers.WordPieceTrainer(vocab_size=250,
                                        special_tokens=["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"])
    tok.train_from_iterator([" ".join(WORDS)] * 5, trainer)
    folder.mkdir(parents=True, exist_ok=True)
    tokenizer = BertTokenizer(vocab=dict(tok.get_vocab()), do_lower_case=True)
    tokenizer.save_pretrained(folder)
    torch.manual_seed(0)
    config = BertConfig(vocab_size=len(tokenizer), hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=64, max_position_embeddings=512, initializer_range=0.2)
    BertModel(config).save_pretrained(folder)
    return folder
