"""The summary under a user's instruction file (issue 46 item 5d, found by `make all INSTRUCTIONS=...`):
the sensitivity table then names its variants as the file does (``base``, ``aspect-subset``, ``terse``),
not by the study's group labels (``Base``, ``Aspect subset``); the findings and the trade-off read
both, and a file without the study's variants gets a sentence, not a crash."""

from __future__ import annotations

import pandas as pd

from evalkit.study import findings, tradeoff

MEASURE = "nDCG_csfcube@20"


def tables(variants: list[str]) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    relevance = pd.DataFrame([{"model": "m", "label": "M", "role": "probe", "source": "kit", "measure": MEASURE,
                               "all": 60.0, "status": "ran"}])
    following = pd.DataFrame([{"model": "m", "label": "M", "role": "probe", "source": "kit", "all": 1.0,
                               "status": "ran"}])
    values = {"base": (60.0, 1.0), "Base": (60.0, 1.0), "aspect-subset": (50.0, 9.0), "Aspect subset": (50.0, 9.0),
              "terse": (58.0, 2.0)}
    sensitivity = pd.DataFrame([{"model": "m", "label": "M", "variant": v, MEASURE: values[v][0],
                                 "p-MRR": values[v][1], "status": "ran"} for v in variants])
    return relevance, following, sensitivity


def test_the_files_own_names_read_as_the_studys_labels():
    kit = findings.findings(*tables(["Base", "Aspect subset"]))
    mine = findings.findings(*tables(["base", "aspect-subset", "terse"]))
    assert mine[-1] == kit[-1] == "(c) M: Aspect subset raises p-MRR (+1.00 -> +9.00) and lowers " \
                                  f"{MEASURE} (60.00 -> 50.00)."


def test_a_file_without_the_aspect_subset_is_a_sentence():
    stated = findings.findings(*tables(["base", "terse"]))
    assert stated[-1] == "(c) M: not stated: the sensitivity table has no aspect-subset variant (the instruction " \
                         "file lacks it)."


def test_the_base_variant_of_a_file_is_the_models_base_point_not_a_variant_point():
    relevance, following, sensitivity = tables(["base", "aspect-subset", "terse"])
    following = following.assign(measure="p-MRR")
    hybrid = pd.DataFrame(columns=["label", "setting", MEASURE, "p-MRR", "status"])
    points = tradeoff.points(relevance, following, sensitivity, hybrid)
    kit = points[points.kind == "kit"]
    assert sorted(kit.variant) == ["Base", "aspect-subset", "terse"]
