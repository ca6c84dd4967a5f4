"""One request, refused in one line by every front end (`evalkit.evaluation.request`).

Each bad request below is refused by `check_request` (the rules every front end's request
follows); every front end that takes the request's fields refuses it with that very line, the
field spelled as the front end spells it (`evalkit.core.errors.spell`): the API's ``evaluate``,
``evalkit evaluate`` and ``evalkit run``, the study notebooks' parameters, the explore page, the
ranx, ir_measures and mteb integrations. The bad measures come from the registered declarations
(one listed twice, for each), the bad names from the registered protocols, aggregations and
seeds, so a measure, protocol or seed added later is covered without editing this file.
"""

from __future__ import annotations

import pytest

from evalkit import api, cli
from evalkit.core.errors import API, CLI, EXPLORE, NOTEBOOK, RequestError, spell
from evalkit.data.protocols import PROTOCOLS
from evalkit.evaluation import measures
from evalkit.evaluation.evaluate import AGGREGATIONS
from evalkit.evaluation.request import EvaluationRequest, check_request
from evalkit.evaluation.stats import MIN_PERMUTATIONS
from evalkit.pipeline.settings import RunRequest


def _unknown(known, stem: str) -> str:
    """A name none of `known` is (the stem, lengthened until it is none of them)."""
    name = stem
    while name in known:
        name += "x"
    return name


def _measure_names() -> list[str]:
    """A name of every registered measure family (its cut-off where it needs one)."""
    return sorted({spec.family + ("@10" if spec.cutoff == "needs" else "") for spec in measures.declarations()})


def _unknown_measure() -> str:
    name = "NoSuchMeasure"
    while measures.find(name) is not None:
        name += "x"
    return name


CASES = {
    "fisher-permutations": {"test": "fisher", "permutations": MIN_PERMUTATIONS - 1},
    "unknown-measure": {"measures": [_unknown_measure()]},
    **{f"twice-{name}": {"measures": [name, name]} for name in _measure_names()},
    "bad-k": {"k": 0},
    "unknown-protocol": {"protocol": _unknown(PROTOCOLS, "bogus")},
    "unknown-aggregate": {"aggregate": _unknown(AGGREGATIONS, "median")},
    "unknown-seed": {"seeds": ["123"]},
    "no-seed-ids": {"seeds": [" ", " "]},  # what SEEDS=" , " and --seeds " , " give: a list naming no id
    "seeds-and-queries": {"seeds": ["929877"], "queries": ["929877_method"]},
}
ONE_SEED = {"no-seed-ids"}  # cases of a list of seeds: not the explore page's one SEED

# What each front end takes of the request (the fields it has a parameter for) and how it spells them.
TAKES = {
    "api": ({"test", "permutations", "measures", "k", "protocol", "aggregate", "seeds", "queries"}, API),
    "cli": ({"test", "permutations", "measures", "k", "protocol", "aggregate", "seeds", "queries"}, CLI),
    "notebook": ({"protocol", "seeds"}, NOTEBOOK),
    "explore": ({"protocol", "k", "seeds"}, EXPLORE),
    "ranx": ({"measures", "protocol", "seeds", "queries"}, API),
    "ir_measures": ({"measures", "protocol", "seeds", "queries"}, API),
    "mteb": ({"protocol", "seeds"}, API),
}


def _cli_value(value) -> str:
    return ",".join(map(str, value)) if isinstance(value, list) else str(value)


def _refusal(front_end: str, fields: dict, collection, specter, tmp_path, capsys) -> str:
    """The one line `front_end` refuses the request of `fields` with."""
    try:
        if front_end == "api":
            api.evaluate("bm25", "csfcube", runs_dir=tmp_path / "runs", **fields)
        elif front_end == "cli":
            argv = [arg for field, value in fields.items() for arg in (f"--{field}", _cli_value(value))]
            if "seeds" in fields or "queries" in fields:  # `evalkit run` selects queries; `evaluate` scores the run's
                argv = ["run", "--dataset", "csfcube", "--model", "bm25", "--runs-dir", str(tmp_path / "runs"), *argv]
            else:
                run = tmp_path / "run.trec"
                run.write_text("q 0 d 1 1 x\n")
                argv = ["evaluate", "--dataset", "csfcube", "--runs", str(run), *argv]
            assert cli.main(argv) == 2
            err = capsys.readouterr().err
            assert err.startswith("evalkit: error: ") and err.count("\n") == 1
            return err.strip().removeprefix("evalkit: error: ")
        elif front_end == "notebook":
            from evalkit.study import params

            study = params.check("relevance", PROFILE="offline", PROTOCOL=fields.get("protocol", "pool"),
                                 SEEDS=",".join(fields.get("seeds", [])), RUNS_DIR=str(tmp_path / "runs"))
            study.queries(collection)
        elif front_end == "explore":
            from evalkit.pages import explore, explore_views

            chosen = explore.check(PROFILE="offline", PROTOCOL=fields.get("protocol", "pool"),
                                   SEED=fields.get("seeds", ["929877"])[0], MODELS="bm25", K=fields.get("k", 10),
                                   RUNS_DIR=str(tmp_path / "runs"))
            explore_views.check_seed(collection, chosen.seed)  # what `load_checked` checks first
        elif front_end in ("ranx", "ir_measures"):
            if front_end == "ranx":
                from evalkit.integrations.ranx import ranx_metrics as names_of
                from evalkit.integrations.ranx import to_ranx as convert
            else:
                from evalkit.integrations.ir_measures import ir_measures_of as names_of
                from evalkit.integrations.ir_measures import to_ir_measures as convert
            if "measures" in fields:
                names_of(fields["measures"], collection, fields.get("protocol", "pool"))
            else:
                convert(specter, collection, fields.get("protocol", "pool"), seeds=fields.get("seeds"),
                        queries=fields.get("queries"))
        elif front_end == "mteb":
            pytest.importorskip("mteb")
            from evalkit.integrations.mteb import csfcube_tasks

            csfcube_tasks(collection, **fields)
    except RequestError as exc:
        return str(exc)
    raise AssertionError(f"{front_end} accepted {fields}")


@pytest.mark.parametrize("front_end", list(TAKES))
@pytest.mark.parametrize("case", list(CASES))
def test_every_front_end_refuses_the_same_request_with_the_same_line(front_end, case, collection, specter,
                                                                     tmp_path, capsys, monkeypatch):
    fields = CASES[case]
    takes, spelling = TAKES[front_end]
    if not set(fields) <= takes or (front_end == "explore" and case in ONE_SEED):
        pytest.skip(f"{front_end} has no parameter for {case}")
    monkeypatch.setenv("EVALKIT_CACHE", str(tmp_path / "cache"))
    with pytest.raises(RequestError) as expected:
        check_request(EvaluationRequest(**fields), collection)
    assert _refusal(front_end, fields, collection, specter, tmp_path, capsys) == \
        str(expected.value.for_front_end(spelling))


def test_every_case_is_taken_by_more_than_one_front_end():
    """No case is a one-front-end rule: each is refused by at least two front ends compared above."""
    for case, fields in CASES.items():
        assert sum(set(fields) <= takes for name, (takes, _) in TAKES.items()
                   if not (name == "explore" and case in ONE_SEED)) >= 2, case


def test_the_explore_page_judges_its_runs_as_its_protocol_does(data, collection):
    """Under ``released`` the page's figures are the request's evaluation of the released pools
    (the seed ranked and judged), as the API's and the CLI's: not the pool protocol's judgments."""
    from evalkit.data.protocols import protocol_collection
    from evalkit.evaluation.evaluate import per_query
    from evalkit.pages import explore_views

    released = protocol_collection(collection, "released")
    qid = "8781666_background"  # its seed is judged (grade 3) in its own pool as released
    run = {q: {d.doc_id: float(int(d.doc_id) % 101) for d in released.candidates_of(q)} for q in released.queries}
    run[qid][qid.split("_")[0]] = 1e9  # the seed first
    page = explore_views.Explorer(data, collection, {"m": run}, protocol="released")
    expected = per_query(released, run, ["nDCG_csfcube@20"])
    assert page.tables["m"].loc[qid, "nDCG_csfcube@20"] == expected.loc[qid, "nDCG_csfcube@20"]
    assert page.tables["m"].loc[qid, "nDCG_csfcube@20"] != per_query(collection, run, ["nDCG_csfcube@20"]).loc[
        qid, "nDCG_csfcube@20"]


# --- every field of the two request schemas, refused alike by the API, the CLI and the notebooks ------------

# A bad value of each field that has a rule (with the fields it needs beside it); the test below fails for a
# field added to either schema without one here. ``runs_dir``'s bad value (a file) is made by the test.
BAD = {
    "protocol": ("bogus", {}), "aggregate": ("median", {}), "discount": ("cosine", {}), "k": (0, {}),
    "measures": (["AP", "AP"], {}), "test": ("z", {}), "alpha": (1.5, {}),
    "permutations": (MIN_PERMUTATIONS - 1, {"test": "fisher"}), "seed": (-1, {"test": "fisher"}),
    "family": ("triples", {}), "pmrr_ties": ("random", {}), "seeds": ([" ", " "], {}), "queries": ([" ", " "], {}),
    "profile": ("nope", {}), "instructions": ("missing.yaml", {}), "prompt": (" ", {}), "first_stage": ("bm25", {}),
    "depth": (0, {}), "corpus": ("abstracts-preds.zip", {}), "index_dtype": ("int8", {}),
    "executor": ("spark", {}), "workers": (2, {}), "runs_dir": (None, {}),
}
UNRULED = {"dataset", "variants"}  # their rules need the collection (`load_dataset`, `select_variants`)
# The fields each front end has a parameter for, beyond the API's (every field): the CLI's index dtype and
# executor are argparse choices and it has no alpha; the notebooks build the evaluation request of these.
CLI_TAKES = (set(BAD) | UNRULED) - {"alpha", "index_dtype", "executor"}
NOTEBOOK_TAKES = {"protocol", "discount", "seeds"}
SCHEMA_FIELDS = sorted({*EvaluationRequest.model_fields, *RunRequest.model_fields} - UNRULED)


def _schema_refusal(front_end: str, fields: dict, tmp_path, capsys) -> str:
    """The one line `front_end` refuses `fields` (of either request) with."""
    runs = {} if "runs_dir" in fields else {"runs_dir": str(tmp_path / "runs")}
    try:
        if front_end == API:
            api.evaluate("bm25", "csfcube", **runs, **fields)
        elif front_end == CLI:
            argv = [arg for field, value in {**runs, **fields}.items()
                    for arg in (spell(field, CLI), _cli_value(value))]
            if set(fields) & set(EvaluationRequest.model_fields) - {"seeds", "queries"}:
                (tmp_path / "run.trec").write_text("q 0 d 1 1 x\n")
                argv = ["evaluate", "--dataset", "csfcube", "--runs", str(tmp_path / "run.trec"),
                        *[a for a in argv if a not in ("--runs-dir", runs.get("runs_dir"))]]
            else:
                argv = ["run", "--dataset", "csfcube", "--model", "bm25", *argv]
            assert cli.main(argv) == 2
            err = capsys.readouterr().err
            assert err.startswith("evalkit: error: ") and err.count("\n") == 1
            return err.strip().removeprefix("evalkit: error: ")
        else:
            from evalkit.study import params

            params.check("relevance", PROFILE="offline", PROTOCOL=fields.get("protocol", "pool"),
                         SEEDS=",".join(fields.get("seeds", [])), DISCOUNT=fields.get("discount"),
                         RUNS_DIR=str(tmp_path / "runs"))
    except RequestError as exc:
        return str(exc)
    raise AssertionError(f"{front_end} accepted {fields}")


@pytest.mark.parametrize("field", SCHEMA_FIELDS)
def test_every_schema_field_is_refused_alike_by_the_api_the_cli_and_the_notebooks(field, tmp_path, capsys):
    """For every field of `EvaluationRequest` and `RunRequest` (iterated, not listed), a bad value is
    refused by the schema and by each front end that takes the field with the schema's one line,
    the field spelled as that front end spells it."""
    assert field in BAD, f"give {field} a bad value in BAD"
    value, needs = BAD[field]
    if field == "runs_dir":
        value = str(tmp_path / "a-file")
        (tmp_path / "a-file").write_text("")
    fields = {**needs, field: value}
    schema = EvaluationRequest if field in EvaluationRequest.model_fields else RunRequest
    with pytest.raises(RequestError) as expected:
        schema(**fields)
    assert expected.value.field in (field, "protocol")  # the pool protocols' first stage: the protocol's line
    front_ends = [API] + [CLI] * (field in CLI_TAKES) + [NOTEBOOK] * (field in NOTEBOOK_TAKES)
    for front_end in front_ends:
        assert _schema_refusal(front_end, fields, tmp_path, capsys) == str(expected.value.for_front_end(front_end))
