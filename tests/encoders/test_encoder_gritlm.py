"""GritLMEncoder against the authors' `gritlm` package and an independent manual reference.

References, both on a tiny random Mistral built here (2 layers, 32 wide, locally trained
byte-level BPE with ``<s>``, ``</s>``, ``<|user|>``, ``<|embed|>``; the tokenizer adds BOS
like Mistral's and has no pad token, like GritLM-7B's):

- the package itself (PyPI ``gritlm`` 1.0.2, installed with ``--no-deps``): ``GritLM(folder)``
  as in the README, ``encode(texts, instruction=gritlm_instruction(...))``. With
  transformers 5 its ``is_causal=False`` forward argument is honoured by stock Mistral
  (it overrides ``config.is_causal`` for the call), so the package runs unmodified;
- an independent forward written from the authors' description: eager attention with an
  explicit all-visible 4D mask on one unpadded text at a time, mean over the positions
  after the separately tokenised instruction (BOS included), L2 normalisation.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from tiny_models import build_tiny_mistral

from evalkit.core.errors import KitError
from evalkit.encoders.gritlm import EMBED, USER, GritLMEncoder, instruction_prefix

QUERIES = ["a method for parsing", "graph neural networks for text retrieval with more words", "Yes"]
DOCS = ["Passage A: a method for parsing.", "Candidate paper: sentence embeddings with transformers.", "No"]
INSTRUCTIONS = ["find papers with the same method", "", "find papers with the same method"]


def gritlm_instruction(instruction: str) -> str:
    """The README's helper for the package's `instruction` argument."""
    return "<|user|>\n" + instruction + "\n<|embed|>\n" if instruction else "<|embed|>\n"




@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return str(build_tiny_mistral(tmp_path_factory.mktemp("tiny-gritlm")))


@pytest.fixture(scope="module")
def encoder(folder):
    return GritLMEncoder(folder, batch_size=2)


def manual_reference(folder, prefix: str, texts, max_length: int = 512) -> np.ndarray:
    from transformers import AutoModel, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(folder)
    model = AutoModel.from_pretrained(folder, attn_implementation="eager").eval()
    n_prefix = len(tokenizer(prefix, truncation=True, max_length=max_length)["input_ids"])
    rows = []
    for text in texts:
        ids = tokenizer(prefix + text, truncation=True, max_length=max_length, return_tensors="pt")["input_ids"]
        visible = torch.zeros(1, 1, ids.shape[1], ids.shape[1])  # additive mask: every token sees every token
        with torch.no_grad():
            hidden = model(input_ids=ids, attention_mask=visible).last_hidden_state[0]
        rows.append(torch.nn.functional.normalize(hidden[n_prefix:].mean(dim=0), dim=-1).numpy())
    return np.stack(rows)


def test_template_strings():
    assert GritLMEncoder.query_string("q", "find x") == "<|user|>\nfind x\n<|embed|>\nq"
    assert GritLMEncoder.query_string("q", "") == "<|embed|>\nq"
    assert GritLMEncoder.query_string("q", "  ") == "<|user|>\n  \n<|embed|>\nq"  # kept, as the README's helper
    assert GritLMEncoder.document_string("d") == "<|embed|>\nd"
    assert instruction_prefix("find x") == gritlm_instruction("find x")
    assert instruction_prefix("") == gritlm_instruction("") == EMBED
    assert instruction_prefix("  ") == gritlm_instruction("  ") == "<|user|>\n  \n<|embed|>\n"
    assert USER == "<|user|>\n"


def test_matches_gritlm_package(folder, encoder):
    gritlm = pytest.importorskip("gritlm")
    reference = gritlm.GritLM(folder, device="cpu")  # README defaults: mean pooling, normalised, bbcc attention
    assert reference.tokenizer.padding_side == "right" and reference.tokenizer.pad_token == "</s>"
    expected = np.zeros((len(QUERIES), 32), dtype=np.float32)
    for instruction in set(INSTRUCTIONS):
        rows = [i for i, x in enumerate(INSTRUCTIONS) if x == instruction]
        expected[rows] = reference.encode([QUERIES[i] for i in rows], instruction=gritlm_instruction(instruction))
    np.testing.assert_allclose(encoder.encode_queries(QUERIES, INSTRUCTIONS), expected, atol=1e-5)
    docs = reference.encode(DOCS, instruction=gritlm_instruction(""), batch_size=3)
    np.testing.assert_allclose(encoder.encode_documents(DOCS), docs, atol=1e-5)
    short = GritLMEncoder(folder, max_length=12, batch_size=3)
    np.testing.assert_allclose(short.encode_documents(DOCS),
                               reference.encode(DOCS, instruction=gritlm_instruction(""), max_length=12), atol=1e-5)


def test_matches_independent_reference(folder, encoder):
    for instruction in ("find papers with the same method", ""):
        expected = manual_reference(folder, gritlm_instruction(instruction), QUERIES)
        np.testing.assert_allclose(encoder.encode_queries(QUERIES, [instruction] * 3), expected, atol=1e-5)
    np.testing.assert_allclose(encoder.encode_documents(DOCS), manual_reference(folder, EMBED, DOCS), atol=1e-5)


def test_instruction_tokens_excluded_from_pool(encoder):
    prefix = instruction_prefix("find papers with the same method")
    tokenizer = encoder._load()[1]
    prefix_ids = tokenizer(prefix)["input_ids"]
    full_ids = tokenizer(prefix + QUERIES[0])["input_ids"]
    assert prefix_ids[0] == tokenizer.bos_token_id and full_ids[:len(prefix_ids)] == prefix_ids
    hidden, mask = encoder._forward(prefix, [QUERIES[0]])
    n = len(prefix_ids)
    assert mask[0, :n].sum() == 0 and mask[0, n:].sum() == len(full_ids) - n
    vector = encoder.encode_queries([QUERIES[0]], ["find papers with the same method"])[0]
    text_mean = torch.nn.functional.normalize(hidden[0, n:].mean(dim=0), dim=-1).numpy()
    all_mean = torch.nn.functional.normalize(hidden[0].mean(dim=0), dim=-1).numpy()
    np.testing.assert_allclose(vector, text_mean, atol=1e-6)
    assert np.abs(vector - all_mean).max() > 1e-3
    # Another instruction changes the vector only through attention: same text positions pooled.
    other_prefix = instruction_prefix("a different instruction")
    other_hidden, other_mask = encoder._forward(other_prefix, [QUERIES[0]])
    assert other_mask.sum() == mask.sum()
    other = encoder.encode_queries([QUERIES[0]], ["a different instruction"])[0]
    assert np.abs(vector - other).max() > 1e-3


def test_attention_is_bidirectional(folder, encoder):
    from transformers import AutoModel

    hidden_a, mask = encoder._forward(EMBED, ["a method for parsing"])
    hidden_b, _ = encoder._forward(EMBED, ["a method for Yes"])
    first_text = int((mask[0] == 0).sum())  # BOS and the <|embed|> marker come first
    assert (hidden_a[0, first_text] - hidden_b[0, first_text]).abs().max() > 1e-3
    causal = AutoModel.from_pretrained(folder).eval()
    tokenizer = encoder._load()[1]
    with torch.no_grad():
        causal_a = causal(**tokenizer(EMBED + "a method for parsing", return_tensors="pt"))[0]
        causal_b = causal(**tokenizer(EMBED + "a method for Yes", return_tensors="pt"))[0]
    torch.testing.assert_close(causal_a[0, first_text], causal_b[0, first_text])  # the check can fail
    assert not torch.allclose(hidden_a, causal_a, atol=1e-4)


def test_padding_does_not_change_vectors(folder):
    one = GritLMEncoder(folder, batch_size=1).encode_documents(DOCS)
    three = GritLMEncoder(folder, batch_size=3).encode_documents(DOCS)
    np.testing.assert_allclose(one, three, atol=1e-6)
    assert one.dtype == np.float32 and one.shape == (3, 32)
    np.testing.assert_allclose(np.linalg.norm(one, axis=1), 1.0, atol=1e-6)
    empty_instruction = GritLMEncoder(folder).encode_queries(DOCS, ["", "", ""])
    np.testing.assert_allclose(empty_instruction, one, atol=1e-6)


def test_describe_and_load_failure(tmp_path, folder):
    described = GritLMEncoder(folder, revision="abc").describe()
    assert described["location"] == folder and described["revision"] == "abc" and described["max_length"] == 512
    assert described["query_template"] == "<|user|>\n{instruction}\n<|embed|>\n{text}"
    assert described["doc_template"] == "<|embed|>\n{text}" and described["dtype"] == "float32"
    missing = GritLMEncoder(str(tmp_path / "nowhere"))  # lazy: nothing loads yet
    with pytest.raises(KitError) as err:
        missing.encode_documents(["x"])
    assert str(tmp_path / "nowhere") in str(err.value) and "\n" not in str(err.value)
