"""Fake LLM services shared by the LLM tests: a backend scoring from the doc ids in the prompt
(`FakeBackend`), the answers an OpenAI-compatible loopback server gives (`answer`), and a server
that sends its faults first (`FaultServer`) with the reranker settings pointing at it."""

from __future__ import annotations

import json
import re
import time

from loopback import Loopback, chat_completion

from evalkit.llm.backend import Prompts, Usage

LP_WIN, LP_LOSE = -0.2, -1.9  # log-probabilities the server gives the preferred and the other label
DOCS = [f"{n:02d}" for n in (9, 4, 7, 1, 8)]
CANDIDATES = [(d, f"doc{d} text") for d in DOCS]
FIRST = {d: -i for i, d in enumerate(DOCS)}


def answer(message: str, logprobs: bool) -> dict:
    """Prefers the smaller doc id (pairwise) or even doc numbers (pointwise), consistently in both orders."""
    docs = re.findall(r"doc(\d+)", message)
    if len(docs) == 2:
        win, lose = (" A", " B") if docs[0] < docs[1] else (" B", " A")
        text, steps = "Passage" + win, [("Passage", -0.01, []), (win, LP_WIN, [(win, LP_WIN), (lose, LP_LOSE)])]
    else:
        win, lose = ("Yes", "No") if int(docs[0]) % 2 == 0 else ("No", "Yes")
        text, steps = win, [(win, LP_WIN, [(win, LP_WIN), (lose, LP_LOSE)])]
    return chat_completion(text, steps if logprobs else (), prompt_tokens=len(message.split()))


class FakeBackend:
    """Scores from the doc ids in the prompt: pairwise `prefer(a, b)` = P("A"), pointwise `relevance[doc]`."""

    model, revision, numerics = "fake", "r1", ""

    def __init__(self, prefer=None, relevance=None):
        self.prefer, self.relevance = prefer, relevance
        self.usage = Usage()
        self.calls = 0

    def truncate(self, text: str, tokens: int) -> str:
        return " ".join(text.split()[:tokens])

    def first_label_probs(self, prompts: Prompts) -> list[float]:
        self.calls += 1
        self.usage.prompts += len(prompts.suffixes)
        self.usage.prompt_tokens += sum(len((prompts.prefix + s).split()) for s in prompts.suffixes)
        out = []
        for suffix in prompts.suffixes:
            docs = re.findall(r"\bdoc(\w+)", suffix)
            out.append(self.prefer(*docs) if len(docs) == 2 else self.relevance[docs[0]])
        return out


def trickle(body: bytes):
    """The body one byte at a time, 0.1 s apart."""
    for i in range(len(body)):
        yield body[i:i + 1]
        time.sleep(0.1)


class FaultServer(Loopback):
    """Sends its faults first, one a request, then good answers."""

    def __init__(self):
        super().__init__()
        self.faults: list = []  # bodies (or "trickle") to send first, in order; then good answers
        self.requests = 0

    def respond(self, payload, headers):
        with self.lock:
            self.requests += 1
            fault = self.faults.pop(0) if self.faults else None
        if fault == "trickle":  # a valid body, one byte every 0.1 s
            body = json.dumps(answer(payload["messages"][-1]["content"], True)).encode()
            return 200, trickle(body), {"Content-Length": str(len(body))}
        return 200, fault if fault is not None else answer(payload["messages"][-1]["content"], True)


def settings(server, tmp_path, **extra):
    return {"backend": "openai", "base_url": server.url, "model": "test-model",
            "timeout_s": 2.0, "max_retries": 2, "backoff_s": 0.0, "max_in_flight": 1, "k": 2, "depth": 4,
            "cache": tmp_path / "judgments.sqlite"} | extra
