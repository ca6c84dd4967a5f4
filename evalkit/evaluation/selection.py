"""One dev/test selector: choose a setting on each fold's dev half, report it on the test half.

Used for the facet hybrid's weight and for Promptriever's prompt selection alike. The
chooser is handed copies of the dev rows only, so no test-half value can reach it (a
test pins this by poisoning the test rows); the reported table holds each fold's test
rows under the setting chosen on that fold's dev rows.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping
from typing import TypeVar

import pandas as pd

from evalkit.core.errors import DataError
from evalkit.data.collection import Fold

Setting = TypeVar("Setting", bound=Hashable)


def cross_validate(tables: Mapping[Setting, pd.DataFrame], folds: Mapping[str, Fold],
                   choose: Callable[[dict[Setting, pd.DataFrame]], Setting]) -> tuple[pd.DataFrame, dict[str, Setting]]:
    """Per-query values (index qid) of the cross-validated choice, and {fold: chosen setting}.

    `tables` maps each candidate setting to its per-query table over all queries;
    `choose` receives {setting: that table's dev rows of one fold} and returns a setting.
    A fold none of whose dev or none of whose test queries were run (a smoke run over a few
    seeds) selects nothing and is left out; when no fold is left, the table is empty.
    """
    if not folds:
        raise DataError("collection", "selection needs dev/test folds; this collection defines none")
    chosen, parts = {}, []
    for name, fold in folds.items():
        dev_ids = [q for q in fold.dev if any(q in t.index for t in tables.values())]
        test_ids = [q for q in fold.test if any(q in t.index for t in tables.values())]
        if not dev_ids or not test_ids:
            continue
        chosen[name] = choose({s: t.loc[t.index.isin(dev_ids)].copy() for s, t in tables.items()})
        table = tables[chosen[name]]
        parts.append(table.loc[table.index.isin(test_ids)])
    if not parts:
        return next(iter(tables.values())).iloc[0:0], chosen
    return pd.concat(parts).sort_index(), chosen


def best_mean(column: str) -> Callable[[dict[Setting, pd.DataFrame]], Setting]:
    """A chooser: the setting with the highest mean of `column`; the first listed among equals."""

    def choose(dev: dict[Setting, pd.DataFrame]) -> Setting:
        means = pd.Series({s: t[column].mean() for s, t in dev.items()}, dtype=float)
        if means.isna().all():
            raise DataError("dev queries", f"no dev values of {column} to choose from; check the dev queries")
        return means.index[means.to_numpy().argmax() if not means.isna().any() else means.fillna(-float("inf"))
                           .to_numpy().argmax()]

    return choose
