"""GritLM embeddings (e.g. GritLM/GritLM-7B) computed as the authors' `gritlm` package computes them.

Read in github ContextualAI/gritlm: ``gritlm/gritlm.py`` (class ``GritLM``: ``__init__``,
``encode``, ``pooling``; identical to PyPI ``gritlm`` 1.0.2), ``README.md`` (the
``gritlm_instruction`` helper of the usage example) and ``scripts/modeling_mistral_gritlm.py``
(what ``is_causal=False`` does in the modelling file shipped with GritLM-7B).

What the package does, and this module reproduces with plain transformers:

- The encoded string is ``instruction + text``; the README's instruction is
  ``"<|user|>\\n{instruction}\\n<|embed|>\\n"``, or ``"<|embed|>\\n"`` when there is none
  (documents, and queries without an instruction).
- Tokenisation by the model's own tokenizer with its special tokens (the Mistral
  tokenizer adds BOS), right padding, pad token = EOS when the tokenizer has none,
  truncation at ``max_length`` = 512 (the default of ``GritLM.encode``).
- Bidirectional attention: ``encode`` passes ``is_causal=False`` to the base model.
  GritLM-7B's own modelling file turns it into a padding-only (non-causal) attention
  mask; stock transformers 5 reads the same forward argument (it overrides
  ``config.is_causal`` for the call, so the mask is built bidirectional and the SDPA
  kernel runs non-causal). This module passes it the same way and also sets
  ``config.is_causal = False`` on the loaded model, so no path can fall back to causal.
- Mean pooling over the text tokens only: the instruction is tokenised alone (with
  special tokens, so BOS counts) and that many leading positions are zeroed in the
  pooling mask, then the mean is taken over the remaining non-pad positions.
- L2 normalisation (``normalized=True`` by default).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from evalkit.core.errors import DataError, MissingPrerequisite

USER = "<|user|>\n"
EMBED = "<|embed|>\n"
MAX_LENGTH = 512


def instruction_prefix(instruction: str) -> str:
    """The README's ``gritlm_instruction``: user turn plus embed marker, the marker alone when empty.

    As the README's helper, only the empty string counts as no instruction: a whitespace-only
    one keeps its user turn (``<|user|>\n  \n<|embed|>\n``).
    """
    return f"{USER}{instruction}\n{EMBED}" if instruction else EMBED


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return text[:300] or exc.__class__.__name__


class GritLMEncoder:
    """GritLM embeddings: bidirectional attention, mean over the text tokens, L2-normalised.

    ``location`` is a hub id or a local folder (config, weights and tokenizer);
    ``dtype`` defaults to float32 on CPU and to the checkpoint's own dtype elsewhere
    (the README loads with ``torch_dtype="auto"``).
    """

    pooling = "mean over text tokens (instruction tokens and BOS excluded)"

    def __init__(self, location: str, revision: str | None = None, device: str = "cpu",
                 max_length: int | None = None, batch_size: int = 8, dtype: str | None = None):
        self.location = location
        self.revision = revision
        self.max_length = max_length or MAX_LENGTH
        self.batch_size = batch_size
        self.named_dtype = dtype
        self.place(device)
        self._model = None
        self._tokenizer = None

    def place(self, device: str) -> None:
        """Run on `device` (before the model loads); a dtype the entry did not name follows it: float32
        on the CPU, else the checkpoint's own (a Ray worker's copy: `evalkit.models.paper`)."""
        self.device = device
        self.dtype = self.named_dtype or ("float32" if str(device).startswith("cpu") else "auto")

    # -- strings -------------------------------------------------------------------------
    @staticmethod
    def query_string(text: str, instruction: str) -> str:
        return instruction_prefix(instruction) + text

    @staticmethod
    def document_string(text: str) -> str:
        return EMBED + text

    # -- loading -------------------------------------------------------------------------
    def _load(self):
        if self._model is not None:
            return self._model, self._tokenizer
        import torch
        from transformers import AutoModel, AutoTokenizer

        try:
            tokenizer = AutoTokenizer.from_pretrained(self.location, revision=self.revision, padding_side="right")
            dtype = self.dtype if self.dtype == "auto" else getattr(torch, self.dtype)
            model = AutoModel.from_pretrained(self.location, revision=self.revision, dtype=dtype,
                                              trust_remote_code=False)
        except (OSError, ValueError, KeyError, ImportError) as exc:
            raise MissingPrerequisite(f"{self.location}: cannot load the GritLM model ({_one_line(exc)})",
                                      "give a hub id reachable from here or a local folder with config, weights "
                                      "and tokenizer") from None
        if tokenizer.pad_token is None and tokenizer.eos_token is not None:
            tokenizer.pad_token = tokenizer.eos_token
        tokenizer.padding_side = "right"
        model.config.is_causal = False  # masking_utils then builds bidirectional (padding-only) masks
        self._model = model.to(self.device).eval()
        self._tokenizer = tokenizer
        return self._model, self._tokenizer

    # -- encoding ------------------------------------------------------------------------
    def _forward(self, prefix: str, texts: Sequence[str]):
        """(last hidden states, pooling mask) of one batch sharing one instruction prefix."""
        import torch

        model, tokenizer = self._load()
        inputs = tokenizer([prefix + t for t in texts], padding=True, truncation=True, return_tensors="pt",
                           max_length=self.max_length).to(self.device)
        with torch.no_grad():
            hidden = model(input_ids=inputs["input_ids"], attention_mask=inputs["attention_mask"],
                           is_causal=False)[0]
        pool_mask = inputs["attention_mask"].clone()
        if prefix:
            n = len(tokenizer(prefix, padding=False, truncation=True, max_length=self.max_length)["input_ids"])
            pool_mask[:, :n] = 0
        return hidden, pool_mask

    def _encode(self, prefixes: Sequence[str], texts: Sequence[str]) -> np.ndarray:
        import torch

        out: list[np.ndarray | None] = [None] * len(texts)
        groups: dict[str, list[int]] = {}
        for i, prefix in enumerate(prefixes):
            groups.setdefault(prefix, []).append(i)
        for prefix, rows in groups.items():
            for start in range(0, len(rows), self.batch_size):
                part = rows[start:start + self.batch_size]
                hidden, mask = self._forward(prefix, [texts[i] for i in part])
                summed = torch.sum(hidden * mask.unsqueeze(-1).float(), dim=1)
                pooled = summed / mask.sum(dim=1, keepdim=True).float()
                pooled = torch.nn.functional.normalize(pooled, dim=-1)
                for i, vector in zip(part, pooled.cpu().to(torch.float32).numpy()):
                    out[i] = vector
        if not texts:
            return np.zeros((0, self._load()[0].config.hidden_size), dtype=np.float32)
        return np.stack(out).astype(np.float32)

    def encode_queries(self, texts: Sequence[str], instructions: Sequence[str]) -> np.ndarray:
        """One row per query: ``<|user|>\\n{instruction}\\n<|embed|>\\n{text}`` pooled over the text."""
        if len(texts) != len(instructions):
            raise DataError("encoder input", f"{len(texts)} queries but {len(instructions)} instructions; "
                            "give one instruction per query")
        return self._encode([instruction_prefix(i) for i in instructions], list(texts))

    def encode_documents(self, texts: Sequence[str]) -> np.ndarray:
        """One row per document: ``<|embed|>\\n{text}`` pooled over the text."""
        return self._encode([EMBED] * len(texts), list(texts))

    def describe(self) -> dict:
        return {"encoder": "gritlm", "location": self.location, "revision": self.revision,
                "max_length": self.max_length, "dtype": self.dtype,
                "query_template": USER + "{instruction}\n" + EMBED + "{text}",
                "empty_instruction_template": EMBED + "{text}", "doc_template": EMBED + "{text}",
                "attention": "bidirectional", "pooling": self.pooling, "normalize": True}
