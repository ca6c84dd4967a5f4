"""PromptrieverEncoder against an independent reference of the authors' encode path.

The authors' encoder is a tevatron fork (github orionw/tevatron, driver/encode.py) that
reads datasets from the hub, so it cannot run here; the reference below is written
from reading it: literal ``query:  ...`` / ``passage:  ...`` strings, the base tokenizer
truncating at max_len - 1, EOS appended, right padding to a multiple of 16 with
pad = EOS, the base model with the LoRA adapter through ``peft`` (left unmerged here,
merged in the kit), the hidden state at the last non-pad position, L2-normalised.
Models: a tiny random Llama (2 layers, 32 wide; the tokenizer adds BOS and has no pad
token, like Llama-2's) and a random LoRA on every projection with non-zero ``lora_B``.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from tiny_models import LM_SENTENCES, build_random_lora, build_tiny_llama

from evalkit.core.errors import KitError
from evalkit.encoders.promptriever import PromptrieverEncoder, format_passage, format_query

peft = pytest.importorskip("peft")
# peft 0.21 calls a transformers 5 API deprecated there; not this kit's concern.
pytestmark = pytest.mark.filterwarnings("ignore:`is_gradient_checkpointing` is deprecated:FutureWarning")

QUERIES = ["a method for parsing", "Does the candidate paper match?", "graph neural networks for text retrieval"]
PROMPTS = ["Find papers with the same method.", "", "Be careful."]
QUERY_STRINGS = ["query:  a method for parsing? Find papers with the same method.",
                 "query:  Does the candidate paper match?",
                 "query:  graph neural networks for text retrieval? Be careful."]
DOCS = ["Passage A: a method for parsing.", "Candidate paper: sentence embeddings with transformers.", "No"]
DOC_STRINGS = ["passage:  " + d for d in DOCS]






@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    root = tmp_path_factory.mktemp("tiny-promptriever")
    base = str(build_tiny_llama(root / "base"))
    return base, str(build_random_lora(base, root / "adapter"))


@pytest.fixture(scope="module")
def encoder(folders):
    base, adapter = folders
    return PromptrieverEncoder(adapter, base=base, batch_size=2)


def reference(base: str, adapter: str | None, strings, max_length: int = 512) -> np.ndarray:
    from transformers import AutoModel, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(base)
    eos = tokenizer.eos_token_id
    rows = [tokenizer(s, truncation=True, max_length=max_length - 1)["input_ids"] + [eos] for s in strings]
    width = -(-max(len(r) for r in rows) // 16) * 16
    ids = torch.tensor([r + [eos] * (width - len(r)) for r in rows])
    mask = torch.tensor([[1] * len(r) + [0] * (width - len(r)) for r in rows])
    model = AutoModel.from_pretrained(base)
    if adapter:
        model = peft.PeftModel.from_pretrained(model, adapter)  # not merged: an independent path
    with torch.no_grad():
        hidden = model.eval()(input_ids=ids, attention_mask=mask).last_hidden_state
    last = torch.tensor([len(r) - 1 for r in rows])
    return torch.nn.functional.normalize(hidden[torch.arange(len(rows)), last], dim=-1).numpy()


def test_query_and_passage_strings():
    assert [format_query(q, p) for q, p in zip(QUERIES, PROMPTS)] == QUERY_STRINGS
    assert format_query("what is x", "be precise") == "query:  what is x? be precise"
    for mark in ".?!":
        assert format_query(f"what is x{mark}", "be precise") == f"query:  what is x{mark} be precise"
    assert format_query('what is "x"', "be precise") == 'query:  what is "x"? be precise'
    assert format_query("  what is x  ", "  be precise ") == "query:  what is x? be precise"
    assert format_query("what is x", "") == format_query("what is x", "   ") == "query:  what is x"
    assert format_query(" what is x ") == "query:  what is x"
    assert format_passage("  some text ") == "passage:  some text"
    assert format_passage("some text", "A title") == "passage:  A title some text"
    assert format_passage("some text", "") == "passage:   some text"  # the authors' format_passage, empty title


def test_matches_reference(folders, encoder):
    base, adapter = folders
    np.testing.assert_allclose(encoder.encode_queries(QUERIES, PROMPTS), reference(base, adapter, QUERY_STRINGS),
                               atol=1e-5)
    np.testing.assert_allclose(encoder.encode_documents(DOCS), reference(base, adapter, DOC_STRINGS), atol=1e-5)
    titled = encoder.encode_documents(DOCS, titles=["T", "", "U"])
    expected = reference(base, adapter, [format_passage(d, t) for d, t in zip(DOCS, ["T", "", "U"])])
    np.testing.assert_allclose(titled, expected, atol=1e-5)
    short = PromptrieverEncoder(adapter, base=base, max_length=8, batch_size=3)
    np.testing.assert_allclose(short.encode_documents(DOCS), reference(base, adapter, DOC_STRINGS, 8), atol=1e-5)
    vectors = encoder.encode_documents(DOCS)
    assert vectors.dtype == np.float32 and vectors.shape == (3, 32)
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-6)


def test_lora_is_applied(folders, encoder):
    base, _ = folders
    assert np.abs(encoder.encode_documents(DOCS) - reference(base, None, DOC_STRINGS)).max() > 1e-3


def test_question_mark_rule_in_vectors(encoder):
    with_mark = encoder.encode_queries(["what is x?"], ["be precise"])
    np.testing.assert_array_equal(encoder.encode_queries(["what is x"], ["be precise"]), with_mark)
    no_prompt = encoder.encode_queries(["what is x", "what is x?"], ["", ""])
    assert np.abs(no_prompt[0] - no_prompt[1]).max() > 1e-4  # no prompt: no "?" added


def test_eos_appended_truncation_and_padding(encoder):
    tokenizer = encoder._load()[1]
    batch = encoder._tokenize(["passage:  a method for parsing", "No", "passage:  " + LM_SENTENCES[0]], 12)
    lengths = batch["attention_mask"].sum(dim=1).tolist()
    assert batch["input_ids"].shape[1] % 16 == 0 and tokenizer.padding_side == "right"
    assert lengths[2] == 12  # truncated to 11 tokens, then EOS
    for row, length, text in zip(batch["input_ids"].tolist(), lengths,
                                 ["passage:  a method for parsing", "No", "passage:  " + LM_SENTENCES[0]]):
        assert row[0] == tokenizer.bos_token_id and row[length - 1] == tokenizer.eos_token_id
        assert row[:length - 1] == tokenizer(text, truncation=True, max_length=11)["input_ids"]
        assert set(row[length:]) <= {tokenizer.eos_token_id}  # pad = EOS (the tokenizer has no pad token)


def test_base_read_from_adapter_config(folders, encoder):
    _, adapter = folders
    np.testing.assert_allclose(PromptrieverEncoder(adapter).encode_documents(DOCS), encoder.encode_documents(DOCS),
                               atol=1e-6)


def test_describe_and_load_failure(tmp_path, folders):
    base, adapter = folders
    described = PromptrieverEncoder(adapter, base=base).describe()
    assert described["location"] == adapter and described["base"] == base
    assert described["query_max_length"] == described["passage_max_length"] == 512
    assert described["doc_template"].startswith("passage:  {title} {text}")
    assert described["pooling"].startswith("last token")
    lengths = PromptrieverEncoder(adapter, max_length=64, passage_max_length=156).describe()
    assert lengths["query_max_length"] == 64 and lengths["passage_max_length"] == 156
    for encoder in (PromptrieverEncoder(str(tmp_path / "nowhere")),
                    PromptrieverEncoder(str(tmp_path / "nowhere"), base=base),
                    PromptrieverEncoder(adapter, base=str(tmp_path / "nobase"))):
        with pytest.raises(KitError) as err:
            encoder.encode_documents(["x"])
        assert "nowhere" in str(err.value) or "nobase" in str(err.value)
        assert "\n" not in str(err.value)


def test_registry_row_writes_passages_as_tevatron(folders, tmp_path, monkeypatch):
    """The paper profile's scorer: ``passage:  {title} {text}`` (three spaces for an empty title, as BEIR
    documents without one get), not the kit's title-and-body join."""
    from evalkit.data.collection import Document
    from evalkit.models.paper import build_promptriever

    monkeypatch.setenv("EVALKIT_CACHE", str(tmp_path / "cache"))
    base, adapter = folders
    scorer = build_promptriever({"model": str(adapter), "base": str(base), "device": "cpu"})
    docs = [Document("a", "", DOCS[0]), Document("b", "T", DOCS[1])]
    assert [scorer.document_string(d) for d in docs] == ["passage:   " + DOCS[0], "passage:  T " + DOCS[1]]
    np.testing.assert_allclose(scorer.doc_vectors(docs), reference(base, adapter, [scorer.document_string(d)
                                                                                    for d in docs]), atol=1e-5)
    with pytest.raises(KitError, match="drop doc_template"):
        build_promptriever({"model": str(adapter), "base": str(base), "doc_template": "{title}"})
