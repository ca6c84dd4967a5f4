"""Running the judgments of many queries at once, with results independent of timing.

Each task is a query's step generator (`QueryJudge.pairwise` / `.pointwise`): it yields
the prompt orders it still needs and is sent their probabilities. Sorts are sequential
within a query, but queries are independent, so the scheduler keeps every unfinished
query's next request open at the same time:

- a backend with ``submit(prompts) -> [Future]`` (the OpenAI-compatible one: a thread pool
  of ``max_in_flight`` requests) gets every request as soon as its query asks, and a query
  resumes as soon as its own answers are in, so the pool never waits for the slowest query;
- any other backend gets the requests of all waiting queries together, `chunk` prompts per
  call (`first_label_probs_many` when it has one: the transformers backend batches prompts
  of different queries into one forward pass).

A query's generator only ever sees its own answers, in its own order, so judgments,
rankings and cache contents are those of running the queries one after the other; a
prompt needed by two queries at once is asked once (the second counts as a cache hit).
Answers are committed to the cache as they arrive, so a killed run resumes from it.
"""

from __future__ import annotations

import copy
from collections.abc import Generator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, wait
from typing import Protocol

from evalkit.core import progress
from evalkit.core.errors import DataError
from evalkit.llm.backend import Backend, Prompts
from evalkit.llm.cache import JudgmentCache, Key, valid_prob
from evalkit.llm.tally import Tally


class QueryJudge(Protocol):
    """What the scheduler reads of one query's judge (`evalkit.llm.judge.QueryJudge`): the cache key
    of a prompt order and the prompts of some orders. The judge calls the scheduler, never the other
    way round, so the scheduler names only these."""

    def key(self, order: tuple[str, str]) -> Key: ...

    def prompts_for(self, orders: Sequence[tuple[str, str]]) -> Prompts: ...


class Judge(Protocol):
    """What the scheduler reads of a judge (`evalkit.llm.judge.Judge`): the backend it asks, the
    cache it fills, the tally it counts on and how many prompts go in one batched call."""

    backend: Backend
    cache: JudgmentCache
    tally: Tally
    chunk: int


Task = tuple[QueryJudge, Generator]


def _checked(judge: Judge, probs: list) -> list[float]:
    bad = [p for p in probs if not valid_prob(p)]
    if bad:
        raise DataError(judge.backend.model, f"gave {bad[0]!r} as a label probability; nothing was cached. "
                        "Check the model (e.g. a float16 overflow: use dtype bfloat16 or float32)")
    return [float(p) for p in probs]


def run_tasks(judge: Judge, tasks: Sequence[Task], limit: int | None = None, expected: int | None = None,
              unit: str = "comparison", desc: str = "LLM") -> list:
    """The return values of the tasks' generators, in task order; at most `limit` queries open at once.

    With `expected` (the caller's estimate of the tasks' comparisons, or judgments when `unit`
    is ``judgment``), a progress bar (`evalkit.core.progress`) counts them as the sorts advance,
    cached ones included, with the prompts sent to the model beside it."""
    backend, tally = judge.backend, judge.tally
    before = copy.copy(backend.usage)
    tracker = _Tracker(judge, expected, unit, desc)
    try:
        if callable(getattr(backend, "submit", None)):
            return _run_async(judge, list(tasks), limit or len(tasks), tracker)
        return _run_batched(judge, list(tasks), limit or len(tasks), tracker)
    finally:
        tracker.close()
        tally.add_usage(before, backend.usage)


class _Tracker:
    """The progress bar of one `run_tasks` call, read off the judge's tally."""

    def __init__(self, judge: Judge, expected: int | None, unit: str, desc: str):
        self.tally, self.unit = judge.tally, unit
        self.start = self._count()
        self.sent = judge.tally.prompts_sent
        self.bar = progress.bar(total=expected, desc=desc, unit=unit, disable=expected is None)

    def _count(self) -> int:
        return self.tally.comparisons if self.unit == "comparison" else self.tally.judgments

    def update(self) -> None:
        done = self._count() - self.start
        if done > self.bar.n:
            self.bar.update(done - self.bar.n)
        self.bar.set_postfix_str(f"prompts sent {self.tally.prompts_sent - self.sent}", refresh=False)

    def close(self) -> None:
        self.update()
        if self.bar.total is not None and self.bar.n != self.bar.total:
            self.bar.total = self.bar.n  # the estimate was an upper bound: end at 100 %
            self.bar.refresh()
        self.bar.close()


class _Open:
    """One started task and its pending request."""

    __slots__ = ("index", "query", "gen", "orders", "digests")

    def __init__(self, index: int, query: QueryJudge, gen: Generator):
        self.index, self.query, self.gen = index, query, gen
        self.orders: list = []
        self.digests: list[str] = []


def _advance(task: _Open, answer, results: list) -> bool:
    """Send the answer (None: start); True if the task now waits on a request."""
    try:
        task.orders = task.gen.send(answer) if answer is not None else next(task.gen)
    except StopIteration as stop:
        results[task.index] = stop.value
        return False
    task.digests = [task.query.key(o).digest for o in task.orders]
    return True


def _run_batched(judge: Judge, tasks: list[Task], limit: int, tracker: _Tracker) -> list:
    results: list = [None] * len(tasks)
    queue = iter(enumerate(tasks))
    waiting: list[_Open] = []

    def start(count: int) -> None:
        """Open up to `count` more queries (one that needs no prompt finishes at once and does not count)."""
        while count > 0:
            item = next(queue, None)
            if item is None:
                return
            index, (query, gen) = item
            task = _Open(index, query, gen)
            if _advance(task, None, results):
                waiting.append(task)
                count -= 1

    start(limit)
    while waiting:
        unique: dict[str, tuple[QueryJudge, tuple]] = {}
        for task in waiting:
            for order, digest in zip(task.orders, task.digests):
                unique.setdefault(digest, (task.query, order))
        asked = sum(len(t.orders) for t in waiting)
        judge.tally.prompts_sent += len(unique)
        judge.tally.cache_hits += asked - len(unique)
        answers: dict[str, float] = {}
        items = list(unique.items())
        for start_at in range(0, len(items), judge.chunk):
            part = items[start_at:start_at + judge.chunk]
            groups: dict[int, tuple[QueryJudge, list]] = {}
            for digest, (query, order) in part:
                groups.setdefault(id(query), (query, []))[1].append((digest, order))
            prompts = [q.prompts_for([o for _, o in entries]) for q, entries in groups.values()]
            many = getattr(judge.backend, "first_label_probs_many", None)
            probs = many(prompts) if many else [judge.backend.first_label_probs(p) for p in prompts]
            found = {}
            for (query, entries), group_probs in zip(groups.values(), probs):
                group_probs = _checked(judge, list(group_probs))
                for (digest, order), p in zip(entries, group_probs):
                    found[query.key(order)] = p
                    answers[digest] = p
            judge.cache.put(found)
            tracker.update()
        resumed = []
        finished = 0
        for task in waiting:
            if _advance(task, [answers[d] for d in task.digests], results):
                resumed.append(task)
            else:
                finished += 1
        waiting = resumed
        start(finished)
        tracker.update()
    return results


def _run_async(judge: Judge, tasks: list[Task], limit: int, tracker: _Tracker) -> list:
    results: list = [None] * len(tasks)
    queue = iter(enumerate(tasks))
    ready: list[tuple[_Open, object]] = []
    waiting: list[_Open] = []
    inflight: dict[str, Future] = {}
    meta: dict[Future, tuple] = {}  # future -> (digest, key)
    answers: dict[str, float] = {}

    def start(count: int) -> None:
        for _ in range(count):
            item = next(queue, None)
            if item is None:
                return
            index, (query, gen) = item
            ready.append((_Open(index, query, gen), None))

    def submit(task: _Open) -> None:
        new = []
        for order, digest in zip(task.orders, task.digests):
            if digest in answers or digest in inflight:
                judge.tally.cache_hits += 1
            else:
                new.append((order, digest))
                inflight[digest] = None  # reserved below
        if not new:
            return
        judge.tally.prompts_sent += len(new)
        futures = judge.backend.submit(task.query.prompts_for([o for o, _ in new]))
        for (order, digest), future in zip(new, futures):
            inflight[digest] = future
            meta[future] = (digest, task.query.key(order))

    start(limit)
    try:
        while ready or waiting:
            while ready:
                task, answer = ready.pop()
                if not _advance(task, answer, results):
                    start(1)
                    continue
                submit(task)
                waiting.append(task)
            still = []
            for task in waiting:
                if all(d in answers for d in task.digests):
                    ready.append((task, [answers[d] for d in task.digests]))
                else:
                    still.append(task)
            waiting = still
            if ready or not waiting:
                continue
            done, _ = wait(list(meta), return_when=FIRST_COMPLETED)
            stored, failure = {}, None
            for future in done:
                digest, key = meta.pop(future)
                del inflight[digest]
                try:
                    p = _checked(judge, [future.result()])[0]
                except Exception as exc:  # keep what arrived, then fail
                    failure = failure or exc
                    continue
                stored[key] = p
                answers[digest] = p
            judge.cache.put(stored)
            tracker.update()
            if failure is not None:
                raise failure
    finally:
        for future in meta:
            future.cancel()
    return results
