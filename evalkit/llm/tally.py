"""Accounting of an LLM reranking run, for the run's JSON sidecar."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from evalkit.llm.backend import Usage


@dataclass
class Tally:
    queries: int = 0
    comparisons: int = 0  # pairwise comparisons asked for by the sorting (each one both orders)
    judgments: int = 0  # prompts needed (two per comparison, one per pointwise candidate)
    cache_hits: int = 0  # judgments found in the cache (or answered once for several queries)
    prompts_sent: int = 0  # judgments sent to the model
    # sliding window: the comparisons llm-rankers' bubblesort would ask (its `total_compare`: one
    # per pair, both orders in it) under the same judgments; None for the other variants
    llm_rankers_comparisons: int | None = None
    prompt_tokens: int = 0
    retries: int = 0  # requests repeated (transient failures and unparsed answers)
    unparsed: int = 0  # answers without a valid label probability (retried, never stored)
    disagreements: int = 0  # comparisons whose two orders disagree
    # Who won the disagreements: the order showing the winner as passage A decided
    # ("winner_first"), the order showing it as passage B ("winner_second"), neither order
    # preferred the winner ("neither", e.g. both exactly 0.5), or a tie (half a win each).
    disagreement_wins: dict = field(default_factory=lambda: dict.fromkeys(
        ("winner_first", "winner_second", "neither", "tie"), 0))
    disagreements_first_stage_kept: int = 0  # ... won by the document the first stage ranked higher
    a_wins: int = 0  # pairwise judgments won by the passage shown first
    wall_time_s: float = 0.0

    def add_usage(self, before: Usage, after: Usage) -> None:
        self.prompt_tokens += after.prompt_tokens - before.prompt_tokens
        self.retries += after.retries - before.retries
        self.unparsed += after.unparsed - before.unparsed

    def as_dict(self) -> dict:
        """Counts plus position bias: the share of comparisons whose orders disagree, of judgments "A" wins."""
        pairwise = 2 * self.comparisons
        return asdict(self) | {
            "disagreement_share": self.disagreements / self.comparisons if self.comparisons else None,
            "a_win_share": self.a_wins / pairwise if pairwise else None,
        }
