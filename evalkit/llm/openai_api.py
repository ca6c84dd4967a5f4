"""An OpenAI-compatible chat completions endpoint (vLLM, commercial APIs) as a label judge.

Each prompt is one request (temperature 0) asking for `logprobs` and `top_logprobs`.
The first generated token that is one of the labels (stripped of spaces) gives
P(label 1) from the top log-probabilities of both labels; a label missing from the
top list is given the most it can have (the smallest listed probability, or the
mass left unlisted if smaller). Without log-probabilities the first label named in
the text wins outright (1.0 / 0.0).

An answer that yields no valid probability (no label, a log-probability that is
NaN, null, missing, positive or not a number, fields of the wrong type) is unparsed:
it is counted, never cached, and asked again like a transient failure.

Transient failures (HTTP 429 and 5xx, timeouts, connection errors, bodies that are
not a chat completion, unparsed answers) are retried with exponential backoff
(``Retry-After`` honoured up to `backoff_max_s`), at most `max_retries` times per
prompt; then, or at once on any other HTTP error, a KitError names the endpoint and
the last problem. `timeout_s` bounds each whole request (connecting, headers and
body), also against a server that trickles its answer or sends without end; a body is read
at most `MAX_BODY` bytes (16 MiB; a Content-Length above it is refused before reading).

With a server the kit starts (``serve: vllm``, `evalkit.llm.vllm_server`) the server starts on the
first request and a request failing after the server exited is an error at once.

Up to `max_in_flight` requests run at once (a thread pool shared by every call;
`submit` lets the scheduler keep it full across queries).

Token budgets cut text into whitespace-separated words (an approximation: about
1.3 tokens a word for English prose).
"""

from __future__ import annotations

import copy
import http.client
import json
import math
import os
import re
import socket
import threading
import time
import urllib.parse
from concurrent.futures import Future, ThreadPoolExecutor

from evalkit.core.errors import DataError, MissingPrerequisite
from evalkit.llm.backend import Prompts, Usage

RETRY_STATUS = {429} | set(range(500, 600))



def gathered(futures: list[Future]) -> list[float]:
    """The futures' results in order; those not yet run are cancelled when one fails (or on an interrupt)."""
    try:
        return [future.result() for future in futures]
    finally:
        for future in futures:
            future.cancel()

class _Transient(Exception):
    """A failure worth retrying; its text is the status reported if retries run out."""


class _Unparsed(Exception):
    """An answer without a valid label probability."""


def _logprob(value) -> float:
    """A log-probability as given by a server: a finite number <= 0 (tiny rounding above 0 allowed)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value > 1e-6:
        raise _Unparsed(f"log-probability {value!r}")
    return min(float(value), 0.0)


def _token(step) -> str:
    token = step.get("token") if isinstance(step, dict) else None
    if not isinstance(token, str):
        raise _Unparsed(f"token {token!r}")
    return token


def _label_prob(body: dict, labels: tuple[str, str]) -> float | None:
    """P(labels[0]) from the log-probabilities of the first label token generated; None if no
    label token was generated; _Unparsed if the log-probabilities are unusable."""
    names = [label.strip() for label in labels]
    logprobs = body["choices"][0].get("logprobs")
    content = logprobs.get("content") if isinstance(logprobs, dict) else None
    if logprobs is not None and not isinstance(logprobs, dict) or content is not None and not isinstance(content, list):
        raise _Unparsed("logprobs of the wrong type")
    for step in content or []:
        if _token(step).strip() not in names:
            continue
        listed = step.get("top_logprobs") or [{"token": step["token"], "logprob": step.get("logprob")}]
        if not isinstance(listed, list):
            raise _Unparsed("top_logprobs of the wrong type")
        probs = [(_token(alt).strip(), math.exp(_logprob(alt.get("logprob")))) for alt in listed]
        unlisted = max(min(min(p for _, p in probs), 1.0 - sum(p for _, p in probs)), 1e-12)
        first, second = (sum(p for token, p in probs if token == name) or unlisted for name in names)
        return first / (first + second)
    return None


def _text_prob(text: str, labels: tuple[str, str], answer_prefix: str) -> float | None:
    names = [label.strip() for label in labels]
    text = text.strip().removeprefix(answer_prefix.strip())
    found = re.search(r"\b(" + "|".join(map(re.escape, names)) + r")\b", text)
    return None if found is None else float(found.group(1) == names[0])


MAX_BODY = 16 << 20  # bytes: a chat completion of a few tokens is a few kB; more is a broken server


def _read_bounded(response, deadline: float, url: str) -> bytes:
    """The response body, read in blocks, at most `MAX_BODY` bytes and until `deadline`: a server
    announcing or sending more, or sending without end, is a one-line error, not a MemoryError."""
    length = response.getheader("Content-Length")
    if length is not None and length.strip().isdigit() and int(length) > MAX_BODY:
        raise DataError(url, f"the server announced a {int(length)}-byte answer (Content-Length), over the kit's "
                        f"bound of {MAX_BODY} bytes for a chat completion; check base_url points at a chat completions "
                        "API")
    parts, size = [], 0
    while True:
        if time.monotonic() >= deadline:
            raise TimeoutError
        block = response.read1(1 << 16) if hasattr(response, "read1") else response.read(1 << 16)
        if not block:
            return b"".join(parts)
        size += len(block)
        if size > MAX_BODY:
            raise DataError(url, f"the server sent more than {MAX_BODY} bytes for one chat completion; check base_url "
                            "points at a chat completions API")
        parts.append(block)


MAX_DEPTH = 64  # JSON nesting: a chat completion is about 6 levels deep; deeper is a broken server
_JSON_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"')
_BRACKETS = bytes.maketrans(b"", b"")


def nested_too_deep(raw: bytes, limit: int = MAX_DEPTH) -> bool:
    """Whether the JSON text `raw` opens more than `limit` arrays or objects inside one another
    (strings skipped), found without parsing it: a parser would recurse once a level, so a
    body nested thousands deep would end in a RecursionError."""
    brackets = _JSON_STRING.sub(b"", raw).translate(_BRACKETS, delete=bytes(set(range(256)) - set(b"[]{}")))
    depth = deepest = 0
    for opened in brackets.replace(b"]", b"}").replace(b"[", b"{").split(b"}"):
        depth += len(opened)
        deepest = max(deepest, depth)
        if deepest > limit:
            return True
        depth = max(depth - 1, 0)
    return False


def api_numerics(server: str, options: dict) -> str:
    """What besides the model, revision and template makes an API judgment (the judgment cache's
    `numerics` field): the server answering (its base_url, or a kit-started server's command) and
    the decoding options sent. Two servers never share judgments."""
    return json.dumps({"server": server, "decoding": options}, sort_keys=True)


class OpenAIBackend:
    def __init__(self, base_url: str, model: str, api_key_env: str | None = None, revision: str | None = None,
                 timeout_s: float = 60.0, max_retries: int = 5, backoff_s: float = 1.0, backoff_max_s: float = 30.0,
                 max_in_flight: int = 16, top_logprobs: int = 5, max_tokens: int = 5, logprobs: bool = True):
        self._point(base_url)
        self.model = model
        self.revision = revision or model
        self.options = {"temperature": 0, "max_tokens": max_tokens}
        if logprobs:
            self.options |= {"logprobs": True, "top_logprobs": top_logprobs}
        self.numerics = api_numerics(base_url.rstrip("/"), self.options)  # which server, how it decodes
        self.headers = {"Content-Type": "application/json"}
        if api_key_env:
            key = os.environ.get(api_key_env)
            if not key:
                raise MissingPrerequisite(f"environment variable {api_key_env} is empty",
                                          f"export the API key for {self.url}")
            self.headers["Authorization"] = f"Bearer {key}"
        if timeout_s <= 0 or max_retries < 0 or max_in_flight < 1:
            raise DataError("model settings",
                            f"timeout_s={timeout_s}, max_retries={max_retries}, max_in_flight={max_in_flight}: "
                            "give a positive timeout, retries >= 0 and at least one request in flight")
        self.timeout_s, self.max_retries = timeout_s, max_retries
        self.backoff_s, self.backoff_max_s = backoff_s, backoff_max_s
        self.max_in_flight = max_in_flight
        self.usage = Usage()
        self._lock = threading.Lock()
        self._pool: ThreadPoolExecutor | None = None
        self.server = None  # a server the kit started (`evalkit.llm.vllm_server`): started on the first request

    def _point(self, base_url: str) -> None:
        self.url = base_url.rstrip("/") + "/chat/completions"
        parts = urllib.parse.urlsplit(self.url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise DataError("model settings", f"base_url {base_url!r} is not an http(s) URL; e.g. http://localhost:8000/v1")
        path = parts.path + (f"?{parts.query}" if parts.query else "")
        self._target = (parts.scheme, parts.hostname, parts.port, path)

    def at(self, base_url: str, server=None) -> OpenAIBackend:
        """This backend (model, decoding options, key, timeouts, retries, `max_in_flight`) talking to
        another server of the same model, with usage and a thread pool of its own: one replica's
        (`evalkit.llm.replicas`). `numerics` stays this backend's."""
        other = copy.copy(self)
        other._point(base_url)
        other.usage, other._lock, other._pool, other.server = Usage(), threading.Lock(), None, server
        return other

    def truncate(self, text: str, tokens: int) -> str:
        words = text.split()
        return text if len(words) <= tokens else " ".join(words[:tokens])

    @staticmethod
    def _abort(sockets: list) -> None:
        """Cut a request at its deadline: a blocked read returns at once."""
        for sock in sockets:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def _post(self, payload: bytes) -> dict:
        scheme, host, port, path = self._target
        connection = http.client.HTTPSConnection if scheme == "https" else http.client.HTTPConnection
        conn = connection(host, port, timeout=self.timeout_s)
        deadline = time.monotonic() + self.timeout_s
        opened: list = []  # the socket, kept: http.client forgets it once a closing response starts
        watchdog = threading.Timer(self.timeout_s, self._abort, (opened,))
        watchdog.daemon = True
        watchdog.start()
        try:
            conn.connect()
            opened.append(conn.sock)
            if time.monotonic() >= deadline:
                raise TimeoutError
            conn.request("POST", path, body=payload, headers=self.headers)
            response = conn.getresponse()
            raw = _read_bounded(response, deadline, self.url)
        except (OSError, http.client.HTTPException) as exc:
            if time.monotonic() >= deadline:
                raise _Transient(f"no answer within timeout_s={self.timeout_s:g} s", None) from None
            raise _Transient(f"no answer ({exc.__class__.__name__}: {exc})", None) from None
        finally:
            watchdog.cancel()
            conn.close()
        if time.monotonic() >= deadline:
            raise _Transient(f"no answer within timeout_s={self.timeout_s:g} s", None)
        if response.status >= 400:
            if response.status in RETRY_STATUS:
                raise _Transient(f"HTTP {response.status}", response.getheader("Retry-After"))
            raise MissingPrerequisite(f"{self.url} answered HTTP {response.status} ({response.reason})",
                                      "check base_url, model and the API key")
        if nested_too_deep(raw):
            raise DataError(self.url, f"the server's answer nests more than {MAX_DEPTH} levels of JSON, which no chat "
                            "completion does; check base_url points at a chat completions API")
        try:
            body = json.loads(raw)
            message = body["choices"][0]["message"]
            if not isinstance(message, dict) or not isinstance(message.get("content"), (str, type(None))):
                raise TypeError
        except (ValueError, KeyError, IndexError, TypeError):
            raise _Transient(f"malformed body {raw[:80]!r}", None) from None
        return body

    def _delay(self, attempt: int, retry_after: str | None) -> float:
        delay = self.backoff_s * 2 ** attempt
        if retry_after and retry_after.replace(".", "", 1).isdigit():
            delay = max(delay, float(retry_after))
        return min(delay, self.backoff_max_s)

    @staticmethod
    def _prob(body: dict, prompts: Prompts) -> float:
        try:
            prob = _label_prob(body, prompts.labels)
            if prob is None:
                prob = _text_prob(body["choices"][0]["message"]["content"] or "", prompts.labels,
                                  prompts.answer_prefix)
        except (KeyError, IndexError, TypeError, AttributeError):
            raise _Unparsed("fields of the wrong type") from None
        if prob is None or not math.isfinite(prob) or not 0.0 <= prob <= 1.0:
            raise _Unparsed(f"no label in {str(body['choices'][0]['message']['content'])[:40]!r}")
        return prob

    def _complete(self, payload: bytes, prompts: Prompts) -> tuple[dict, float]:
        attempt = 0
        while True:
            try:
                body = self._post(payload)
                return body, self._prob(body, prompts)
            except _Transient as failure:
                status, retry_after = failure.args
            except _Unparsed as failure:
                status, retry_after = f"unparsed answer: {failure}", None
                with self._lock:
                    self.usage.unparsed += 1
            if self.server is not None:
                self.server.check()  # a server that died is one line at once, not retries until they run out
            if attempt == self.max_retries:
                raise MissingPrerequisite(f"{self.url}: no judgment after {attempt + 1} attempts (last: {status})",
                                          "check the server or raise max_retries") from None
            with self._lock:
                self.usage.retries += 1
            time.sleep(self._delay(attempt, retry_after))
            attempt += 1

    def _judge(self, prompts: Prompts, suffix: str) -> float:
        messages = ([{"role": "system", "content": prompts.system}] if prompts.system else []) + \
            [{"role": "user", "content": prompts.prefix + suffix}]
        payload = json.dumps({"model": self.model, "messages": messages, **self.options}).encode()
        body, prob = self._complete(payload, prompts)
        tokens = (body.get("usage") or {}).get("prompt_tokens") if isinstance(body.get("usage"), dict) else None
        if isinstance(tokens, bool) or not isinstance(tokens, int) or tokens < 0:
            tokens = len((prompts.prefix + suffix).split())
        with self._lock:
            self.usage.prompts += 1
            self.usage.prompt_tokens += tokens
        return prob

    def submit(self, prompts: Prompts) -> list[Future]:
        """One future per prompt, run by the shared pool of `max_in_flight` threads."""
        if self.server is not None:
            self.server.ensure_started()
        with self._lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(self.max_in_flight, thread_name_prefix="evalkit-api")
        return [self._pool.submit(self._judge, prompts, suffix) for suffix in prompts.suffixes]

    def first_label_probs(self, prompts: Prompts) -> list[float]:
        return gathered(self.submit(prompts))
