"""The study notebooks' one parameter contract and its checks.

Every study notebook declares the subset of these papermill parameters it uses (none it
does not) and hands them to `check`, which raises a one-line `KitError` on a bad value
before any model is built:

- ``PROFILE``: a profile of `evalkit/config/models.yaml` (offline | paper);
- ``PROTOCOL``: pool | released | pooled | full (`evalkit.runner.PROTOCOLS`);
- ``MODELS``: comma-separated model names; empty means the profile's study list for the notebook;
- ``REFERENCE_MODEL``: the significance reference; empty means the profile's;
- ``DISCOUNT``: csfcube | trec, i.e. the measure nDCG_csfcube@20 | nDCG@20;
- ``SEEDS``: comma-separated seed paper ids for a smoke run (their queries only); empty means all;
- ``OUTPUT_DIR``: tables go to OUTPUT_DIR/tables; ``FIGURES_DIR``: figures; ``RUNS_DIR``: runs;
- ``CORPUS``: the full protocol's abstracts-preds.zip.

Output names carry a tag, PROFILE-PROTOCOL, and for smoke runs ``-smoke-HASH`` of the
sorted seed ids (the Makefile computes the same), so smoke outputs never overwrite full ones.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

from evalkit.collection import Collection
from evalkit.errors import KitError
from evalkit.models import registry
from evalkit.runner import PROTOCOLS, RunSettings

DISCOUNTS = {"csfcube": "nDCG_csfcube@20", "trec": "nDCG@20"}
BOOTSTRAP_SEED = 0
# Each notebook's default model list: the profile's `study` entry of this name.
STUDY_LISTS = {"relevance": "relevance", "instruction_following": "relevance", "sensitivity": "sensitivity",
               "hybrid": "hybrid", "promptriever": "promptriever", "summary": None}


@dataclass(frozen=True)
class Study:
    """Checked parameters of one notebook."""

    profile: str
    protocol: str
    tag: str
    models: tuple[str, ...] = ()
    reference: str | None = None
    measure: str | None = None
    seeds: tuple[str, ...] | None = None
    output_dir: Path = Path("build")
    figures_dir: Path = Path("figures")
    runs_dir: Path = Path("runs")
    corpus: str | None = None

    @property
    def tables_dir(self) -> Path:
        return Path(self.output_dir) / "tables"

    def name(self, table: str) -> str:
        """A table or figure name with the build tag: e.g. relevance-offline-pool."""
        return f"{table}-{self.tag}"

    def queries(self, collection: Collection) -> tuple[str, ...] | None:
        """The query ids of the smoke seeds, in collection order; None for every query."""
        if self.seeds is None:
            return None
        by_seed = [q for q in collection.queries.values() if q.seed is not None and q.seed.doc_id in self.seeds]
        missing = sorted(set(self.seeds) - {q.seed.doc_id for q in by_seed})
        if missing:
            raise KitError(f"SEEDS: {missing[0]} is no seed of {collection.name}; list seed paper ids")
        return tuple(q.qid for q in by_seed)

    def settings(self, model: str, collection: Collection, variant: str = "base",
                 prompt: str | None = None) -> RunSettings:
        return RunSettings(model, collection.name, self.profile, self.protocol, variant, prompt,
                           queries=self.queries(collection), corpus=self.corpus)

    def describe(self) -> str:
        parts = [f"tag {self.tag}"]
        if self.models:
            parts.append(f"models {', '.join(self.models)}")
        if self.reference:
            parts.append(f"reference {self.reference}")
        if self.measure:
            parts.append(f"measure {self.measure}")
        parts.append(f"seeds {', '.join(self.seeds) if self.seeds else 'all'}")
        return " | ".join(parts)


def split(value: str) -> list[str]:
    return [v.strip() for v in str(value).split(",") if v.strip()]


def seeds_of(value: str) -> tuple[str, ...] | None:
    """The smoke seeds of SEEDS (sorted, unique); None when SEEDS is empty (every query)."""
    seeds = sorted(set(split(value)))
    if value.strip() and not seeds:
        raise KitError(f"SEEDS={value!r} lists no seed id; give comma-separated seed paper ids or leave it empty")
    return tuple(seeds) or None


def build_tag(profile: str, protocol: str, seeds: str = "") -> str:
    """PROFILE-PROTOCOL, plus -smoke-HASH (sha256 of the sorted seed ids joined by commas)."""
    chosen = seeds_of(seeds)
    tag = f"{profile}-{protocol}"
    return tag if chosen is None else f"{tag}-smoke-{hashlib.sha256(','.join(chosen).encode()).hexdigest()[:8]}"


def _models(profile: str, notebook: str, models: str) -> tuple[str, ...]:
    study = registry.profile_settings(profile).get("study", {})
    default = study.get(STUDY_LISTS[notebook])
    names = split(models) or ([default] if isinstance(default, str) else list(default or []))
    if not names:
        raise KitError(f"MODELS is empty and profile {profile} lists no {notebook} models; name some models")
    for name in names:
        registry.spec(name, profile)  # one-line error listing the valid names
    return tuple(dict.fromkeys(names))


def check(notebook: str, PROFILE: str, PROTOCOL: str, SEEDS: str = "", OUTPUT_DIR: str = "build",  # noqa: N803
          FIGURES_DIR: str = "figures", RUNS_DIR: str = "runs", CORPUS: str = "", MODELS: str | None = None,
          REFERENCE_MODEL: str | None = None, DISCOUNT: str | None = None) -> Study:
    """Check a notebook's parameters (those it declares; None = not declared) and return them."""
    if notebook not in STUDY_LISTS:
        raise KitError(f"unknown study notebook {notebook!r}; choose one of {', '.join(STUDY_LISTS)}")
    registry.profile_settings(PROFILE)
    if PROTOCOL not in PROTOCOLS:
        raise KitError(f"unknown protocol {PROTOCOL!r}; choose one of {', '.join(PROTOCOLS)}")
    if PROTOCOL == "full" and not CORPUS:
        raise KitError("the full protocol needs CORPUS=PATH (abstracts-preds.zip from figshare 14796339)")
    if CORPUS and not Path(CORPUS).is_file():
        raise KitError(f"CORPUS {CORPUS} is not a file; give the path of abstracts-preds.zip")
    measure = None
    if DISCOUNT is not None:
        if DISCOUNT not in DISCOUNTS:
            raise KitError(f"unknown DISCOUNT {DISCOUNT!r}; choose one of {', '.join(DISCOUNTS)}")
        measure = DISCOUNTS[DISCOUNT]
    models = _models(PROFILE, notebook, MODELS) if MODELS is not None else ()
    reference = None
    if REFERENCE_MODEL is not None:
        reference = REFERENCE_MODEL or registry.profile_settings(PROFILE).get("study", {}).get("reference", "")
        registry.spec(reference, PROFILE)
        if reference not in models:
            raise KitError(f"REFERENCE_MODEL {reference} is not among the models run; add it to MODELS")
    return Study(PROFILE, PROTOCOL, build_tag(PROFILE, PROTOCOL, SEEDS), models, reference, measure,
                 seeds_of(SEEDS), Path(OUTPUT_DIR), Path(FIGURES_DIR), Path(RUNS_DIR), CORPUS or None)
