"""The one interface every LLM backend implements: which of two answer labels comes next."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True)
class Prompts:
    """User messages sharing one prefix: message i is ``prefix + suffixes[i]``.

    `labels` are the two answers compared; `answer_prefix` is text the answer starts
    with where the backend can prefill it; `system` an optional system message.
    """

    prefix: str
    suffixes: tuple[str, ...]
    labels: tuple[str, str]
    answer_prefix: str = ""
    system: str | None = None


@dataclass
class Usage:
    """What a backend has done so far (read before and after a call for its share)."""

    prompts: int = 0  # prompts scored by the model
    prompt_tokens: int = 0  # their length in tokens (API: as the server reports, else estimated)
    retries: int = 0  # requests repeated after a transient failure
    unparsed: int = 0  # answers naming neither label (scored 0.5)


class Backend(Protocol):
    """A language model scoring prompts by the probability of their first label."""

    model: str
    revision: str
    numerics: str  # what besides the weights changes the answers: dtype and device kind ("" for an API)
    usage: Usage

    def truncate(self, text: str, tokens: int) -> str:
        """The first `tokens` tokens of text (the backend's own notion of a token)."""

    def first_label_probs(self, prompts: Prompts) -> list[float]:
        """P(labels[0]) / (P(labels[0]) + P(labels[1])) for the answer of every prompt, in order."""
