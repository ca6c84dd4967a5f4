"""Promptriever embeddings (e.g. samaya-ai/promptriever-llama2-7b-v1) computed as the authors' code computes them.

Read in github orionw/promptriever (the paper's code release by its first author; its
README lists the samaya-ai models; github samaya-ai/promptriever could not be fetched
here): ``README.md`` and the encode scripts ``scripts/beir/encode_beir_queries.sh``,
``scripts/beir/encode_beir_corpus.sh``, ``scripts/msmarco/encode_queries.sh``,
``scripts/msmarco/encode_corpus.sh``; and the tevatron fork that README installs
(github orionw/tevatron): ``src/tevatron/retriever/dataset.py`` (``format_query``,
``format_passage``), ``collator.py`` (``EncodeCollator``), ``modeling/encoder.py``
(``EncoderModel.load``), ``modeling/dense.py`` (``_pooling``), ``driver/encode.py``,
``arguments.py`` (defaults).

What that code does, and this module reproduces:

- Model: the base (``--model_name_or_path``, meta-llama/Llama-2-7b-hf in the scripts)
  loaded with ``AutoModel``, the LoRA adapter applied with
  ``PeftModel.from_pretrained(base, adapter, config=LoraConfig.from_pretrained(adapter))``
  and merged (``merge_and_unload``). Without an explicit base, the adapter's own
  ``base_model_name_or_path`` is used.
- Strings: prefixes ``"query: "`` / ``"passage: "`` joined with one more space, so
  ``"query:  {query}"`` and ``"passage:  {title} {text}"``, each part stripped and the
  whole stripped. With a non-blank prompt: a query whose stripped text does not end in
  ``.``, ``?`` or ``!`` gets ``?`` appended, then one space and the stripped prompt;
  a blank prompt leaves the query alone (no ``?``, no trailing space).
- Tokens: the base tokenizer with its special tokens (Llama adds BOS), truncation at
  ``max_len - 1``, the EOS id appended (``--append_eos_token``), right padding with
  pad = EOS when the tokenizer has none, ``pad_to_multiple_of`` 16.
- Max lengths: 512 for queries and passages (BEIR scripts, the default here); the
  MS MARCO scripts use 32 (queries) and 156 (passages).
- Pooling ``eos``: the hidden state at the last non-pad position (the EOS), then L2
  normalisation (``--normalize``).
- Precision: ``--bf16`` loads the weights in bfloat16 and runs under
  ``torch.cuda.amp.autocast()`` (float16 by default); here that is the default on CUDA,
  float32 without autocast on CPU.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from evalkit.core.errors import DataError, MissingPrerequisite

QUERY_PREFIX = "query: "
PASSAGE_PREFIX = "passage: "
MAX_LENGTH = 512
PAD_TO_MULTIPLE_OF = 16
FINAL_PUNCTUATION = (".", "?", "!")


def format_query(query: str, prompt: str = "") -> str:
    """``query:  {query}``, with ``?`` added before a non-blank prompt when the query lacks final punctuation."""
    query = query.strip()
    if not prompt.strip():
        return f"{QUERY_PREFIX} {query}".strip()
    mark = "" if query[-1:] in FINAL_PUNCTUATION else "?"
    return f"{QUERY_PREFIX} {query}{mark} {prompt.strip()}".strip()


def format_passage(text: str, title: str | None = None) -> str:
    """``passage:  {text}``; with a title (even an empty one) exactly the authors' ``passage:  {title} {text}``."""
    if title is None:
        return f"{PASSAGE_PREFIX} {text.strip()}".strip()
    return f"{PASSAGE_PREFIX} {title.strip()} {text.strip()}".strip()


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return text[:300] or exc.__class__.__name__


class PromptrieverEncoder:
    """Promptriever: base LM + merged LoRA, EOS appended, last-token pooling, L2-normalised.

    ``location`` is the adapter (hub id or local folder); ``base`` the base model (hub id
    or folder; default: the adapter's ``base_model_name_or_path``). ``max_length`` sets
    both sides; ``query_max_length`` / ``passage_max_length`` override one side.
    """

    pooling = "last token (the appended EOS)"

    def __init__(self, location: str, revision: str | None = None, device: str = "cpu",
                 max_length: int | None = None, batch_size: int = 8, base: str | None = None,
                 base_revision: str | None = None, query_max_length: int | None = None,
                 passage_max_length: int | None = None, dtype: str | None = None):
        self.location = location
        self.revision = revision
        self.base = base
        self.base_revision = base_revision
        self.query_max_length = query_max_length or max_length or MAX_LENGTH
        self.passage_max_length = passage_max_length or max_length or MAX_LENGTH
        self.batch_size = batch_size
        self.named_dtype = dtype
        self.place(device)
        self._model = None
        self._tokenizer = None

    def place(self, device: str) -> None:
        """Run on `device` (before the model loads); a dtype the entry did not name follows it: float32
        on the CPU, else bfloat16 (a Ray worker's copy: `evalkit.models.paper`)."""
        self.device = device
        self.dtype = self.named_dtype or ("float32" if str(device).startswith("cpu") else "bfloat16")

    # -- loading -------------------------------------------------------------------------
    def _base_location(self) -> str:
        if self.base:
            return self.base
        try:
            from peft import PeftConfig

            return PeftConfig.from_pretrained(self.location, revision=self.revision).base_model_name_or_path
        except ImportError:
            raise MissingPrerequisite("peft is not installed", "pip install peft") from None
        except (OSError, ValueError) as exc:
            raise MissingPrerequisite(f"{self.location}: cannot read the Promptriever adapter config "
                                      f"({_one_line(exc)})",
                                      "give a hub id reachable from here or a local adapter folder") from None

    def _load(self):
        if self._model is not None:
            return self._model, self._tokenizer
        import torch
        from transformers import AutoModel, AutoTokenizer

        try:
            from peft import LoraConfig, PeftModel
        except ImportError:
            raise MissingPrerequisite("peft is not installed", "pip install peft") from None
        base = self._base_location()
        try:
            tokenizer = AutoTokenizer.from_pretrained(base, revision=self.base_revision)
            model = AutoModel.from_pretrained(base, revision=self.base_revision, dtype=getattr(torch, self.dtype))
        except (OSError, ValueError, KeyError) as exc:
            raise MissingPrerequisite(f"{base}: cannot load the Promptriever base model ({_one_line(exc)})",
                                      "give a hub id reachable from here or a local folder (setting base)") from None
        try:
            config = LoraConfig.from_pretrained(self.location, revision=self.revision)
            model = PeftModel.from_pretrained(model, self.location, revision=self.revision, config=config)
        except (OSError, ValueError, KeyError) as exc:
            raise MissingPrerequisite(f"{self.location}: cannot load the Promptriever LoRA adapter "
                                      f"({_one_line(exc)})",
                                      "give a hub id reachable from here or a local adapter folder") from None
        model = model.merge_and_unload()
        if tokenizer.pad_token_id is None:
            tokenizer.pad_token_id = tokenizer.eos_token_id
        tokenizer.padding_side = "right"
        self._model = model.to(self.device).eval()
        self._tokenizer = tokenizer
        return self._model, self._tokenizer

    # -- encoding ------------------------------------------------------------------------
    def _tokenize(self, strings: Sequence[str], max_length: int):
        """Token ids truncated to max_length - 1 plus EOS, right-padded to a multiple of 16."""
        _, tokenizer = self._load()
        ids = tokenizer(list(strings), padding=False, truncation=True, max_length=max_length - 1,
                        return_attention_mask=False, return_token_type_ids=False,
                        add_special_tokens=True)["input_ids"]
        batch = {"input_ids": [row + [tokenizer.eos_token_id] for row in ids]}
        return tokenizer.pad(batch, padding=True, pad_to_multiple_of=PAD_TO_MULTIPLE_OF,
                             return_attention_mask=True, return_tensors="pt")

    def _uses_autocast(self) -> bool:
        return str(self.device).startswith("cuda") and self.dtype in ("bfloat16", "float16")

    def _autocast(self):
        import contextlib

        import torch

        if self._uses_autocast():
            return torch.autocast(device_type="cuda", dtype=torch.float16)
        return contextlib.nullcontext()

    def _encode(self, strings: Sequence[str], max_length: int) -> np.ndarray:
        import torch

        model, _ = self._load()
        if not strings:
            return np.zeros((0, model.config.hidden_size), dtype=np.float32)
        out = []
        for start in range(0, len(strings), self.batch_size):
            batch = self._tokenize(strings[start:start + self.batch_size], max_length).to(self.device)
            with self._autocast(), torch.no_grad():
                hidden = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).last_hidden_state
                last = batch["attention_mask"].sum(dim=1) - 1
                reps = hidden[torch.arange(hidden.shape[0], device=hidden.device), last]
                reps = torch.nn.functional.normalize(reps, p=2, dim=-1)
            out.append(reps.float().cpu().numpy())
        return np.concatenate(out).astype(np.float32)

    def encode_queries(self, texts: Sequence[str], instructions: Sequence[str]) -> np.ndarray:
        """One row per query: ``format_query(text, prompt)``, the instruction being the appended prompt."""
        if len(texts) != len(instructions):
            raise DataError("encoder input",
                            f"{len(texts)} queries but {len(instructions)} prompts; give one prompt per query "
                            "(an empty string for none)")
        return self._encode([format_query(t, p) for t, p in zip(texts, instructions)], self.query_max_length)

    def encode_documents(self, texts: Sequence[str], titles: Sequence[str] | None = None) -> np.ndarray:
        """One row per passage: ``passage:  {text}``, or the authors' ``passage:  {title} {text}`` given titles."""
        if titles is not None and len(titles) != len(texts):
            raise DataError("encoder input",
                            f"{len(texts)} passages but {len(titles)} titles; give one title per passage")
        strings = [format_passage(t, None if titles is None else titles[i]) for i, t in enumerate(texts)]
        return self._encode(strings, self.passage_max_length)

    def encode_passage_strings(self, strings: Sequence[str]) -> np.ndarray:
        """One row per already formatted passage string (`format_passage`'s output)."""
        return self._encode(list(strings), self.passage_max_length)

    def describe(self) -> dict:
        return {"encoder": "promptriever", "location": self.location, "revision": self.revision,
                "base": self.base, "base_revision": self.base_revision,
                "query_max_length": self.query_max_length, "passage_max_length": self.passage_max_length,
                "dtype": self.dtype, "autocast": "float16" if self._uses_autocast() else None,
                "query_template": "query:  {query}{?} {prompt}", "empty_prompt_template": "query:  {query}",
                "doc_template": "passage:  {title} {text} (each stripped; passage:  {text} for a text without title)",
                "eos_appended": True, "pooling": self.pooling,
                "normalize": True, "lora": "merged"}
