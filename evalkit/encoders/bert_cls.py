"""SciNCL paper encoder: the [CLS] vector of ``title [SEP] abstract``, as its authors run it.

What the authors' code does (github malteos/scincl, README "How to use the pretrained model";
allenai/SPECTER2's README gives the same recipe for SPECTER-family models): each paper is
the string ``d['title'] + tokenizer.sep_token + (d.get('abstract') or '')`` (no spaces
around the separator; a missing abstract is the empty string), the batch is tokenised with
``padding=True, truncation=True, max_length=512`` and the embedding is
``model(**inputs).last_hidden_state[:, 0, :]``: the final hidden state of [CLS], not
normalised. Queries are papers too, encoded the same way. The SPECTER2 README also passes
``return_token_type_ids=False``; for BERT this is the same as all-zero token types, which is
what the tokenizer would return for one segment, so the vectors do not change.

The helpers here (loading a transformers BERT lazily with one-line `KitError`s, the paper
text, [CLS] pooling in batches) are shared by `specter2.py` and `aspire.py`.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from evalkit.core.errors import MissingPrerequisite
from evalkit.core.hashing import files_sha256

SCINCL = "malteos/scincl"
TEXT_FORMAT = "title + tokenizer.sep_token + (abstract or '')"
POOLING = "cls: last_hidden_state[:, 0, :], not normalised"


def one_line(exc: BaseException) -> str:
    """An exception's message squeezed onto one line."""
    return " ".join(str(exc).split()) or type(exc).__name__


def resolved_revision(location: str, revision: str | None) -> str:
    """What pins the weights: a local folder's content hash, else the hub revision (default main)."""
    folder = Path(location)
    if folder.is_dir():
        paths = sorted(p for p in folder.rglob("*") if p.is_file())
        return files_sha256(paths, [str(p.relative_to(folder)) for p in paths])[:16]
    return revision or "main"


def load_tokenizer(location: str, revision: str | None):
    """The tokenizer alone (cheap: e.g. for the separator token when every vector is cached)."""
    from transformers import AutoTokenizer

    kwargs = {} if Path(location).is_dir() else {"revision": revision}
    try:
        return AutoTokenizer.from_pretrained(location, **kwargs)
    except (OSError, ValueError, KeyError, RuntimeError) as exc:
        raise MissingPrerequisite(f"{location}: cannot load the tokenizer ({one_line(exc)})",
                                  "check the hub id, revision or folder") from None


def load_bert(location: str, revision: str | None, device: str):
    """(tokenizer, model in eval mode on `device`, float32) from a hub id or a local folder."""
    import torch
    from transformers import AutoModel, AutoTokenizer

    kwargs = {} if Path(location).is_dir() else {"revision": revision}
    try:
        tokenizer = AutoTokenizer.from_pretrained(location, **kwargs)
        model = AutoModel.from_pretrained(location, dtype=torch.float32, **kwargs)
    except (OSError, ValueError, KeyError, RuntimeError) as exc:
        raise MissingPrerequisite(f"{location}: cannot load the model ({one_line(exc)})",
                                  "check the hub id, revision or folder") from None
    model.to(device)
    model.eval()
    return tokenizer, model


def paper_text(title: str, abstract: str | None, sep_token: str) -> str:
    """``title + sep_token + (abstract or '')``: the authors' join, no spaces added."""
    return (title or "") + sep_token + (abstract or "")


def cls_vectors(tokenizer, model, texts: Sequence[str], max_length: int, batch_size: int,
                device: str) -> np.ndarray:
    """[CLS] final hidden states of `texts`, tokenised in batches as the authors do (float32)."""
    import torch

    chunks = []
    for start in range(0, len(texts), batch_size):
        inputs = tokenizer(list(texts[start:start + batch_size]), padding=True, truncation=True,
                           return_tensors="pt", return_token_type_ids=False, max_length=max_length)
        inputs = {k: v.to(device) for k, v in inputs.items()}
        with torch.inference_mode():
            output = model(**inputs)
        chunks.append(output.last_hidden_state[:, 0, :].float().cpu().numpy())
    hidden = model.config.hidden_size
    return np.concatenate(chunks).astype(np.float32) if chunks else np.zeros((0, hidden), np.float32)


class LazyBert:
    """A BERT-family model and its tokenizer, loaded on first use (hub id or local folder)."""

    family = "bert"

    def __init__(self, location: str, revision: str | None, device: str, batch_size: int):
        self.location = location
        self.revision = revision
        self.device = device
        self.batch_size = batch_size
        self._tokenizer = None
        self._model = None

    def _build(self):
        """(tokenizer, model); subclasses add to the model (an adapter) or check the tokenizer."""
        return load_bert(self.location, self.revision, self.device)

    def _load(self):
        if self._model is None:
            self._tokenizer, self._model = self._build()
        return self._tokenizer, self._model

    @property
    def tokenizer(self):
        return self._load()[0]

    @property
    def model(self):
        return self._load()[1]

    @property
    def sep_token(self) -> str:
        """The tokenizer's separator token, without loading the weights."""
        if self._tokenizer is None:
            self._tokenizer = load_tokenizer(self.location, self.revision)
        return self._tokenizer.sep_token


class BertClsEncoder(LazyBert):
    """SciNCL (default `malteos/scincl`): [CLS] of ``title [SEP] abstract``, max 512 tokens.

    `location` is a hub id or a local folder, loaded on first use; `revision` pins a hub
    commit. `encode` takes (title, abstract) pairs; `encode_texts` takes already-joined
    texts (see `text`), for callers that cache by text.
    """

    family = "scincl"

    def __init__(self, location: str = SCINCL, revision: str | None = None, device: str = "cpu",
                 max_length: int = 512, batch_size: int = 16):
        super().__init__(location, revision, device, batch_size)
        self.max_length = max_length

    def describe(self) -> dict:
        """Everything that changes the vectors."""
        return {"family": self.family, "location": self.location,
                "revision": resolved_revision(self.location, self.revision),
                "text_format": TEXT_FORMAT, "pooling": POOLING, "max_length": self.max_length,
                "token_type_ids": "not passed (return_token_type_ids=False)", "adapter": None}

    def text(self, title: str, abstract: str | None) -> str:
        """The string the model reads for one paper."""
        return paper_text(title, abstract, self.tokenizer.sep_token)

    def encode_texts(self, texts: Sequence[str]) -> np.ndarray:
        """(len(texts), dim) float32 [CLS] vectors of already-joined texts."""
        tokenizer, model = self._load()
        return cls_vectors(tokenizer, model, texts, self.max_length, self.batch_size, self.device)

    def encode(self, papers: Sequence[tuple[str, str | None]]) -> np.ndarray:
        """(len(papers), dim) float32 vectors of (title, abstract) pairs; queries are papers too."""
        return self.encode_texts([self.text(title, abstract) for title, abstract in papers])
