"""The one scoring interface every model implements."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from evalkit.csfcube import Paper
from evalkit.instructions import Request


class Scorer(Protocol):
    """Scores candidates for a request; higher scores rank first."""

    #: True when the model reads the instruction (instructed embedders, LLM rerankers).
    reads_instruction: bool

    def prepare(self, papers: Sequence[Paper]) -> None:
        """Optional bulk work before scoring (e.g. encode every candidate once)."""

    def score(self, request: Request, candidates: Sequence[Paper]) -> dict[str, float]:
        """{candidate pid: score} for every candidate."""

    def describe(self) -> dict:
        """Settings that identify the model's output (for sidecars and cache keys)."""
