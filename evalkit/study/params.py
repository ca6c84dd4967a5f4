"""The study notebooks' one parameter contract and its checks.

Every study notebook declares the subset of these papermill parameters it uses (none it
does not) and hands them to `check`, which raises a one-line `KitError` on a bad value
before any model is built:

- ``PROFILE``: a profile of `evalkit/config/models.yaml` (offline | paper);
- ``PROTOCOL``: pool | released | pooled | full (`evalkit.data.protocols.PROTOCOLS`);
- ``MODELS``: comma-separated model names (registry names or ``st:PATH_OR_HUB_ID`` specs,
  `evalkit.models.adhoc`); empty means the profile's study list for the notebook;
- ``REFERENCE_MODEL``: the significance reference; empty means the profile's ``study.reference``,
  or the first of MODELS when the profile names none or its reference is not among them;
- ``INSTRUCTIONS``: a user's instruction file (`evalkit.datasets.csfcube_variants`); empty means
  the kit's `config/instructions.yaml`;
- ``DISCOUNT``: csfcube | trec, i.e. the measure nDCG_csfcube@20 | nDCG@20;
- ``SEEDS``: comma-separated seed paper ids for a smoke run (their queries only); empty means all;
- ``OUTPUT_DIR``: tables go to OUTPUT_DIR/tables; ``FIGURES_DIR``: figures; ``RUNS_DIR``: runs;
- ``CORPUS``: the full protocol's abstracts-preds.zip; empty means the file `evalkit data --corpus`
  downloaded.

A row whose prerequisites are missing (no key, no server, no GPU) or whose run fails with a kit
error becomes "not run: <reason>" in the tables (`evalkit.study.rows`) unless ``EVALKIT_STRICT=1``
(``make ... STRICT=1``) asks to stop at the first.

- ``OFFICIAL`` (relevance): ``yes`` adds the release's official measures (MAP_csfcube,
  nDCG_csfcube%20) of every model beside the published CSFCube record, on a pool protocol;
- ``TAG``: the build tag naming the outputs; empty means computed from the parameters.

Output names carry a tag (`evalkit.study.tag`): PROFILE-PROTOCOL, ``-smoke-HASH`` for smoke
runs and ``-custom-HASH`` when a parameter changes the table's rows (the Makefile computes the
same and passes it as TAG), so neither ever overwrites the full study's outputs. Relative
folders resolve against the checkout when the kit runs from one (`evalkit.core.workspace`), so a
notebook started in JupyterLab from `notebooks/` writes where make does.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from pathlib import Path

from IPython import get_ipython

from evalkit.core.errors import NOTEBOOK, DataError, KitError, RequestError
from evalkit.core.names import is_plain
from evalkit.core.workers import parse_workers
from evalkit.core.workspace import resolve
from evalkit.data.collection import Collection, select_queries, selection_ids
from evalkit.data.protocols import POOL_PROTOCOLS
from evalkit.datasets import csfcube, full_corpus
from evalkit.datasets.csfcube import TABLE
from evalkit.datasets.csfcube_variants import load_instructions
from evalkit.evaluation import evaluate as evaluation
from evalkit.evaluation.request import EvaluationRequest, check_options
from evalkit.models import registry
from evalkit.pipeline import prerequisites
from evalkit.pipeline.runner import RunSettings, instructions_identity
from evalkit.pipeline.settings import check_execution
from evalkit.study import edited
from evalkit.study.tag import build_tag

STRICT_ENV = "EVALKIT_STRICT"
EXECUTOR_ENV, WORKERS_ENV = "EVALKIT_EXECUTOR", "EVALKIT_WORKERS"  # make's EXECUTOR= and WORKERS=
DISCOUNTS = {discount: f"{family}@{TABLE.k}" for discount, family in evaluation.DISCOUNTS.items()}  # -> nDCG@20
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
    instructions: str | None = None  # a user's instruction file; None: the kit's
    official: bool = False  # the relevance notebook adds the release's official measures
    strict: bool = False  # stop at the first row that cannot run (else it becomes "not run: <reason>")
    executor: str = "local"  # where whole corpora are encoded and searched (EXECUTOR: local or ray)
    workers: int | None = None  # Ray workers (WORKERS)
    notebook: str | None = None  # the study notebook checking them (None: a script)

    @property
    def output_tag(self) -> str:
        """The tag outputs are named with now: `tag`, plus ``-edited-HASH`` when the cells this kernel
        has run so far are not the kit notebook's (`evalkit.study.edited`; make's tag already says so)."""
        if self.notebook is None or edited.MARK in self.tag:
            return self.tag
        return self.tag + edited.history_part(self.notebook, executed_cells())

    @property
    def tables_dir(self) -> Path:
        return Path(self.output_dir) / "tables"

    def name(self, table: str) -> str:
        """A table or figure name with the build tag (`output_tag`): e.g. relevance-offline-pool."""
        return f"{table}-{self.output_tag}"

    def queries(self, collection: Collection) -> tuple[str, ...] | None:
        """The query ids of the smoke seeds, in collection order; None for every query
        (`evalkit.data.collection.select_queries`, the rule of every front end)."""
        try:
            return select_queries(collection, seeds=self.seeds)
        except KitError as exc:
            raise exc.for_front_end(NOTEBOOK) from None

    def settings(self, model: str, collection: Collection, variant: str = "base",
                 prompt: str | None = None) -> RunSettings:
        return RunSettings(model=model, dataset=collection.name, profile=self.profile, protocol=self.protocol,
                           variant=variant, prompt=prompt, queries=self.queries(collection), corpus=self.corpus,
                           instructions=self.instructions, executor=self.executor, workers=self.workers)

    def with_models(self, models: list[str]) -> Study:
        return replace(self, models=tuple(models))

    def describe(self) -> str:
        tag = self.output_tag
        parts = [f"tag {tag}" + (" (an edited study: this notebook's code, or another of its build's, is not the kit's)"
                                 if edited.MARK in tag else "")]
        if self.models:
            parts.append(f"models {', '.join(self.models)}")
        if self.reference:
            parts.append(f"reference {self.reference}")
        if self.measure:
            parts.append(f"measure {self.measure}")
        parts.append(f"seeds {', '.join(self.seeds) if self.seeds else 'all'}")
        if self.instructions:
            found = instructions_identity(self.instructions)
            parts.append(f"instructions {found['file']} (sha256 {found['sha256'][:12]})")
        return " | ".join(parts)


def executed_cells() -> list[str]:
    """The cells this IPython kernel has executed, in order (IPython's ``In``); none outside a kernel."""
    shell = get_ipython()
    return [str(c) for c in shell.user_ns.get("In", [])] if shell is not None else []


def split(value: str) -> list[str]:
    return [v.strip() for v in str(value).split(",") if v.strip()]


def seeds_of(value: str) -> tuple[str, ...] | None:
    """The smoke seeds of SEEDS (sorted, unique); None when SEEDS is empty (every query)."""
    if not value.strip():
        return None
    return tuple(sorted(selection_ids("seeds", split(value))))  # the request's rule: a list of ids


def request_of(protocol: str, discount: str | None = None, seeds: tuple[str, ...] | None = None) -> EvaluationRequest:
    """The evaluation request of a notebook's parameters: PROTOCOL, DISCOUNT (the default table's
    nDCG), SEEDS; its rules are every front end's (`evalkit.evaluation.request`)."""
    return EvaluationRequest(protocol=protocol, discount=discount, seeds=seeds)


def _tag(given: str, profile: str, protocol: str, seeds: str, **content: str | None) -> str:
    if given:
        if not is_plain(given):
            raise RequestError("tag", "is not a plain file-name part; use letters, digits and . _ + - only",
                               value=repr(given))
        return given
    return build_tag(profile, protocol, seeds, **{k: v for k, v in content.items() if v is not None})


def study_models(profile: str, notebook: str, models: str = "") -> tuple[str, ...]:
    """MODELS checked against the registry, else the profile's default list for the notebook."""
    study = registry.profile_settings(profile).get("study", {})
    default = study.get(STUDY_LISTS[notebook])
    names = split(models) or ([default] if isinstance(default, str) else list(default or []))
    if not names:
        raise RequestError("model", f"is empty and profile {profile} lists no {notebook} models; name some models")
    for name in names:
        registry.spec(name, profile)  # one-line error listing the valid names
    return tuple(dict.fromkeys(names))


def check(notebook: str, PROFILE: str, PROTOCOL: str, SEEDS: str = "", OUTPUT_DIR: str = "build",  # noqa: N803
          FIGURES_DIR: str = "figures", RUNS_DIR: str = "runs", CORPUS: str = "", MODELS: str | None = None,
          REFERENCE_MODEL: str | None = None, DISCOUNT: str | None = None,
          INSTRUCTIONS: str | None = None, OFFICIAL: str | None = None, TAG: str = "") -> Study:
    """Check a notebook's parameters (those it declares; None = not declared) and return them; a
    request rule's error names the parameter as the notebooks spell it (``PROTOCOL``). Each is text
    (`as_text`: papermill's ``-p SEEDS 929877`` passes an int)."""
    try:
        given = {name: as_text(name, value, optional=name in OPTIONAL) for name, value in (
            ("PROFILE", PROFILE), ("PROTOCOL", PROTOCOL), ("SEEDS", SEEDS), ("OUTPUT_DIR", OUTPUT_DIR),
            ("FIGURES_DIR", FIGURES_DIR), ("RUNS_DIR", RUNS_DIR), ("CORPUS", CORPUS), ("MODELS", MODELS),
            ("REFERENCE_MODEL", REFERENCE_MODEL), ("DISCOUNT", DISCOUNT), ("INSTRUCTIONS", INSTRUCTIONS),
            ("OFFICIAL", OFFICIAL), ("TAG", TAG))}
        return _check(notebook, **given)
    except KitError as exc:
        raise exc.for_front_end(NOTEBOOK) from None


OPTIONAL = ("MODELS", "REFERENCE_MODEL", "DISCOUNT", "INSTRUCTIONS", "OFFICIAL")  # None: not declared


def as_text(name: str, value: object, optional: bool = False) -> str | None:
    """A notebook parameter as the text make passes: text as it is, a whole number as its digits
    (papermill's ``-p SEEDS 929877`` and ``-p OUTPUT_DIR 1`` pass ints, make the same digits as text),
    None for a parameter the notebook does not declare (`optional`); anything else (None for a
    declared one, true/false, a fraction, a list) a one-line RequestError naming the parameter."""
    if isinstance(value, str) or (value is None and optional):
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    raise RequestError(name.lower(), f"is {'None' if value is None else 'a ' + type(value).__name__}; give text, "
                       f"e.g. -p {name} '...' (make passes {name}=... as text)", value=repr(value))


def _check(notebook: str, PROFILE: str, PROTOCOL: str, SEEDS: str, OUTPUT_DIR: str, FIGURES_DIR: str,  # noqa: N803
           RUNS_DIR: str, CORPUS: str, MODELS: str | None, REFERENCE_MODEL: str | None, DISCOUNT: str | None,
           INSTRUCTIONS: str | None, OFFICIAL: str | None, TAG: str) -> Study:
    if notebook not in STUDY_LISTS:
        raise DataError("study notebook",
                        f"unknown study notebook {notebook!r}; choose one of {', '.join(STUDY_LISTS)}")
    registry.profile_settings(PROFILE)
    seeds = seeds_of(SEEDS)
    check_options(request_of(PROTOCOL, DISCOUNT, seeds))  # the rules of every front end's request
    content = {"MODELS": MODELS, "REFERENCE_MODEL": REFERENCE_MODEL, "DISCOUNT": DISCOUNT, "CORPUS": CORPUS,
               "INSTRUCTIONS": INSTRUCTIONS, "OFFICIAL": OFFICIAL}  # as given: the tag make computed from the same
    if OFFICIAL is not None and OFFICIAL not in ("yes", "no"):
        raise RequestError("official", "give yes (add the release's official measures) or no", value=repr(OFFICIAL))
    if OFFICIAL == "yes" and PROTOCOL not in POOL_PROTOCOLS:
        raise RequestError("official", f"the official measures are defined on the judged pools; use {{protocol}} pool "
                           f"or released, not {PROTOCOL}", value="yes")
    if PROTOCOL == "full" and not CORPUS:
        CORPUS = full_corpus(csfcube.SCHEME.name)  # noqa: N806  (the study's collection; the one rule)
    if CORPUS and not Path(CORPUS).is_file():
        raise RequestError("corpus", "is not a file; give the path of abstracts-preds.zip", value=CORPUS)
    measure = None if DISCOUNT is None else DISCOUNTS[DISCOUNT]
    models = study_models(PROFILE, notebook, MODELS) if MODELS is not None else ()
    reference = None
    if REFERENCE_MODEL is not None:
        study = registry.profile_settings(PROFILE).get("study") or {}
        reference = REFERENCE_MODEL or study.get("reference") or ""
        if not REFERENCE_MODEL and reference not in models:  # the profile's reference is not run: the first model
            reference = models[0] if models else ""
        if not reference:
            raise RequestError("reference", "is empty and the profile names no study reference; name one")
        registry.spec(reference, PROFILE)
        if reference not in models:
            raise RequestError("reference", f"{reference} is not among the models run; add it to {{model}}")
    instructions = None
    if INSTRUCTIONS:
        if not Path(INSTRUCTIONS).expanduser().is_file():
            raise RequestError("instructions", "no such file; give a YAML file shaped as "
                               "evalkit/config/instructions.yaml", value=INSTRUCTIONS)
        instructions = str(Path(INSTRUCTIONS).expanduser())
        load_instructions(Path(instructions))  # its shape, in one line
    if strict():  # fail early: every row's missing prerequisites in one line, before any model loads
        prerequisites.check_all([registry.spec(name, PROFILE) for name in models])
    tag = _tag(TAG, PROFILE, PROTOCOL, SEEDS, **content)
    executor, workers = execution()
    return Study(PROFILE, PROTOCOL, tag, models, reference, measure, seeds, resolve(OUTPUT_DIR),
                 resolve(FIGURES_DIR), resolve(RUNS_DIR), CORPUS or None, instructions,
                 OFFICIAL == "yes", strict(), executor, workers, notebook)


def execution() -> tuple[str, int | None]:
    """``EVALKIT_EXECUTOR`` and ``EVALKIT_WORKERS`` (``make ... EXECUTOR=ray WORKERS=2``): where the
    runs' whole corpora are encoded and searched; not in the build tag, the numbers do not depend
    on it (`evalkit.pipeline.settings.check_execution`)."""
    executor = os.environ.get(EXECUTOR_ENV, "").strip() or "local"
    workers = parse_workers(os.environ.get(WORKERS_ENV))
    check_execution(executor, workers)
    return executor, workers


def strict() -> bool:
    """``EVALKIT_STRICT`` (``make ... STRICT=1``): a row that cannot run stops the study."""
    value = os.environ.get(STRICT_ENV, "").strip().lower()
    if value not in ("", "0", "1", "true", "false", "yes", "no"):
        raise DataError(f"{STRICT_ENV}={value!r}", "give 1 (stop at the first row that cannot run) or 0")
    return value in ("1", "true", "yes")
