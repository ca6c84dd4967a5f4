"""LLM judgments of one query's candidates: pairwise in both orders, or pointwise; cached.

A comparison of x and y asks the model twice, x as passage A then y as passage A.
x wins only when both orders prefer it (P("A") > 0.5 with x first, < 0.5 with y
first). When they disagree (or either is exactly 0.5) the `disagreement` setting
decides:
- ``incumbent`` (default; llm-rankers' PRP, whose ``__gt__`` is true only when both orders
  agree): in the sorts the document already in place (heap parent, upper neighbour) stays,
  i.e. the challenger does not win; in all-pairs half a win each, as llm-rankers' allpair;
- ``half`` scores 0.5 each (a tie: all-pairs adds half a win to both, the sorts break it by
  first-stage order);
- ``keep`` lets the document ranked higher by the first stage win (in all-pairs a full win);
- ``average`` gives x the mean of its two win probabilities, P("A" | x first) and P("B" | y
  first), so the more confident order decides.
The tally records who won the disagreements (see `evalkit.llm.tally.Tally`).

Judgments are requested by step generators (`QueryJudge.pairwise`, `QueryJudge.pointwise`)
that yield the prompt orders still missing from memo and cache; `evalkit.llm.schedule`
answers them, for one query or many at once. A probability that is not a finite number in
[0, 1] is never stored.
"""

from __future__ import annotations

from collections.abc import Generator, Sequence
from dataclasses import replace

from evalkit.core.errors import DataError
from evalkit.llm.backend import Backend, Prompts
from evalkit.llm.cache import JudgmentCache, Key, text_hash
from evalkit.llm.schedule import run_tasks
from evalkit.llm.tally import Tally
from evalkit.llm.templates import SEPARATOR, Template

DISAGREEMENT = ("incumbent", "half", "keep", "average")
Order = tuple[str, str]  # (first, second) documents of a prompt; second "" for pointwise


class Judge:
    """Judgments for the queries of one reranker, sharing a backend, a template, a cache and a tally."""

    def __init__(self, backend: Backend, template: Template, cache: JudgmentCache, disagreement: str = "incumbent",
                 chunk: int = 64):
        if disagreement not in DISAGREEMENT:
            raise DataError("model settings",
                            f"disagreement {disagreement!r} is not one of {DISAGREEMENT}; fix the model settings")
        if chunk < 1:
            raise DataError("model settings", f"chunk={chunk} must be positive; fix the model settings")
        self.backend, self.template, self.cache = backend, template, cache
        self.disagreement, self.chunk = disagreement, chunk
        self.tally = Tally()

    def for_query(self, instruction: str, seed_text: str, texts: dict[str, str], sorting: bool = True) -> QueryJudge:
        """Judgments for one query; `texts` maps candidates to their text, in first-stage order.
        `sorting`: pairs come from a sort as (challenger, incumbent), else from all-pairs."""
        return QueryJudge(self, instruction, seed_text, texts, sorting)


class QueryJudge:
    def __init__(self, judge: Judge, instruction: str, seed_text: str, texts: dict[str, str], sorting: bool = True):
        self.judge, self.sorting = judge, sorting
        t, cut = judge.template, judge.backend.truncate
        self.prompts = Prompts(
            prefix=t.prefix.format(instruction=cut(instruction, t.budgets["instruction"]),
                                   seed=cut(seed_text, t.budgets["seed"])) + SEPARATOR,
            suffixes=(), labels=t.labels, answer_prefix=t.answer_prefix, system=t.system)
        self.raw = texts
        self.texts = {doc: cut(text, t.budgets["candidate"]) for doc, text in texts.items()}
        self.rank = {doc: i for i, doc in enumerate(texts)}
        b = judge.backend
        self.base = (b.model, b.revision, b.numerics, t.digest, text_hash(seed_text), text_hash(instruction))
        self.memo: dict[Order, float] = {}

    def key(self, order: Order) -> Key:
        first, second = order
        texts = self.raw[first] + ("\0" + self.raw[second] if second else "")
        return Key(*self.base, first, second, text_hash(texts))

    def _suffix(self, first: str, second: str) -> str:
        if second:
            return self.judge.template.suffix.format(a=self.texts[first], b=self.texts[second])
        return self.judge.template.suffix.format(candidate=self.texts[first])

    def prompts_for(self, orders: Sequence[Order]) -> Prompts:
        return replace(self.prompts, suffixes=tuple(self._suffix(*o) for o in orders))

    def fill(self, orders: Sequence[Order]) -> Generator[list[Order], list[float], None]:
        """Memo and cache the probabilities of `orders`; yields those still missing, to be answered."""
        tally = self.judge.tally
        wanted = [o for o in dict.fromkeys(orders) if o not in self.memo]
        keys = {o: self.key(o) for o in wanted}
        found = self.judge.cache.get(keys.values())
        self.memo.update({o: found[keys[o]] for o in wanted if keys[o] in found})
        missing = [o for o in wanted if keys[o] not in found]
        tally.judgments += len(orders)
        tally.cache_hits += len(orders) - len(missing)
        if missing:
            probs = yield missing
            self.memo.update(zip(missing, probs))

    def pairwise(self, steps: Generator) -> Generator[list[Order], list[float], object]:
        """A sort's step generator (pairs -> shares) as one yielding the prompts it needs."""
        try:
            pairs = next(steps)
            while True:
                yield from self.fill([o for x, y in pairs for o in ((x, y), (y, x))])
                pairs = steps.send(self._shares(pairs))
        except StopIteration as stop:
            return stop.value

    def pointwise(self, docs: Sequence[str]) -> Generator[list[Order], list[float], list[float]]:
        """P(relevant) of every document."""
        orders = [(doc, "") for doc in docs]
        yield from self.fill(orders)
        return [self.memo[o] for o in orders]

    def share_of(self, x: str, y: str) -> float:
        """x's share of the win against y from the judgments already made (no tally, no model)."""
        p_xy, p_yx = self.memo[x, y], self.memo[y, x]
        if p_xy > 0.5 and p_yx < 0.5:
            return 1.0
        if p_xy < 0.5 and p_yx > 0.5:
            return 0.0
        return self._tie(x, y, p_xy, p_yx)

    def _shares(self, pairs: Sequence[Order]) -> list[float]:
        tally = self.judge.tally
        shares = []
        for x, y in pairs:
            p_xy, p_yx = self.memo[x, y], self.memo[y, x]
            tally.comparisons += 1
            tally.a_wins += (p_xy > 0.5) + (p_yx > 0.5)
            share = self.share_of(x, y)
            if not ((p_xy > 0.5 and p_yx < 0.5) or (p_xy < 0.5 and p_yx > 0.5)):
                self._record(x, y, p_xy, p_yx, share)
            shares.append(share)
        return shares

    def _tie(self, x: str, y: str, p_xy: float, p_yx: float) -> float:
        """x's share when the two orders disagree."""
        rule = self.judge.disagreement
        if rule == "incumbent":
            return 0.0 if self.sorting else 0.5
        if rule == "keep":
            return float(self.rank[x] < self.rank[y])
        if rule == "average":
            return (p_xy + 1.0 - p_yx) / 2
        return 0.5

    def _record(self, x: str, y: str, p_xy: float, p_yx: float, share: float) -> None:
        tally = self.judge.tally
        tally.disagreements += 1
        if share == 0.5 and self.sorting:  # the sorts break a tie by first-stage order
            winner = x if self.rank[x] < self.rank[y] else y
        else:
            winner = x if share > 0.5 else y if share < 0.5 else None
        if winner is None:
            tally.disagreement_wins["tie"] += 1
            return
        # P(winner as A | winner shown first), P(winner as A | winner shown second)
        shown_first, shown_second = (p_xy, p_yx) if winner == x else (p_yx, p_xy)
        outcome = "winner_first" if shown_first > 0.5 else "winner_second" if shown_second < 0.5 else "neither"
        tally.disagreement_wins[outcome] += 1
        loser = y if winner == x else x
        tally.disagreements_first_stage_kept += self.rank[winner] < self.rank[loser]

    def compare(self, pairs: Sequence[Order]) -> list[float]:
        """x's share of the win (1, 0.5 or 0) for every pair (x, y), judged now."""
        def once():
            return (yield list(pairs))

        return run_tasks(self.judge, [(self, self.pairwise(once()))])[0]

    def relevance(self, docs: Sequence[str]) -> list[float]:
        """P(relevant) of every document (pointwise), judged now."""
        return run_tasks(self.judge, [(self, self.pointwise(docs))])[0]
