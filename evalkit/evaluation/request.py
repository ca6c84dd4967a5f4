"""The evaluation request every front end fills: a declared schema, each field once with its rule.

`evalkit evaluate`'s options, `evalkit.api.evaluate`'s and `Evaluation.compare_table`'s
arguments, the study notebooks' parameters (`evalkit.study.params.request_of`), the explore
page (`evalkit.pages.explore_views.explore_request`) and the mteb / ranx / ir_measures
integrations (`evalkit.integrations.library_input.checked`) each build an `EvaluationRequest`,
which checks each field as it is built (pydantic, `evalkit.core.schema`): the protocol
(`evalkit.data.protocols.check_protocol`), the aggregation (`evalkit.evaluation.evaluate.Aggregation`),
the default table's shape (``discount``, ``k``: `Cutoff`), the measures (a list, none twice, each
a registered measure's name: the live registry, `evalkit.evaluation.measures.parse`), the paired
test (`evalkit.evaluation.stats.PairedTestRequest`, whose rules a direct test call follows too),
p-MRR's tie order and the query selection's shape (`evalkit.data.collection.check_selection`).
`check_options` checks a request again before anything is loaded; `check_request` adds the rules
that need the collection: each measure against it (`evalkit.evaluation.evaluate.check_measures`)
and the selected queries (`select_queries`). Beside the request: the variants'
(`evalkit.data.collection.select_variants`) and the compared runs' one protocol
(`evalkit.pipeline.run_input.one_protocol`). A rule's error is a `RequestError` naming the
request's field (``permutations``), which each front end spells its own way
(``--permutations``, ``permutations=``, ``PERMUTATIONS``: `evalkit.core.errors.spell`), so a
request one front end refuses every other refuses with the same line.

What the checked request then evaluates is `evalkit.evaluation.outcome.evaluate_tables`: one
function for every front end.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Annotated, ClassVar, Literal

from pydantic import BeforeValidator, Field, SkipValidation, StrictInt, ValidationInfo, field_validator

from evalkit.core.errors import RequestError
from evalkit.core.schema import WHOLE, Problem
from evalkit.data.collection import Collection, check_selection, select_queries
from evalkit.data.protocols import check_protocol
from evalkit.evaluation import measures as declared
from evalkit.evaluation.evaluate import DISCOUNTS, Aggregation, check_measures, default_measures
from evalkit.evaluation.measures import MAX_K, PMRR_TIES
from evalkit.evaluation.stats import PairedTestRequest, PairedTestSettings

# A cut-off or depth (``k``, ``depth``): a positive whole number, at most `MAX_K`; None: not given.
Cutoff = Annotated[StrictInt | None, Field(ge=1, le=MAX_K), WHOLE,
                   Problem("give a positive whole number", ("greater_than_equal",)),
                   Problem(f"absurdly large; give at most {MAX_K:,}", ("less_than_equal",), lambda v: str(v)[:20])]

# A protocol's name under its one rule (`evalkit.data.protocols.check_protocol`): both requests' ``protocol``.
ProtocolName = Annotated[str, BeforeValidator(check_protocol)]


class EvaluationRequest(PairedTestRequest):
    """How runs are to be evaluated, as a user asks for it, each field checked by its rule as the
    request is built (a `RequestError` naming the field); what depends on the collection is
    `check_request`'s.

    ``protocol`` None: a run's recorded protocol, else the default. ``measures`` None: the
    collection's default table, shaped by ``discount`` and ``k`` (CSFCube only). ``test``,
    ``alpha``, ``permutations`` and ``seed``: the paired test of a comparison (the last two for
    Fisher's randomization test only); ``family``: the tests Holm adjusts over (``pairs``: every
    pair of runs; ``reference``: each run against the first): `PairedTestRequest`'s fields.
    ``seeds`` / ``queries``: evaluate some queries only."""

    ORDER: ClassVar[tuple[str, ...]] = ("dataset", "protocol", "aggregate", "discount", "k", "measures", "test",
                                        "alpha", "permutations", "seed", "family", "pmrr_ties", "seeds", "queries")

    dataset: SkipValidation[str] = "csfcube"  # its rule is the dataset's loader's (`evalkit.datasets.load_dataset`)
    protocol: ProtocolName | None = None
    aggregate: Aggregation = "folds"
    discount: Annotated[Literal[tuple(DISCOUNTS)] | None, Problem(f"choose {' or '.join(DISCOUNTS)}")] = None
    k: Cutoff = None
    measures: tuple[str, ...] | None = None
    pmrr_ties: Annotated[Literal[PMRR_TIES], Problem(f"choose one of {', '.join(PMRR_TIES)}")] = "kit"
    seeds: SkipValidation[Sequence[str] | None] = None  # each id the collection's: `select_queries`
    queries: Annotated[SkipValidation[Sequence[str] | None], Field(validate_default=True)] = None

    @field_validator("measures", mode="before")
    @classmethod
    def _measures(cls, value: object, info: ValidationInfo) -> tuple[str, ...] | None:
        """A list of names, none twice, each a registered measure's (`evalkit.evaluation.measures.parse`:
        the live registry), or None for the default table, which alone ``discount`` and ``k`` shape."""
        if value is None:
            return None
        if isinstance(value, (str, bytes)) or not isinstance(value, Sequence | set | frozenset):
            raise RequestError("measures", f"a {type(value).__name__} is not a list of measures; give a list of "
                               "names, e.g. nDCG@10 and AP", value=value)
        names = [str(m).strip() for m in value if str(m).strip()]
        if not names:
            raise RequestError("measures", "names no measure; give some (e.g. nDCG@10, AP) or leave it out",
                               value=value if isinstance(value, list) else list(value))
        foreign = next((n for n in names if any(c.isdigit() and not c.isascii() for c in n)), None)
        if foreign is not None:  # nDCG@٢٠ beside nDCG@20 would be two columns of one measure
            raise RequestError("measures", f"measure {foreign!r} writes a digit other than 0-9; write its cut-off in "
                               "ASCII digits (e.g. nDCG@20)")
        repeated = next((n for n in names if names.count(n) > 1), None)
        if repeated is not None:
            raise RequestError("measures", f"lists {repeated} twice; list each measure once")
        shaping = next((f for f in ("discount", "k") if info.data.get(f) is not None), None)
        if shaping is not None:
            raise RequestError(shaping, "shapes only the default measures; with {measures} write the measure itself "
                               "(e.g. nDCG@10 or nDCG_csfcube@20)")
        for name in names:
            declared.parse(name)
        return tuple(names)

    @field_validator("queries")
    @classmethod
    def _selection(cls, value: object, info: ValidationInfo) -> object:
        """`seeds` or `queries`, not both, each a list of ids (`evalkit.data.collection.check_selection`)."""
        check_selection(info.data.get("seeds"), value)
        return value


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


def check_options(request: EvaluationRequest) -> EvaluationRequest:
    """Every rule that needs no collection, before anything is loaded (the CLI's fast refusal):
    the request checked again (a copy made by ``model_copy(update=...)`` is checked too)."""
    return request.checked()


def check_request(request: EvaluationRequest, collection: Collection) -> CheckedEvaluation:
    """`request` checked against `collection`, each rule once (those of `check_options` first):
    the measures (given, else the collection's default table) each parsed against the
    collection, the selected queries."""
    request = check_options(request)
    given = request.measures
    names = list(given) if given is not None else default_measures(collection, request.discount, request.k)
    check_measures(names, collection)
    return CheckedEvaluation(request=request, names=tuple(names), default=given is None,
                             aggregate=request.aggregate, test=request.settings(), pmrr_ties=request.pmrr_ties,
                             queries=select_queries(collection, request.seeds, request.queries))
