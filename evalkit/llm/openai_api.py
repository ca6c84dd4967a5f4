"""An OpenAI-compatible chat completions endpoint (vLLM, commercial APIs) as a label judge.

Each prompt is one request (temperature 0) asking for `logprobs` and `top_logprobs`.
The first generated token that is one of the labels (stripped of spaces) gives
P(label 1) from the top log-probabilities of both labels; a label missing from the
top list is given the most it can have (the smallest listed probability, or the
mass left unlisted if smaller). Without log-probabilities the
first label named in the text wins outright (1.0 / 0.0); text naming neither scores
0.5 and counts as unparsed.

Transient failures (HTTP 429 and 5xx, timeouts, connection errors, bodies that are
not a chat completion) are retried with exponential backoff (``Retry-After``
honoured up to `backoff_max_s`), at most `max_retries` times per prompt; then, or at
once on any other HTTP error, a KitError names the endpoint and the last status.

Token budgets cut text into whitespace-separated words (an approximation: about
1.3 tokens a word for English prose).
"""

from __future__ import annotations

import http.client
import json
import math
import os
import re
import threading
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor

from evalkit.errors import KitError
from evalkit.llm.backend import Prompts, Usage

RETRY_STATUS = {429} | set(range(500, 600))


class _Transient(Exception):
    """A failure worth retrying; its text is the status reported if retries run out."""


def _label_prob(body: dict, labels: tuple[str, str]) -> float | None:
    """P(labels[0]) from the log-probabilities of the first label token generated, if any."""
    names = [label.strip() for label in labels]
    content = ((body["choices"][0].get("logprobs") or {}).get("content")) or []
    for step in content:
        if step.get("token", "").strip() not in names:
            continue
        listed = step.get("top_logprobs") or [{"token": step["token"], "logprob": step["logprob"]}]
        probs = [(alt["token"].strip(), math.exp(alt["logprob"])) for alt in listed]
        unlisted = max(min(min(p for _, p in probs), 1.0 - sum(p for _, p in probs)), 1e-12)
        first, second = (sum(p for token, p in probs if token == name) or unlisted for name in names)
        return first / (first + second)
    return None


def _text_prob(text: str, labels: tuple[str, str], answer_prefix: str) -> float | None:
    names = [label.strip() for label in labels]
    text = text.strip().removeprefix(answer_prefix.strip())
    found = re.search(r"\b(" + "|".join(map(re.escape, names)) + r")\b", text)
    return None if found is None else float(found.group(1) == names[0])


class OpenAIBackend:
    def __init__(self, base_url: str, model: str, api_key_env: str | None = None, revision: str | None = None,
                 timeout_s: float = 60.0, max_retries: int = 5, backoff_s: float = 1.0, backoff_max_s: float = 30.0,
                 concurrency: int = 4, top_logprobs: int = 5, max_tokens: int = 5, logprobs: bool = True):
        self.url = base_url.rstrip("/") + "/chat/completions"
        self.model = model
        self.revision = revision or model
        self.headers = {"Content-Type": "application/json"}
        if api_key_env:
            key = os.environ.get(api_key_env)
            if not key:
                raise KitError(f"environment variable {api_key_env} is empty; export the API key for {self.url}")
            self.headers["Authorization"] = f"Bearer {key}"
        self.timeout_s, self.max_retries = timeout_s, max_retries
        self.backoff_s, self.backoff_max_s = backoff_s, backoff_max_s
        self.concurrency = concurrency
        self.options = {"temperature": 0, "max_tokens": max_tokens}
        if logprobs:
            self.options |= {"logprobs": True, "top_logprobs": top_logprobs}
        self.usage = Usage()
        self._lock = threading.Lock()

    def truncate(self, text: str, tokens: int) -> str:
        words = text.split()
        return text if len(words) <= tokens else " ".join(words[:tokens])

    def _post(self, payload: bytes) -> dict:
        request = urllib.request.Request(self.url, data=payload, headers=self.headers, method="POST")
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_s) as response:
                raw = response.read()
        except urllib.error.HTTPError as exc:
            if exc.code in RETRY_STATUS:
                raise _Transient(f"HTTP {exc.code}", exc.headers.get("Retry-After")) from None
            raise KitError(f"{self.url} answered HTTP {exc.code} ({exc.reason}); check base_url, model "
                           "and the API key") from None
        except (TimeoutError, ConnectionError, http.client.HTTPException, urllib.error.URLError) as exc:
            raise _Transient(f"no answer ({getattr(exc, 'reason', exc)})", None) from None
        try:
            body = json.loads(raw)
            body["choices"][0]["message"]["content"]
        except (ValueError, KeyError, IndexError, TypeError):
            raise _Transient(f"malformed body {raw[:80]!r}", None) from None
        return body

    def _delay(self, attempt: int, retry_after: str | None) -> float:
        delay = self.backoff_s * 2 ** attempt
        if retry_after and retry_after.replace(".", "", 1).isdigit():
            delay = max(delay, float(retry_after))
        return min(delay, self.backoff_max_s)

    def _complete(self, payload: bytes) -> dict:
        attempt = 0
        while True:
            try:
                return self._post(payload)
            except _Transient as failure:
                status, retry_after = failure.args
                if attempt == self.max_retries:
                    raise KitError(f"{self.url}: no judgment after {attempt + 1} attempts (last: {status}); "
                                   "check the server or raise max_retries") from None
                with self._lock:
                    self.usage.retries += 1
                time.sleep(self._delay(attempt, retry_after))
                attempt += 1

    def _judge(self, prompts: Prompts, suffix: str) -> float:
        messages = ([{"role": "system", "content": prompts.system}] if prompts.system else []) + \
            [{"role": "user", "content": prompts.prefix + suffix}]
        payload = json.dumps({"model": self.model, "messages": messages, **self.options}).encode()
        body = self._complete(payload)
        prob = _label_prob(body, prompts.labels)
        if prob is None:
            prob = _text_prob(body["choices"][0]["message"]["content"] or "", prompts.labels, prompts.answer_prefix)
        tokens = (body.get("usage") or {}).get("prompt_tokens") or len((prompts.prefix + suffix).split())
        with self._lock:
            self.usage.prompts += 1
            self.usage.prompt_tokens += tokens
            self.usage.unparsed += prob is None
        return 0.5 if prob is None else prob

    def first_label_probs(self, prompts: Prompts) -> list[float]:
        with ThreadPoolExecutor(max_workers=self.concurrency) as pool:
            return list(pool.map(lambda suffix: self._judge(prompts, suffix), prompts.suffixes))
