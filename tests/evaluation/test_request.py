"""The evaluation request's rules, each checked once for every front end (`evalkit.evaluation.request`)."""

from __future__ import annotations

import pytest

from evalkit import cli
from evalkit.core.errors import CLI, RequestError
from evalkit.evaluation.request import EvaluationRequest, check_options
from evalkit.evaluation.stats import check_test
from evalkit.pipeline.settings import RunRequest


@pytest.mark.parametrize("kwargs, text", [
    ({"test": "fisher", "permutations": 3}, "permutations=3: give between 100 and 10,000,000"),
    ({"test": "fisher", "permutations": 10**12}, "permutations=1000000000000: give between"),
    ({"test": "fisher", "permutations": True}, "permutations=True: give a whole number"),
    ({"test": "fisher", "permutations": 1.5}, "permutations=1.5: give a whole number"),
    ({"test": "fisher", "permutations": "100"}, "permutations='100': give a whole number"),
    ({"test": "fisher", "seed": -1}, "seed=-1: give a whole number from 0"),
    ({"permutations": 500}, "permutations= sets Fisher's randomization test; add test='fisher'"),
    ({"test": "z"}, "test='z': choose one of t, fisher"),
    ({"alpha": 1.5}, "alpha=1.5: give a significance level"),
])
def test_the_test_rule_refuses_each_bad_option(kwargs, text):
    with pytest.raises(RequestError) as raised:
        check_test(**kwargs)
    assert str(raised.value).startswith(text)


def test_the_test_rule_keeps_good_options():
    settings = check_test("fisher", 0.01, 100, 0)
    assert (settings.test, settings.alpha, settings.permutations, settings.seed) == ("fisher", 0.01, 100, 0)
    assert check_test().described() == {"test": "t"}


@pytest.mark.parametrize("argv, fields", [
    (["--test", "fisher", "--permutations", "3"], {"test": "fisher", "permutations": 3}),
    (["--test", "fisher", "--seed", "-1"], {"test": "fisher", "seed": -1}),
    (["--test", "fisher", "--permutations", "0"], {"test": "fisher", "permutations": 0}),
    (["--test", "fisher", "--permutations", "-1"], {"test": "fisher", "permutations": -1}),
    (["--test", "fisher", "--permutations", "1000000000000"], {"test": "fisher", "permutations": 10**12}),
    (["--test", "fisher", "--seed", "4294967296"], {"test": "fisher", "seed": 2**32}),
    (["--permutations", "500"], {"permutations": 500}),
    (["--k", "0"], {"k": 0}),
    (["--measures", "AP,AP"], {"measures": ["AP", "AP"]}),
    (["--measures", "AP", "--k", "5"], {"measures": ["AP"], "k": 5}),
    (["--aggregate", "mean", "--discount", "trec", "--measures", "AP"], {"measures": ["AP"], "discount": "trec"}),
])
def test_the_cli_refuses_what_the_api_refuses_with_the_same_line(argv, fields, tmp_path, capsys):
    """Whatever the API's request refuses, `evalkit evaluate` refuses with the same line, the field
    spelled --option (checked before any run is read)."""
    with pytest.raises(RequestError) as raised:
        check_options(EvaluationRequest(**fields))
    run = tmp_path / "run.trec"
    run.write_text("q 0 d 1 1 x\n")
    assert cli.main(["evaluate", "--dataset", "csfcube", "--runs", str(run), *argv]) == 2
    assert capsys.readouterr().err.strip() == f"evalkit: error: {raised.value.for_front_end(CLI)}"


@pytest.mark.parametrize("option, value", [("--permutations", "1.5"), ("--permutations", "abc"),
                                           ("--permutations", "1e3"), ("--seed", "abc"), ("--seed", "0.5")])
def test_the_cli_refuses_a_test_option_that_is_not_a_whole_number_in_one_line(option, value, tmp_path, capsys):
    run = tmp_path / "run.trec"
    run.write_text("q 0 d 1 1 x\n")
    with pytest.raises(SystemExit) as raised:  # argparse's own refusal, as the kit's one line
        cli.main(["evaluate", "--dataset", "csfcube", "--runs", str(run), "--test", "fisher", option, value])
    assert raised.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("evalkit: error: ") and option in err and "Traceback" not in err


@pytest.mark.parametrize("schema, fields, text", [
    (EvaluationRequest, {"aggregate": "median", "k": 0}, "aggregate='median': choose one of folds, mean"),
    (EvaluationRequest, {"measures": ["AP"], "k": 0}, "k=0: give a positive whole number"),
    (EvaluationRequest, {"measures": ["AP", "AP"], "test": "z"}, "measures= lists AP twice; list each measure once"),
    (EvaluationRequest, {"seeds": [" "], "queries": ["q"]}, "seeds= give seeds= or queries=, not both"),
    (EvaluationRequest, {"k": 10**30}, "k='10000000000000000000': absurdly large; give at most 1,000,000"),
    (EvaluationRequest, {"mesures": ["AP"]}, "mesures= is no field of EvaluationRequest; give one of dataset,"),
    (RunRequest, {"profile": "nope", "depth": 0}, "depth=0: give a positive whole number"),
    (RunRequest, {"depth": 5, "first_stage": "bm25"}, "protocol='pool': depth= applies to the pooled and full"),
    (RunRequest, {"first_stage": 5, "protocol": "pooled"}, "first_stage=5: input should be a valid string"),
])
def test_a_request_with_several_bad_fields_is_refused_by_the_first_rule_in_order(schema, fields, text):
    """The first error is the one the rules' order gives (`RequestSchema.ORDER`: the protocol, the
    aggregation, the default table's shape, the measures, the test, ..., the selection), not pydantic's
    field order (the paired test's fields first); a rule over two fields reads the earlier one."""
    with pytest.raises(RequestError) as raised:
        schema(**fields)
    assert str(raised.value).startswith(text)


def test_the_rules_order_names_every_field_once():
    for schema in (EvaluationRequest, RunRequest):
        assert sorted(schema.ORDER) == sorted(schema.model_fields) and len(set(schema.ORDER)) == len(schema.ORDER)
