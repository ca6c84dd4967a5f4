"""llm-rankers' answer reading on a chat model (ielab/llm-rankers, llmrankers/pairwise.py,
PairwiseLlmRanker.compare for Llama): Qin's prompt in the chat template, " Passage:" appended,
one greedy token, decoded, stripped and upper-cased. The transformers backend with
``answer: greedy`` and template ``prp-qin-llmrankers`` must read every comparison as that code
does (A: 1.0, B: 0.0, anything else 0.5), on a tiny random Llama whose head is tilted so that
both letters occur."""

from __future__ import annotations

import pytest
from tiny_models import build_tiny_lm, tilt_towards_a_and_b

from evalkit.core.errors import KitError
from evalkit.llm.backend import Prompts
from evalkit.llm.hf import TransformersBackend
from evalkit.llm.judge import SEPARATOR
from evalkit.llm.templates import load_template

LLM_RANKERS = '''Given a query "{query}", which of the following two passages is more relevant to the query?

Passage A: "{doc1}"

Passage B: "{doc2}"

Output Passage A or Passage B:'''
INSTRUCTION, SEED = "Find papers with the same method.", "Graph networks for parsing."
DOCS = ["A parser built on graph networks.", "Protein folding with attention.", "Sparse attention for long text.",
        "Dependency parsing with transformers.", "A survey of graph kernels."]


def _text(tokenizer, doc1: str, doc2: str) -> str:
    """The text PairwiseLlmRanker.compare feeds a Llama chat model for one order."""
    prompt = LLM_RANKERS.format(query=f"{INSTRUCTION} Seed paper: {SEED}", doc1=doc1, doc2=doc2)
    return tokenizer.apply_chat_template([{"role": "user", "content": prompt}], tokenize=False,
                                         add_generation_prompt=True) + " Passage:"


ORDERS = [(a, b) for a in DOCS for b in DOCS if a != b]


@pytest.fixture(scope="module")
def tilted_lm(tmp_path_factory):
    """The tiny chat Llama with its output head tilted towards the tokens reading "A" and "B",
    along a direction of the answer position's hidden state that varies with the passages (and
    is orthogonal to its mean), so that some comparisons read A and others B."""
    folder = build_tiny_lm(tmp_path_factory.mktemp("lm"))
    tokenizer, model = tilt_towards_a_and_b(folder, lambda tok: [_text(tok, a, b) for a, b in ORDERS])
    return folder, tokenizer, model


def llm_rankers_reading(tokenizer, model, doc1: str, doc2: str) -> str:
    """What PairwiseLlmRanker.compare reads for one order (its Llama branch)."""
    input_ids = tokenizer([_text(tokenizer, doc1, doc2)], return_tensors="pt").input_ids
    output = model.generate(input_ids, do_sample=False, temperature=None, top_p=None, max_new_tokens=1,
                            pad_token_id=tokenizer.pad_token_id)
    return tokenizer.decode(output[0][input_ids.shape[1]:], skip_special_tokens=True).strip().upper()


def test_greedy_reading_equals_llm_rankers_compare(tilted_lm):
    folder, tokenizer, model = tilted_lm
    template = load_template("prp-qin-llmrankers")
    orders = ORDERS
    prompts = Prompts(prefix=template.prefix.format(instruction=INSTRUCTION, seed=SEED) + SEPARATOR,
                      suffixes=tuple(template.suffix.format(a=a, b=b) for a, b in orders), labels=template.labels,
                      answer_prefix=template.answer_prefix)
    said = [llm_rankers_reading(tokenizer, model, a, b) for a, b in orders]
    expected = [1.0 if s == "A" else 0.0 if s == "B" else 0.5 for s in said]
    assert {"A", "B"} <= set(said)  # the tilt makes both answers occur: the reading is tested both ways
    backend = TransformersBackend(str(folder), answer="greedy", batch_size=4)
    assert backend.first_label_probs(prompts) == expected
    half = len(orders) // 2
    groups = [Prompts(prompts.prefix, prompts.suffixes[:half], prompts.labels, prompts.answer_prefix),
              Prompts(prompts.prefix, prompts.suffixes[half:], prompts.labels, prompts.answer_prefix)]
    assert sum(backend.first_label_probs_many(groups), []) == expected
    assert backend.numerics.endswith(" greedy")  # judgments read greedily are keyed apart
    assert TransformersBackend(str(folder)).numerics == backend.numerics.removesuffix(" greedy")
    with pytest.raises(KitError, match="answer='sampled': choose one of labels, greedy"):
        TransformersBackend(str(folder), answer="sampled")
