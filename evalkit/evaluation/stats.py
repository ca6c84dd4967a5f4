"""Significance and uncertainty over per-query values.

The kit's paired tests (`paired_test`) compare two runs over the units both score: queries,
or, for a measure whose per-query values are not independent (p-MRR: a seed's two facets are
one pair of instructions, scored both ways), groups of queries (`groups`: each query's unit),
each unit's value the mean of its queries'. ``delta`` is the mean of the per-unit differences
(a minus b), the very quantity the test tests, so its sign is the sign of ``t``. No p-value
on fewer than `MIN_PAIRED` units, and none when the differences do not vary (a t statistic
of 0/0 or x/0): then NaN and a note saying why. Tests: ``t`` (the paired two-sided t-test,
the paper's) and ``fisher`` (Fisher's paired randomization test: the mean difference against
`permutations` random sign flips of the per-unit differences, seeded, p the share at least
as extreme, as ranx computes it).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Annotated, Literal

import numpy as np
import pandas as pd
from pydantic import Field, StrictInt, ValidationInfo, field_validator

from evalkit.core.errors import DataError, RequestError
from evalkit.core.schema import WHOLE, Problem, RequestSchema

MIN_PAIRED = 5  # fewer paired units than this: no p-value
TESTS = ("t", "fisher")
PERMUTATIONS = 10_000  # Fisher's randomization test: random sign flips
PERMUTATION_SEED = 42
ALPHA = 0.05  # the significance level of the comparison table's marks
MIN_PERMUTATIONS = 100  # fewer cannot give a p-value below 0.01
MAX_PERMUTATIONS = 10_000_000  # the documented maximum; the test works through it in bounded chunks
MAX_SEED = 2**32 - 1  # numpy's seeds are unsigned 32-bit integers


@dataclass(frozen=True)
class PairedTest:
    """`paired_test`'s answer: delta (mean per-unit difference), statistic (t, or for Fisher's
    test the mean difference itself), p, n (paired units), note (why p is blank, else None)."""

    delta: float
    statistic: float
    pvalue: float
    n: int
    note: str | None = None


# The families of tests Holm adjusts over, by name: every pair of runs (the comparison table's marks,
# `evalkit evaluate`, the API by default), or each run against the reference only (the first run:
# the paper's Table 1 marks, the study's relevance table). Per measure and stratum either way.
FAMILIES = {"pairs": "all pairs of runs of one measure and stratum",
            "reference": "each run against the reference (the first run), per measure and stratum"}


@dataclass(frozen=True)
class PairedTestSettings:
    """A checked paired test: ``test`` (t or fisher), ``alpha``, Fisher's ``permutations`` and
    ``seed`` (their defaults when not given; unused by the t-test), and the ``family`` of tests
    Holm adjusts over (`FAMILIES`)."""

    test: str = "t"
    alpha: float = ALPHA
    permutations: int = PERMUTATIONS
    seed: int = PERMUTATION_SEED
    family: str = "pairs"

    def arguments(self) -> dict:
        """The keyword arguments of `compare` and `compare_table`."""
        return {"test": self.test, "permutations": self.permutations, "seed": self.seed, "family": self.family}

    def described(self) -> dict:
        """The test as the settings of a printed or JSON comparison say it."""
        if self.test == "fisher":
            return {"test": "fisher", "permutations": self.permutations, "seed": self.seed}
        return {"test": "t"}


class PairedTestRequest(RequestSchema):
    """A request's paired test, each field with its rule (`evalkit.evaluation.request.EvaluationRequest`
    holds these fields): ``test`` t or fisher, ``alpha`` in (0, 1), Fisher's ``permutations``
    (`MIN_PERMUTATIONS` to `MAX_PERMUTATIONS`) and ``seed`` (0 to `MAX_SEED`), given only with
    ``test`` fisher, and the ``family`` Holm adjusts over (`FAMILIES`)."""

    test: Annotated[Literal[TESTS], Problem(f"choose one of {', '.join(TESTS)}")] = "t"
    alpha: Annotated[float, Field(gt=0, lt=1, strict=True),
                     Problem("give a significance level between 0 and 1, e.g. 0.05")] = ALPHA
    permutations: Annotated[StrictInt | None, Field(ge=MIN_PERMUTATIONS, le=MAX_PERMUTATIONS), WHOLE,
                            Problem(f"give between {MIN_PERMUTATIONS:,} and {MAX_PERMUTATIONS:,}")] = None
    seed: Annotated[StrictInt | None, Field(ge=0, le=MAX_SEED), WHOLE,
                    Problem(f"give a whole number from 0 to {MAX_SEED:,}")] = None
    family: Annotated[Literal[tuple(FAMILIES)], Problem(f"choose {' or '.join(FAMILIES)}")] = "pairs"

    @field_validator("permutations", "seed", mode="before")
    @classmethod
    def _fisher_only(cls, value: object, info: ValidationInfo) -> object:
        if value is not None and info.data.get("test", "fisher") != "fisher":
            raise RequestError(info.field_name, "sets Fisher's randomization test; add {test:fisher}")
        return value

    def settings(self) -> PairedTestSettings:
        """The test as computed: Fisher's permutations and seed, their defaults where not given."""
        return PairedTestSettings(self.test, self.alpha, PERMUTATIONS if self.permutations is None else
                                  self.permutations, PERMUTATION_SEED if self.seed is None else self.seed, self.family)


def check_test(test: object = "t", alpha: object = ALPHA, permutations: object = None,
               seed: object = None, family: object = "pairs") -> PairedTestSettings:
    """The paired test of a direct call (`paired_test`, `compare`) by the request's rules (`PairedTestRequest`)."""
    return PairedTestRequest(test=test, alpha=alpha, permutations=permutations, seed=seed, family=family).settings()


def check_computed(test: object, permutations: object, seed: object, alpha: object = ALPHA,
                   family: object = "pairs") -> PairedTestSettings:
    """`check_test` of the options a computation always receives (defaults filled in): Fisher's
    `permutations` and `seed` checked under ``fisher`` only, where they are used."""
    fisher = test == "fisher"
    return check_test(test, alpha, permutations if fisher else None, seed if fisher else None, family)


def unit_differences(a: pd.Series, b: pd.Series, groups: Mapping[str, str] | None = None) -> pd.Series:
    """a - b over the queries both hold, one value per unit: a query, or with `groups`
    (query -> unit) the mean over the unit's queries both hold."""
    both = _held_by_both(a, b)
    diff = both.iloc[:, 0] - both.iloc[:, 1]
    if groups is None:
        return diff
    return diff.groupby([groups.get(q, q) for q in diff.index], sort=True).mean()


def paired_test(a: pd.Series, b: pd.Series, test: str = "t", groups: Mapping[str, str] | None = None,
                permutations: int = PERMUTATIONS, seed: int = PERMUTATION_SEED) -> PairedTest:
    """The paired test of a against b (see the module docstring)."""
    check_computed(test, permutations, seed)  # the one rule of the request (`check_test`), for a direct call too
    diff = unit_differences(a, b, groups).to_numpy(dtype=float)
    n = len(diff)
    unit = ("query" if n == 1 else "queries") if groups is None else \
        ("seed" if n == 1 else "seeds") + " (a seed's queries are one unit)"
    if n == 0:
        return PairedTest(math.nan, math.nan, math.nan, 0, "no query scored by both runs")
    delta = float(diff.mean())
    if n < MIN_PAIRED:
        return PairedTest(delta, math.nan, math.nan, n, f"no test on {n} paired {unit}; it needs {MIN_PAIRED}")
    if np.all(diff == diff[0]):
        return PairedTest(delta, math.nan, math.nan, n, f"no test: every paired difference is {diff[0]:+.4g}, so "
                          "they have no variance")
    if test == "t":
        from scipy import stats  # lazy: scipy costs about a second of start-up; only the t-test needs it

        result = stats.ttest_1samp(diff, 0.0)
        return PairedTest(delta, float(result.statistic), float(result.pvalue), n)
    return PairedTest(delta, delta, _randomization_p(diff, delta, permutations, seed), n)


SIGN_FLIPS_PER_CHUNK = 4_000_000  # sign flips drawn at once: about 32 MB, whatever `permutations` is


def _randomization_p(diff: np.ndarray, delta: float, permutations: int, seed: int) -> float:
    """The share of `permutations` seeded random sign flips of `diff` whose mean is at least as
    extreme as `delta`. The flips are drawn in chunks of rows, one after another from one seeded
    generator, so memory stays bounded and the draws (so the p-value) equal one draw of them all."""
    rng = np.random.default_rng(seed)
    rows = max(1, SIGN_FLIPS_PER_CHUNK // len(diff))
    extreme, done = 0, 0
    while done < permutations:
        size = min(rows, permutations - done)
        signs = rng.choice(np.array([-1.0, 1.0]), size=(size, len(diff)))
        extreme += int((np.abs((signs * diff).mean(axis=1)) >= abs(delta) * (1 - 1e-12)).sum())
        done += size
    return extreme / permutations


def bootstrap_ci(
    values: pd.Series, confidence: float = 0.95, n_resamples: int = 10_000, seed: int = 0
) -> tuple[float, float]:
    """Percentile bootstrap interval of the mean over queries; deterministic for a seed."""
    data = pd.Series(values).dropna().to_numpy(dtype=float)
    if len(data) < 2:
        raise DataError("per-query values", "a bootstrap interval needs at least two query values")
    if np.all(data == data[0]):
        return float(data[0]), float(data[0])
    from scipy import stats  # lazy: scipy costs about a second of start-up; only the interval needs it

    result = stats.bootstrap(
        (data,), np.mean, confidence_level=confidence, n_resamples=n_resamples,
        method="percentile", random_state=np.random.default_rng(seed),
    )
    return float(result.confidence_interval.low), float(result.confidence_interval.high)


def _held_by_both(a: pd.Series, b: pd.Series) -> pd.DataFrame:
    """The queries both series score, as two columns."""
    return pd.concat([a, b], axis=1, join="inner").dropna()


def interval_or_nan(values: pd.Series, seed: int = 0) -> tuple[float, float]:
    """`bootstrap_ci`, (NaN, NaN) where it is undefined (fewer than two values)."""
    return bootstrap_ci(values, seed=seed) if len(pd.Series(values).dropna()) >= 2 else (float("nan"), float("nan"))


def holm(pvalues: Mapping[str, float]) -> dict[str, float]:
    """Holm-Bonferroni adjusted p-values (step-down, monotone, capped at 1); an undefined (NaN)
    p-value stays NaN and does not count among the tests."""
    defined = {name: p for name, p in pvalues.items() if not math.isnan(p)}
    order = sorted(defined, key=lambda name: (defined[name], name))
    m, running, adjusted = len(order), 0.0, {}
    for i, name in enumerate(order):
        running = max(running, min(1.0, (m - i) * defined[name]))
        adjusted[name] = running
    return {name: adjusted.get(name, math.nan) for name in pvalues}
