"""The worker count: one rule (`evalkit.core.workers`), the same refusal from every front end and
every layer that takes a count, the field spelled as each spells it."""

from __future__ import annotations

import pytest

from evalkit import api, cli
from evalkit.core.errors import KitError, RequestError
from evalkit.core.workers import PROBLEM, check_workers, parse_workers
from evalkit.llm import replicas
from evalkit.pipeline import plan
from evalkit.pipeline.settings import check_execution
from evalkit.study import params

BAD = [0, -1, 1.5, True, "abc", "2"]  # a string is not a count where a number is taken
BAD_TEXT = ["0", "-1", "1.5", "abc", "2 workers", "+3", "²", "٢٠", "１"]  # digits of other scripts: not ASCII


@pytest.mark.parametrize("value", [None, 1, 2, 64])
def test_a_count_or_none_is_taken(value):
    assert check_workers(value) == value
    assert parse_workers(None if value is None else f" {value} ") == value
    check_execution("ray", value)


@pytest.mark.parametrize("value", BAD)
def test_the_rule_refuses_what_is_not_a_positive_whole_number(value):
    with pytest.raises(RequestError) as raised:
        check_workers(value)
    assert raised.value.field == "workers" and raised.value.problem == PROBLEM


@pytest.mark.parametrize("text", BAD_TEXT)
def test_text_is_refused_with_the_same_problem(text):
    with pytest.raises(RequestError) as raised:
        parse_workers(text)
    assert raised.value.field == "workers" and raised.value.problem == PROBLEM
    assert parse_workers("") is None and parse_workers("  ") is None  # not given: one per GPU, else per core


def _api(value, tmp_path, capsys):
    api.evaluate("bm25", "csfcube", runs_dir=tmp_path / "runs", executor="ray", workers=value)


def _plan_api(value, tmp_path, capsys):
    plan.plan("offline", "pool", None, ["bm25"], workers=value)


def _replicas(value, tmp_path, capsys):
    replicas.local_replicas(replicas.ServeCommand("m"), value)


def _settings(value, tmp_path, capsys):
    check_execution("ray", value)


def _cli(command):
    def run(value, tmp_path, capsys):
        argv = {"run": ["run", "--dataset", "csfcube", "--model", "bm25", "--runs-dir", str(tmp_path / "runs"),
                        "--executor", "ray", "--workers", str(value)],
                "plan": ["plan", "--profile", "offline", "--models", "bm25", "--workers", str(value)]}[command]
        assert cli.main(argv) == 2
        raise KitError(capsys.readouterr().err.strip().removeprefix("evalkit: error: "))
    return run


def _notebook(monkeypatch):
    def run(value, tmp_path, capsys):
        monkeypatch.setenv("EVALKIT_EXECUTOR", "ray")
        monkeypatch.setenv("EVALKIT_WORKERS", str(value))
        params.check("hybrid", PROFILE="offline", PROTOCOL="pool")
    return run


@pytest.mark.parametrize("value", [0, -1, 1.5, True, "²"])
def test_every_front_end_refuses_a_bad_count_in_one_line_with_the_rules_problem(value, tmp_path, capsys,
                                                                                 monkeypatch):
    """What the API refuses, `evalkit run`, `evalkit plan`, the notebooks' WORKERS, the plan's and the
    replicas' own callers refuse too, each naming the field its own way (number front ends: the
    value as given; text front ends: the value as typed)."""
    text = {"cli run": (_cli("run"), "--workers "), "cli plan": (_cli("plan"), "--workers "),
            "notebook": (_notebook(monkeypatch), "WORKERS=")}  # "²" (a digit to str.isdigit): text only
    front_ends = text if isinstance(value, str) else {
        "api": (_api, "workers="), "plan": (_plan_api, "workers="), "replicas": (_replicas, "workers="),
        "settings": (_settings, "workers="), **text}
    for name, (call, spelled) in front_ends.items():
        with pytest.raises(KitError) as raised:
            call(value, tmp_path, capsys)
        line = str(raised.value)
        assert line.startswith(spelled) and line.endswith(PROBLEM) and "\n" not in line, (name, line)
