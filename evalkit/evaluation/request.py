"""The evaluation request every front end fills, and the one check of each of its rules.

`evalkit evaluate`'s options, `evalkit.api.evaluate`'s and `Evaluation.compare_table`'s
arguments, the study notebooks' parameters (`evalkit.study.params.request_of`), the explore
page (`evalkit.pages.explore_views.explore_request`) and the mteb / ranx / ir_measures
integrations (`evalkit.integrations.library_input.checked`) each build an `EvaluationRequest`
and hand it to `check_request` (or, before the collection is loaded, `check_options`). Each
rule is one function: here `check_cutoff`, `check_measure_names` and `check_pmrr_ties`, the
paired test's `evalkit.evaluation.stats.check_test` (which the test itself calls too); with
what they judge the protocol's (`evalkit.data.protocols.check_protocol`),
the aggregation's and the measures' against a collection
(`evalkit.evaluation.evaluate.check_aggregate`, `check_measures`, `parsed_measure`) and the
query selection's (`evalkit.data.collection.check_selection` before, `select_queries` against
the collection); beside the request, the variants' (`evalkit.data.collection.select_variants`)
and the compared runs' one protocol (`evalkit.pipeline.run_input.one_protocol`). A rule's
error is a `RequestError` naming the request's field (``permutations``), which each front end spells its own way
(``--permutations``, ``permutations=``, ``PERMUTATIONS``: `evalkit.core.errors.spell`), so a
request one front end refuses every other refuses with the same line.

What the checked request then evaluates is `evalkit.evaluation.outcome.evaluate_tables`: one
function for every front end.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from evalkit.core.errors import RequestError
from evalkit.data.collection import Collection, check_selection, select_queries
from evalkit.data.protocols import check_protocol
from evalkit.evaluation.evaluate import DISCOUNTS, check_aggregate, check_measures, default_measures
from evalkit.evaluation.measures import MAX_K, PMRR_TIES
from evalkit.evaluation.stats import ALPHA, PairedTestSettings, check_test, whole_number


@dataclass(frozen=True, kw_only=True)
class EvaluationRequest:
    """How runs are to be evaluated, as a user asks for it (unchecked: `check_request`).

    ``protocol`` None: a run's recorded protocol, else the default. ``measures`` None: the
    collection's default table, shaped by ``discount`` and ``k`` (CSFCube only). ``test``,
    ``alpha``, ``permutations`` and ``seed``: the paired test of a comparison (the last two for
    Fisher's randomization test only); ``family``: the tests Holm adjusts over (``pairs``: every
    pair of runs; ``reference``: each run against the first). ``seeds`` / ``queries``: evaluate
    some queries only."""

    dataset: str = "csfcube"
    protocol: str | None = None
    measures: Sequence[str] | None = None
    discount: str | None = None
    k: int | None = None
    aggregate: str = "folds"
    test: str = "t"
    alpha: float = ALPHA
    permutations: int | None = None
    seed: int | None = None
    family: str = "pairs"
    pmrr_ties: str = "kit"
    seeds: Sequence[str] | None = None
    queries: Sequence[str] | None = None


@dataclass(frozen=True)
class CheckedEvaluation:
    """An `EvaluationRequest` after every rule: the measures to compute (``names``, the
    default table's where none were given: ``default`` True), the aggregation, the paired
    test, p-MRR's tie order and the selected query ids (None: every query)."""

    request: EvaluationRequest
    names: tuple[str, ...]
    default: bool
    aggregate: str
    test: PairedTestSettings
    pmrr_ties: str
    queries: tuple[str, ...] | None


def check_cutoff(field: str, value: object) -> int | None:
    """A positive whole-number cut-off or depth (``k``, ``depth``), at most `MAX_K`; None stays None."""
    if value is None:
        return None
    value = whole_number(field, value)
    if value < 1:
        raise RequestError(field, "give a positive whole number", value=value)
    if value > MAX_K:
        raise RequestError(field, f"absurdly large; give at most {MAX_K:,}", value=str(value)[:20])
    return value


def check_discount(value: object) -> str | None:
    if value is not None and value not in DISCOUNTS:
        raise RequestError("discount", f"choose {' or '.join(DISCOUNTS)}", value=value)
    return value


def check_measure_names(measures: object, discount: object = None, k: object = None) -> tuple[str, ...] | None:
    """The measure list as given (a list of names, none twice; `discount` and `k` only shape the
    default table, so they go without it), or None for the default table. Each name is parsed
    against the collection later (`check_request`)."""
    check_discount(discount)
    check_cutoff("k", k)
    if measures is None:
        return None
    if isinstance(measures, (str, bytes)) or not isinstance(measures, Sequence | tuple | set | frozenset):
        raise RequestError("measures", f"a {type(measures).__name__} is not a list of measures; give a list of "
                           "names, e.g. nDCG@10 and AP", value=measures)
    names = [str(m).strip() for m in measures if str(m).strip()]
    if not names:
        raise RequestError("measures", "names no measure; give some (e.g. nDCG@10, AP) or leave it out",
                           value=list(measures) if not isinstance(measures, list) else measures)
    foreign = next((n for n in names if any(c.isdigit() and not c.isascii() for c in n)), None)
    if foreign is not None:  # nDCG@٢٠ beside nDCG@20 would be two columns of one measure
        raise RequestError("measures", f"measure {foreign!r} writes a digit other than 0-9; write its cut-off in "
                           "ASCII digits (e.g. nDCG@20)")
    repeated = next((n for n in names if names.count(n) > 1), None)
    if repeated is not None:
        raise RequestError("measures", f"lists {repeated} twice; list each measure once")
    if discount is not None or k is not None:
        field = "discount" if discount is not None else "k"
        raise RequestError(field, "shapes only the default measures; with {measures} write the measure itself "
                           "(e.g. nDCG@10 or nDCG_csfcube@20)")
    return tuple(names)


def check_pmrr_ties(value: object) -> str:
    if value not in PMRR_TIES:
        raise RequestError("pmrr_ties", f"choose one of {', '.join(PMRR_TIES)}", value=value)
    return value


def _checked_options(request: EvaluationRequest) -> tuple[tuple[str, ...] | None, PairedTestSettings]:
    """Every rule that needs no collection, each once: (the measures as given, the paired test)."""
    if request.protocol is not None:
        check_protocol(request.protocol)
    check_aggregate(request.aggregate)
    given = check_measure_names(request.measures, request.discount, request.k)
    test = check_test(request.test, request.alpha, request.permutations, request.seed, request.family)
    check_pmrr_ties(request.pmrr_ties)
    check_selection(request.seeds, request.queries)
    return given, test


def check_options(request: EvaluationRequest) -> None:
    """Every rule that needs no collection, before anything is loaded (the CLI's fast refusal)."""
    _checked_options(request)


def check_request(request: EvaluationRequest, collection: Collection) -> CheckedEvaluation:
    """`request` checked against `collection`, each rule once (those of `check_options` first):
    the measures (given, else the collection's default table) each parsed against the
    collection, the selected queries."""
    given, test = _checked_options(request)
    names = list(given) if given is not None else default_measures(collection, request.discount, request.k)
    check_measures(names, collection)
    return CheckedEvaluation(request=request, names=tuple(names), default=given is None,
                             aggregate=request.aggregate, test=test, pmrr_ties=request.pmrr_ties,
                             queries=select_queries(collection, request.seeds, request.queries))
