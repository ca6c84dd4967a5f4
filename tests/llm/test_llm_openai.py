"""The OpenAI-compatible backend against a real HTTP server on 127.0.0.1 that misbehaves on cue."""

from __future__ import annotations

import json
import math
import time

import pytest
from fake_llm import LP_LOSE, LP_WIN, answer
from loopback import Loopback, chat_completion

from evalkit.core.errors import KitError
from evalkit.data.runs import ranked
from evalkit.llm import LLMReranker
from evalkit.llm.backend import Prompts
from evalkit.llm.openai_api import OpenAIBackend, _label_prob


class Server(Loopback):
    """Answers with `answer`, after the failures of its script."""

    def __init__(self):
        super().__init__()
        self.script: list[str] = []  # failures to inject, in order, before answering normally
        self.fallback = "ok"  # what to do once the script is used up
        self.logprobs = True
        self.requests: list[dict] = []

    def respond(self, payload, headers):
        with self.lock:
            self.requests.append({"payload": payload, "auth": headers.get("Authorization")})
            action = self.script.pop(0) if self.script else self.fallback
        if action == "429":
            return 429, b'{"error": "slow down"}', {"Retry-After": "0"}
        if action.isdigit():
            return int(action), b'{"error": "boom"}'
        if action == "sleep":
            time.sleep(0.6)
        if action == "malformed":
            return 200, b'{"choices": ['
        if action == "nested":  # a valid JSON document nested far deeper than any parser recurses
            return 200, b'{"choices": ' + b"[" * 200_000 + b"]" * 200_000 + b"}"
        if action == "nolabel":
            return 200, b'{"choices": [{"message": {"content": "I cannot tell."}}]}'
        return 200, answer(payload["messages"][-1]["content"], self.logprobs)


@pytest.fixture
def server():
    with Server() as srv:
        yield srv


def backend(server, **settings):
    options = {"base_url": server.url, "model": "test-model", "timeout_s": 0.3, "max_retries": 4, "backoff_s": 0.01,
               "max_in_flight": 1} | settings
    return OpenAIBackend(**options)


def pair_prompts(pairs) -> Prompts:
    return Prompts("Query: q\n\n", tuple(f"Passage A: doc{a}\n\nPassage B: doc{b}\n\nOutput:" for a, b in pairs),
                   (" A", " B"), answer_prefix="Passage")


P_WIN = 1 / (1 + math.exp(LP_LOSE - LP_WIN))


def test_injected_failures_are_retried_and_no_judgment_is_lost(server):
    server.script = ["429", "500", "sleep", "malformed", "ok", "503"]  # 4 retries, then 1
    api = backend(server)
    probs = api.first_label_probs(pair_prompts([(1, 2), (2, 1), (3, 7)]))
    assert probs == pytest.approx([P_WIN, 1 - P_WIN, P_WIN])
    assert api.usage.retries == 5 and api.usage.prompts == 3
    assert len(server.requests) == 3 + 5
    assert len({json.dumps(r["payload"]) for r in server.requests[:5]}) == 1  # the same prompt until it succeeds
    assert server.requests[0]["payload"]["logprobs"] is True and server.requests[0]["payload"]["temperature"] == 0


def test_a_permanently_failing_server_raises_after_the_retry_budget(server):
    server.fallback = "500"
    api = backend(server, max_retries=3)
    with pytest.raises(KitError, match=r"127\.0\.0\.1.*4 attempts.*HTTP 500"):
        api.first_label_probs(pair_prompts([(1, 2)]))
    assert len(server.requests) == 4


def test_timeouts_count_against_the_budget(server):
    server.fallback = "sleep"
    with pytest.raises(KitError, match=r"2 attempts.*no answer"):
        backend(server, max_retries=1).first_label_probs(pair_prompts([(1, 2)]))


def test_client_errors_are_not_retried(server):
    server.fallback = "401"
    with pytest.raises(KitError, match="HTTP 401"):
        backend(server).first_label_probs(pair_prompts([(1, 2)]))
    assert len(server.requests) == 1


def test_a_deeply_nested_answer_is_one_line_naming_the_server(server):
    """Not a RecursionError (from the JSON parser, through the API): the nesting is bounded before parsing."""
    server.fallback = "nested"
    api = backend(server, max_retries=3)
    with pytest.raises(KitError) as raised:
        api.first_label_probs(pair_prompts([(1, 2)]))
    line = str(raised.value)
    assert line.startswith(f"{server.url.rstrip('/')}/chat/completions: the server's answer nests more than 64 levels")
    assert "\n" not in line and len(server.requests) == 1  # a broken server: not asked again


def test_the_nesting_bound_reads_only_brackets_outside_strings():
    from evalkit.llm.openai_api import MAX_DEPTH, nested_too_deep

    assert not nested_too_deep(json.dumps({"choices": [{"message": {"content": "[[[[" * 100}}]}).encode())
    assert not nested_too_deep(b"[" * MAX_DEPTH + b"]" * MAX_DEPTH)
    assert nested_too_deep(b"[" * (MAX_DEPTH + 1) + b"]" * (MAX_DEPTH + 1))
    assert not nested_too_deep(b"[]" * 100_000)  # long, not deep


def test_without_logprobs_the_answer_text_decides(server):
    server.logprobs = False
    api = backend(server, logprobs=False)
    assert api.first_label_probs(pair_prompts([(1, 2), (5, 4)])) == [1.0, 0.0]
    assert "logprobs" not in server.requests[0]["payload"]
    yes_no = Prompts("Query: q\n\n", ("Candidate: doc4", "Candidate: doc5"), ("Yes", "No"))
    assert api.first_label_probs(yes_no) == [1.0, 0.0]


def test_an_answer_naming_no_label_is_retried_then_fails(server):
    server.fallback = "nolabel"
    api = backend(server, max_retries=2)
    with pytest.raises(KitError, match=r"3 attempts.*unparsed answer: no label"):
        api.first_label_probs(pair_prompts([(1, 2)]))
    assert api.usage.unparsed == 3 and len(server.requests) == 3
    server.script, server.fallback = ["nolabel"], "ok"
    assert api.first_label_probs(pair_prompts([(1, 2)])) == [pytest.approx(P_WIN)]


def test_api_key_comes_from_the_named_variable(server, monkeypatch):
    monkeypatch.delenv("EVALKIT_TEST_KEY", raising=False)
    with pytest.raises(KitError, match="EVALKIT_TEST_KEY"):
        backend(server, api_key_env="EVALKIT_TEST_KEY")
    monkeypatch.setenv("EVALKIT_TEST_KEY", "sk-test")
    backend(server, api_key_env="EVALKIT_TEST_KEY").first_label_probs(pair_prompts([(1, 2)]))
    assert server.requests[-1]["auth"] == "Bearer sk-test"


def test_whitespace_truncation():
    api = OpenAIBackend("http://127.0.0.1:9/v1", "m")
    assert api.truncate("one two  three four", 2) == "one two"
    assert api.truncate("one two", 5) == "one two"


def test_reranker_over_the_api_with_concurrency(server, tmp_path):
    server.script = ["429", "500"]
    settings = {"backend": "openai", "base_url": server.url, "model": "test-model", "backoff_s": 0.01,
                "max_in_flight": 4, "k": 3, "depth": 8, "cache": tmp_path / "j.sqlite"}
    docs = [f"{n:02d}" for n in (9, 4, 7, 1, 8, 3, 6, 2, 5)]
    candidates = [(d, f"doc{d} text") for d in docs]
    first_stage = {d: -i for i, d in enumerate(docs)}
    rr = LLMReranker(settings)
    order = ranked(rr.rerank("find the method", "seed", candidates, first_stage))
    assert order[:3] == ["01", "02", "03"]  # the server prefers small ids; "05" is past the depth
    stats = rr.accounting()
    assert stats["retries"] == 2 and stats["disagreement_share"] == 0.0 and stats["a_win_share"] == 0.5
    sent = len(server.requests)
    LLMReranker(settings).rerank("find the method", "seed", candidates, first_stage)
    assert len(server.requests) == sent


def test_label_missing_from_the_top_list_gets_the_most_it_can_have():
    def body(top):
        return chat_completion("Passage A", [(" A", top[0][1], top)])

    a, other = math.exp(-0.5), math.exp(-3.0)  # unlisted mass 1 - a - other > other: the bound is `other`
    assert _label_prob(body([(" A", -0.5), (" The", -3.0)]), (" A", " B")) == pytest.approx(a / (a + other))
    a, other = math.exp(-0.1), math.exp(-3.0)  # unlisted mass 1 - a - other < other
    assert _label_prob(body([(" A", -0.1), (" The", -3.0)]), (" A", " B")) == pytest.approx(a / (1 - other))
    assert _label_prob(body([(" B", -0.1), ("B", -3.0), (" A", -4.0)]), (" A", " B")) == pytest.approx(
        math.exp(-4.0) / (math.exp(-4.0) + math.exp(-0.1) + math.exp(-3.0)))
    assert _label_prob({"choices": [{"message": {"content": "A"}}]}, (" A", " B")) is None


def test_retry_after_is_honoured_up_to_the_cap():
    api = OpenAIBackend("http://127.0.0.1:9/v1", "m", backoff_s=1.0, backoff_max_s=30.0)
    assert api._delay(0, None) == 1.0 and api._delay(3, None) == 8.0 and api._delay(10, None) == 30.0
    assert api._delay(0, "5") == 5.0 and api._delay(0, "600") == 30.0 and api._delay(2, "soon") == 4.0
