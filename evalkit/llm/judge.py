"""LLM judgments of one query's candidates: pairwise in both orders, or pointwise; cached.

A comparison of x and y asks the model twice, x as passage A then y as passage A.
x wins only when both orders prefer it (P("A") > 0.5 with x first, < 0.5 with y
first). When they disagree (or either is exactly 0.5) the `disagreement` setting
decides: ``half`` scores 0.5 each (a tie: all-pairs adds half a win to both, the
sorts break it by first-stage order), ``keep`` lets the document ranked higher by
the first stage win (the same in the sorts; in all-pairs a full win), ``average``
gives x the mean of its two win probabilities, P("A" | x first) and P("B" | y
first), so the more confident order decides (a model that always answers "A" can
still carry a signal in how strongly it does so).
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import replace

from evalkit.errors import KitError
from evalkit.llm.backend import Backend, Prompts
from evalkit.llm.cache import JudgmentCache, Key, text_hash
from evalkit.llm.tally import Tally
from evalkit.llm.templates import SEPARATOR, Template

DISAGREEMENT = ("half", "keep", "average")


class Judge:
    """Judgments for the queries of one reranker, sharing a backend, a template, a cache and a tally."""

    def __init__(self, backend: Backend, template: Template, cache: JudgmentCache, disagreement: str = "half",
                 chunk: int = 16):
        if disagreement not in DISAGREEMENT:
            raise KitError(f"disagreement {disagreement!r} is not one of {DISAGREEMENT}; fix the model settings")
        self.backend, self.template, self.cache = backend, template, cache
        self.disagreement, self.chunk = disagreement, chunk
        self.tally = Tally()

    def for_query(self, instruction: str, seed_text: str, texts: dict[str, str]) -> QueryJudge:
        """Judgments for one query; `texts` maps candidates to their text, in first-stage order."""
        return QueryJudge(self, instruction, seed_text, texts)


class QueryJudge:
    def __init__(self, judge: Judge, instruction: str, seed_text: str, texts: dict[str, str]):
        self.judge = judge
        t, cut = judge.template, judge.backend.truncate
        self.prompts = Prompts(
            prefix=t.prefix.format(instruction=cut(instruction, t.budgets["instruction"]),
                                   seed=cut(seed_text, t.budgets["seed"])) + SEPARATOR,
            suffixes=(), labels=t.labels, answer_prefix=t.answer_prefix, system=t.system)
        self.raw = texts
        self.texts = {doc: cut(text, t.budgets["candidate"]) for doc, text in texts.items()}
        self.rank = {doc: i for i, doc in enumerate(texts)}
        b = judge.backend
        self.base = (b.model, b.revision, t.digest, text_hash(seed_text), text_hash(instruction))
        self.memo: dict[tuple[str, str], float] = {}

    def _key(self, first: str, second: str) -> Key:
        texts = self.raw[first] + ("\0" + self.raw[second] if second else "")
        return Key(*self.base, first, second, text_hash(texts))

    def _suffix(self, first: str, second: str) -> str:
        if second:
            return self.judge.template.suffix.format(a=self.texts[first], b=self.texts[second])
        return self.judge.template.suffix.format(candidate=self.texts[first])

    def _probs(self, orders: Sequence[tuple[str, str]]) -> list[float]:
        """P(first label) for each (first, second) prompt ("" second: pointwise), from memo, cache or model."""
        tally, backend = self.judge.tally, self.judge.backend
        wanted = [o for o in dict.fromkeys(orders) if o not in self.memo]
        keys = {o: self._key(*o) for o in wanted}
        found = self.judge.cache.get(keys.values())
        missing = [o for o in wanted if keys[o] not in found]
        self.memo.update({o: found[keys[o]] for o in wanted if keys[o] in found})
        for start in range(0, len(missing), self.judge.chunk):
            part = missing[start:start + self.judge.chunk]
            before = copy.copy(backend.usage)
            probs = backend.first_label_probs(replace(self.prompts, suffixes=tuple(self._suffix(*o) for o in part)))
            tally.add_usage(before, backend.usage)
            self.judge.cache.put({keys[o]: p for o, p in zip(part, probs)})
            self.memo.update(zip(part, probs))
        tally.judgments += len(orders)
        tally.prompts_sent += len(missing)
        tally.cache_hits += len(orders) - len(missing)
        return [self.memo[o] for o in orders]

    def compare(self, pairs: Sequence[tuple[str, str]]) -> list[float]:
        """x's share of the win (1, 0.5 or 0) for every pair (x, y)."""
        tally = self.judge.tally
        probs = self._probs([o for x, y in pairs for o in ((x, y), (y, x))])
        shares = []
        for (x, y), p_xy, p_yx in zip(pairs, probs[0::2], probs[1::2]):
            tally.comparisons += 1
            tally.a_wins += (p_xy > 0.5) + (p_yx > 0.5)
            if p_xy > 0.5 and p_yx < 0.5:
                shares.append(1.0)
            elif p_xy < 0.5 and p_yx > 0.5:
                shares.append(0.0)
            else:
                tally.disagreements += 1
                shares.append(self._tie(x, y, p_xy, p_yx))
        return shares

    def _tie(self, x: str, y: str, p_xy: float, p_yx: float) -> float:
        """x's share when the two orders disagree."""
        if self.judge.disagreement == "keep":
            return float(self.rank[x] < self.rank[y])
        if self.judge.disagreement == "average":
            return (p_xy + 1.0 - p_yx) / 2
        return 0.5

    def relevance(self, docs: Sequence[str]) -> list[float]:
        """P(relevant) of every document (pointwise)."""
        return self._probs([(doc, "") for doc in docs])
