"""A local causal LM through transformers, scoring the next-token probabilities of two labels.

``answer`` chooses how the next token is read: ``labels`` (the default) gives P(first label)
over the two labels' tokens; ``greedy`` reads it as ielab/llm-rankers' PairwiseLlmRanker does
for chat models (one greedy token after the answer prefix, decoded, stripped, upper-cased):
1.0 when it is the first label, 0.0 the second, 0.5 (counted as unparsed) anything else. With
template ``prp-qin-llmrankers`` (answer prefix " Passage:" after the chat template) this is
llm-rankers' own comparison.

Messages go through the tokenizer's chat template when it has one (plain text
otherwise), followed by the template's answer prefix. The tokens of the shared
prefix are run once per prefix and their KV cache is copied into every batch of
suffixes (``prefix_reuse``); without reuse each prompt is run whole. Both paths
feed the model the same token ids (prefix and suffix tokenized apart), left-padded
with explicit position ids, so they give the same probabilities. Reuse needs a KV
cache that can be copied and repeated along the batch (transformers' DynamicCache);
for models without one, set ``prefix_reuse: false``.

`first_label_probs_many` scores the prompts of several queries (different prefixes)
together: every forward pass takes up to `batch_size` prompts whatever their query. With
prefix reuse the KV caches of the prefixes in a pass are left-padded to one length and
stacked, and the attention mask hides the padding; the probabilities equal those of one
query at a time up to float rounding (about 1e-6). The last `prefix_cache` prefixes are
kept (least recently used evicted): it must hold one per query in flight, or every
scheduler round recomputes every prefix (`LLMReranker` sets it to ``parallel_queries``).
"""

from __future__ import annotations

import copy
import inspect
from collections import OrderedDict

import torch

from evalkit.core.devices import device_kind, resolve_device
from evalkit.core.errors import DataError
from evalkit.llm.backend import Prompts, Usage
from evalkit.llm.loading import resolve

ANSWERS = ("labels", "greedy")


def _dtype_for(dtype: str | dict[str, str], device: str) -> str:
    """The dtype name to load in: `dtype` itself, or its entry for the device kind."""
    if isinstance(dtype, dict):
        kind = device_kind(device)
        if kind not in dtype:
            raise DataError("model settings", f"dtype {dtype} names none for device {kind}; add a '{kind}:' entry")
        dtype = dtype[kind]
    if not isinstance(dtype, str) or not isinstance(getattr(torch, dtype, None), torch.dtype):
        raise DataError("model settings", f"dtype {dtype!r} is not a torch dtype; use float32, bfloat16 or float16")
    return dtype


class TransformersBackend:
    def __init__(self, model: str, gguf_file: str | None = None, revision: str | None = None,
                 batch_size: int = 8, prefix_reuse: bool = True, device: str | None = None,
                 dtype: str | dict[str, str] = "float32", prefix_cache: int = 64, answer: str = "labels"):
        from transformers import AutoModelForCausalLM, AutoTokenizer

        self.device = resolve_device(device)
        dtype = _dtype_for(dtype, self.device)
        if answer not in ANSWERS:
            raise DataError(f"answer={answer!r}", f"choose one of {', '.join(ANSWERS)}")
        self.answer = answer
        # the reading changes the judgments, so it keys them (with dtype and device kind)
        self.numerics = f"{dtype} {device_kind(self.device)}" + ("" if answer == "labels" else f" {answer}")
        location, hub_revision, self.revision = resolve(model, gguf_file, revision)
        self.model = model + (f"#{gguf_file}" if gguf_file else "")
        self.tokenizer = AutoTokenizer.from_pretrained(location, revision=hub_revision)
        self.lm = AutoModelForCausalLM.from_pretrained(location, revision=hub_revision,
                                                       dtype=getattr(torch, dtype)).to(self.device).eval()
        self.batch_size = batch_size
        self.prefix_reuse = prefix_reuse
        self.usage = Usage()
        self.chat = bool(getattr(self.tokenizer, "chat_template", None))
        pad = self.tokenizer.pad_token_id
        self.pad_id = pad if pad is not None else (self.tokenizer.eos_token_id or 0)
        self._prefixes: OrderedDict[tuple[int, ...], object] = OrderedDict()  # head ids -> KV cache
        if prefix_cache < 1:
            raise DataError("model settings", f"prefix_cache={prefix_cache} must be positive; fix the model settings")
        self.prefix_cache = prefix_cache
        # transformers 5 renamed `past_key_values` to `cache`
        self._cache_name = "cache" if "cache" in inspect.signature(self.lm.forward).parameters else "past_key_values"

    def truncate(self, text: str, tokens: int) -> str:
        ids = self.tokenizer(text, add_special_tokens=False)["input_ids"]
        return text if len(ids) <= tokens else self.tokenizer.decode(ids[:tokens]).strip()

    def _render(self, prompts: Prompts, suffix: str) -> str:
        message = prompts.prefix + suffix
        if not self.chat:
            return (prompts.system + "\n\n" if prompts.system else "") + message + prompts.answer_prefix
        turns = ([{"role": "system", "content": prompts.system}] if prompts.system else []) + \
            [{"role": "user", "content": message}]
        text = self.tokenizer.apply_chat_template(turns, tokenize=False, add_generation_prompt=True)
        return text + prompts.answer_prefix

    def _split(self, prompts: Prompts) -> tuple[str, list[str]]:
        """The rendered text up to the end of the shared prefix, and each prompt's rest."""
        texts = [self._render(prompts, s) for s in prompts.suffixes]
        cut = texts[0].find(prompts.prefix)
        if cut < 0:
            raise DataError("LLM template",
                            f"the chat template of {self.model} changes the message text, so its shared prefix "
                            "cannot be found; use a template without leading or trailing spaces")
        head = texts[0][:cut + len(prompts.prefix)]
        if not all(t.startswith(head) for t in texts):
            raise DataError("LLM template",
                            f"the chat template of {self.model} renders the shared prefix differently per prompt")
        return head, [t[len(head):] for t in texts]

    def _ids(self, text: str, special: bool = False) -> list[int]:
        return self.tokenizer(text, add_special_tokens=special)["input_ids"]

    def _label_id(self, rest: list[int], rest_text: str, label: str) -> int:
        ids = self._ids(rest_text + label)
        if len(ids) <= len(rest) or ids[:len(rest)] != rest:
            raise DataError("LLM template",
                            f"label {label!r} merges with the text before it in the tokenizer of {self.model}; "
                            "change labels or answer_prefix in the template")
        return ids[len(rest)]

    @torch.no_grad()
    def _prefix_kv(self, head: list[int]):
        key = tuple(head)
        if key in self._prefixes:
            self._prefixes.move_to_end(key)
        else:
            ids = torch.tensor([head], device=self.device)
            out = self.lm(input_ids=ids, use_cache=True)
            self._prefixes[key] = getattr(out, self._cache_name)
            while len(self._prefixes) > self.prefix_cache:
                self._prefixes.popitem(last=False)
        return self._prefixes[key]

    @torch.no_grad()
    def _mixed_logits(self, heads: list[list[int]], rows: list[list[int]]) -> torch.Tensor:
        """Logits of the token after heads[i] + rows[i], the heads' KV caches padded and stacked."""
        from transformers import DynamicCache

        span, width = max(len(h) for h in heads), max(len(r) for r in rows)
        caches = [self._prefix_kv(h) for h in heads]
        layers = []
        for layer in range(len(caches[0].layers)):
            stacked = []
            for part in ("keys", "values"):
                tensors = [getattr(c.layers[layer], part) for c in caches]
                stacked.append(torch.cat([torch.nn.functional.pad(t, (0, 0, span - t.shape[2], 0)) for t in tensors]))
            layers.append(tuple(stacked))
        cache = DynamicCache(ddp_cache_data=layers)
        n = len(rows)
        ids = torch.full((n, width), self.pad_id, dtype=torch.long)
        mask = torch.zeros((n, span + width), dtype=torch.long)
        positions = torch.zeros((n, width), dtype=torch.long)
        for i, (head, row) in enumerate(zip(heads, rows)):
            ids[i, width - len(row):] = torch.tensor(row)
            mask[i, span - len(head):span] = 1
            mask[i, span + width - len(row):] = 1
            positions[i, width - len(row):] = torch.arange(len(head), len(head) + len(row))
        out = self.lm(input_ids=ids.to(self.device), attention_mask=mask.to(self.device),
                      position_ids=positions.to(self.device), logits_to_keep=1, use_cache=True,
                      **{self._cache_name: cache})
        return out.logits[:, -1, :].float()

    @torch.no_grad()
    def _next_logits(self, head: list[int], rows: list[list[int]]) -> torch.Tensor:
        """Logits of the token after head + row, for every row."""
        if not self.prefix_reuse:
            rows = [head + r for r in rows]
        width = max(len(r) for r in rows)
        ids = torch.full((len(rows), width), self.pad_id, dtype=torch.long)
        mask = torch.zeros((len(rows), width), dtype=torch.long)
        for i, row in enumerate(rows):
            ids[i, width - len(row):] = torch.tensor(row)
            mask[i, width - len(row):] = 1
        positions = (mask.cumsum(1) - 1).clamp(min=0)
        kwargs = {"use_cache": False}
        if self.prefix_reuse:
            cache = copy.deepcopy(self._prefix_kv(head))
            cache.batch_repeat_interleave(len(rows))
            positions = positions + len(head)
            mask = torch.cat([torch.ones((len(rows), len(head)), dtype=torch.long), mask], dim=1)
            kwargs = {"use_cache": True, self._cache_name: cache}
        out = self.lm(input_ids=ids.to(self.device), attention_mask=mask.to(self.device),
                      position_ids=positions.to(self.device), logits_to_keep=1, **kwargs)
        return out.logits[:, -1, :].float()

    def _encode(self, prompts: Prompts) -> tuple[list[int], list[list[int]], torch.Tensor]:
        """Head ids, each prompt's remaining ids and its two label ids."""
        head_text, rests = self._split(prompts)
        head = self._ids(head_text, special=not self.chat)
        rows = [self._ids(r) for r in rests]
        labels = torch.tensor([[self._label_id(ids, text, label) for label in prompts.labels]
                               for ids, text in zip(rows, rests)])
        if (labels[:, 0] == labels[:, 1]).any():
            raise DataError("LLM template",
                            f"labels {list(prompts.labels)} start with the same token for {self.model}; "
                            "change them in the template")
        return head, rows, labels

    def _read(self, logits: torch.Tensor, label_ids: torch.Tensor, labels) -> list[float]:
        """Each row's answer: P(first label) over the two label tokens, or the greedy token read."""
        if self.answer == "labels":
            return torch.softmax(logits.gather(1, label_ids), dim=1)[:, 0].tolist()
        wanted = [str(label).strip().upper() for label in labels]
        out = []
        for token in logits.argmax(dim=1).tolist():
            said = self.tokenizer.decode([token], skip_special_tokens=True).strip().upper()
            out.append(1.0 if said == wanted[0] else 0.0 if said == wanted[1] else 0.5)
            self.usage.unparsed += said not in wanted
        return out

    def first_label_probs(self, prompts: Prompts) -> list[float]:
        if not prompts.suffixes:
            return []
        head, rows, labels = self._encode(prompts)
        probs: list[float] = []
        for start in range(0, len(rows), self.batch_size):
            part = slice(start, start + self.batch_size)
            probs += self._read(self._next_logits(head, rows[part]).cpu(), labels[part], prompts.labels)
        self.usage.prompts += len(rows)
        self.usage.prompt_tokens += sum(len(head) + len(r) for r in rows)
        return probs

    def first_label_probs_many(self, groups: list[Prompts]) -> list[list[float]]:
        """`first_label_probs` of every group, prompts of different groups sharing forward passes."""
        if len(groups) == 1:
            return [self.first_label_probs(groups[0])]
        flat = []  # (group, head, row, label ids)
        for index, prompts in enumerate(groups):
            if prompts.suffixes:
                head, rows, labels = self._encode(prompts)
                flat += [(index, head, row, labels[i]) for i, row in enumerate(rows)]
        out: list[list[float]] = [[] for _ in groups]
        for start in range(0, len(flat), self.batch_size):
            part = flat[start:start + self.batch_size]
            heads, rows = [h for _, h, _, _ in part], [r for _, _, r, _ in part]
            if all(h == heads[0] for h in heads):
                logits = self._next_logits(heads[0], rows)
            elif self.prefix_reuse:
                logits = self._mixed_logits(heads, rows)
            else:
                logits = self._next_logits([], [h + r for h, r in zip(heads, rows)])
            read = self._read(logits.cpu(), torch.stack([labels for _, _, _, labels in part]), groups[0].labels)
            for (index, _, _, _), p in zip(part, read):
                out[index].append(p)
        self.usage.prompts += len(flat)
        self.usage.prompt_tokens += sum(len(h) + len(r) for _, h, r, _ in flat)
        return out
