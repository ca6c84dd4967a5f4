"""SciNCL encoder ([CLS] of title [SEP] abstract) against the authors' README recipe on a tiny random BERT."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from tiny_models import WORDS, build_tiny_bert

from evalkit.core.errors import KitError
from evalkit.encoders.bert_cls import BertClsEncoder

PAPERS = [
    ("Graph neural networks for retrieval", "We propose a novel method. Experiments show improvements."),
    ("Faceted query by example", None),
    ("A long corpus paper", " ".join(WORDS[i % len(WORDS)] for i in range(700))),  # > 512 tokens
    ("", "Only an abstract; no title."),
]




@pytest.fixture(scope="module")
def tiny_bert(tmp_path_factory) -> Path:
    return build_tiny_bert(tmp_path_factory.mktemp("tiny-bert") / "bert")


def reference_vectors(folder: Path, papers) -> np.ndarray:
    """The SciNCL README, one paper at a time: AutoTokenizer/AutoModel, title + sep_token + abstract, [CLS]."""
    import torch
    from transformers import AutoModel, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(folder)
    model = AutoModel.from_pretrained(folder).eval()
    rows = []
    for title, abstract in papers:
        d = {"title": title, "abstract": abstract}
        text = d["title"] + tokenizer.sep_token + (d.get("abstract") or "")
        inputs = tokenizer([text], padding=True, truncation=True, return_tensors="pt", max_length=512)
        with torch.no_grad():
            result = model(**inputs)
        rows.append(result.last_hidden_state[:, 0, :][0].numpy())
    return np.stack(rows)


def test_matches_the_authors_recipe(tiny_bert):
    expected = reference_vectors(tiny_bert, PAPERS)
    for batch_size in (1, 3):
        got = BertClsEncoder(str(tiny_bert), batch_size=batch_size).encode(PAPERS)
        assert got.dtype == np.float32 and got.shape == (len(PAPERS), 32)
        np.testing.assert_allclose(got, expected, atol=1e-5, rtol=0)
    assert not np.allclose(np.linalg.norm(got, axis=1), 1.0)  # not normalised
    assert np.abs(expected[0] - expected[1]).max() > 1e-2  # the vectors depend on the text


def test_text_format_and_truncation(tiny_bert):
    encoder = BertClsEncoder(str(tiny_bert))
    assert encoder.text("BERT", None) == "BERT[SEP]"
    assert encoder.text("BERT", "We introduce.") == "BERT[SEP]We introduce."
    ids = encoder.tokenizer(encoder.text(*PAPERS[2]), truncation=True, max_length=512)["input_ids"]
    assert len(ids) == 512 and len(encoder.tokenizer(encoder.text(*PAPERS[2]))["input_ids"]) > 512
    np.testing.assert_allclose(encoder.encode_texts([encoder.text(*PAPERS[0])]), encoder.encode(PAPERS[:1]),
                               atol=1e-6)


def test_describe_and_lazy_loading(tiny_bert, tmp_path):
    encoder = BertClsEncoder(str(tiny_bert))
    info = encoder.describe()
    assert encoder._model is None  # describe does not load the model
    assert info["location"] == str(tiny_bert) and len(info["revision"]) == 16
    assert info["text_format"] == "title + tokenizer.sep_token + (abstract or '')"
    assert info["max_length"] == 512 and "last_hidden_state[:, 0, :]" in info["pooling"]
    assert BertClsEncoder("malteos/scincl", revision="abc").describe()["revision"] == "abc"
    missing = BertClsEncoder(str(tmp_path / "nowhere"))
    with pytest.raises(KitError) as err:
        missing.encode(PAPERS[:1])
    assert str(tmp_path / "nowhere") in str(err.value) and "\n" not in str(err.value)
