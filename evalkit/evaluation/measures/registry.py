"""The registration list of measure declarations, and the parser that reads it.

`BUILT_IN` names the kit's declarations, one per family module, in the order `measure_help`
lists them; adding a kit measure is a new module plus its line here. `DECLARED` holds them with a
user's own (the kit's one registry pattern, `evalkit.core.declarations`), which joins with
`register` (for the process) or `registered` (a ``with`` block); from then on every name
parser (`parse`, `evalkit.evaluation.measures.parse_measure`, the evaluator's
`evalkit.evaluation.evaluate.check_measures`) reads it like the kit's own.

Names follow one grammar: ``FAMILY``, ``FAMILY@k`` or ``FAMILY%p`` (digits, no leading zero,
at most `MAX_K` or the declaration's ``max_cutoff``); what a family accepts is its
declarations' cut-off rule and separator.
"""

from __future__ import annotations

import re

from evalkit.core.declarations import Declarations
from evalkit.core.errors import KitError, RequestError
from evalkit.evaluation.measures.ap import AP
from evalkit.evaluation.measures.base import FORBIDS, NEEDS, MeasureSpec, Parsed, check_cutoff
from evalkit.evaluation.measures.csfcube_map import MAP_CSFCUBE
from evalkit.evaluation.measures.csfcube_ndcg import NDCG_CSFCUBE, NDCG_CSFCUBE_PERCENT
from evalkit.evaluation.measures.ndcg import NDCG
from evalkit.evaluation.measures.pmrr import P_MRR
from evalkit.evaluation.measures.precision import P
from evalkit.evaluation.measures.recall import R
from evalkit.evaluation.measures.robustness_k import ROBUSTNESS_AT_K
from evalkit.evaluation.measures.rr import RR

BUILT_IN: tuple[MeasureSpec, ...] = (NDCG, NDCG_CSFCUBE, NDCG_CSFCUBE_PERCENT, MAP_CSFCUBE, AP, RR, P, R, P_MRR,
                                     ROBUSTNESS_AT_K)
# Keyed by family and separator: one name, one measure.
DECLARED = Declarations(MeasureSpec, "measure", BUILT_IN, key=lambda s: (s.family, s.separator),
                        label=lambda s: f"{s.family}{s.separator}", example="FAMILY, HELP, ...")
register, unregister, registered = DECLARED.register, DECLARED.unregister, DECLARED.registered
_GRAMMAR = re.compile(r"(?P<family>.+?)(?:(?P<separator>[@%])(?P<digits>[0-9]+))?")  # ASCII digits only (\d takes ٢٠)


def declarations() -> tuple[MeasureSpec, ...]:
    """Every declaration the parser reads: the kit's, then the registered ones, in order."""
    return DECLARED.values()


def measure_help() -> str:
    """The measure names the parser accepts, as error lines and ``--help`` write them."""
    helps = list(dict.fromkeys(spec.help for spec in declarations()))
    return ", ".join(helps[:-1]) + f" or {helps[-1]}" if len(helps) > 1 else "".join(helps)


MEASURE_HELP = measure_help()  # the kit's own measures; `measure_help()` includes registered ones


def parse(name: str) -> Parsed:
    """The declaration and cut-off of a measure name; one line (KitError) naming the fix when it is not one."""
    match = _GRAMMAR.fullmatch(name) if isinstance(name, str) else None
    family = match["family"] if match else None
    specs = [s for s in declarations() if s.family == family]
    if not specs:
        raise RequestError("measures", f"unknown measure {name!r}; use {measure_help()}")
    separator, digits = match["separator"], match["digits"]
    if separator is None:
        spec = next((s for s in specs if s.cutoff != NEEDS), None)
        if spec is None:
            raise RequestError("measures",
                               f"measure {name!r} needs a cut-off; write e.g. {family}{specs[0].separator}20")
        return Parsed(spec, name, None)
    if all(s.cutoff == FORBIDS for s in specs):
        note = next((f" ({s.cutoff_note})" for s in specs if s.cutoff_note), "")
        raise RequestError("measures", f"measure {name!r} takes no cut-off{note}; write {family}")
    spec = next((s for s in specs if s.separator == separator and s.cutoff != FORBIDS), None)
    if spec is None:
        takers = ", ".join(dict.fromkeys(s.family for s in declarations() if s.separator == separator))
        other = next(s.separator for s in specs if s.cutoff != FORBIDS)
        kind = "a percentage cut-off" if separator == "%" else "a cut-off @k"
        raise RequestError("measures", f"measure {name!r}: only {takers} takes {kind}; "
                                       f"write {family}{other}{'k' if other == '@' else 'p'}")
    k = check_cutoff(name, digits)
    if k > spec.max_cutoff:
        kind = "a percentage cut-off" if separator == "%" else "the cut-off"
        raise RequestError("measures",
                           f"measure {name!r}: {kind} is at most {spec.max_cutoff}; write e.g. {family}{separator}20")
    return Parsed(spec, name, k)


def find(name: str) -> Parsed | None:
    """`parse`, or None where `name` is not a measure name (a table's other columns)."""
    try:
        return parse(name)
    except KitError:
        return None
