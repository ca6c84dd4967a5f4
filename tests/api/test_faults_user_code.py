"""Fault injection, the Python API and user code: every bad argument, every odd value a user's
scorer or encoder returns, ends in one `KitError` line naming the argument as the API spells
it (``seeds=``, ``query_template=``); nothing half-written is stored. And the command line: a
closed output pipe ends quietly with status 0, Ctrl-C in one line with status 130. Real CSFCube
pools (one query)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from evalkit import api, cli
from evalkit.core.errors import KitError

QUERY = ["929877_background"]
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("EVALKIT_CACHE", str(tmp_path / "cache"))


def one_line(raised) -> str:
    message = str(raised.value)
    assert "\n" not in message and isinstance(raised.value, KitError)
    return message


def returning(value):
    def score(query, documents):
        return value(documents) if callable(value) else value

    return score


@pytest.mark.parametrize("make, fragment", [
    (lambda docs: ["high"] * len(docs), "'high', a str; scores are real numbers"),
    (lambda docs: {d.doc_id: "0.5" for d in docs}, "'0.5', a str"),
    (lambda docs: [1 + 2j] * len(docs), "a complex; scores are real numbers"),
    (lambda docs: np.ones(len(docs), dtype=complex), "a complex128"),
    (lambda docs: (1.0 for _ in docs), "gave a generator"),
    (lambda docs: [10 ** 400] * len(docs), "an integer of 401 digits, beyond a float"),
    (lambda docs: [True] * len(docs), "a bool"),
    (lambda docs: [None] * len(docs), "a NoneType"),
    (lambda docs: 3.0, "gave a float"),
    (lambda docs: [float("inf")] * len(docs), "non-finite"),
    (lambda docs: np.ones((len(docs), 2)), "an array of shape"),
], ids=["strings", "string-in-dict", "complex", "complex-array", "generator", "10**400", "bool", "none", "scalar",
        "inf", "2d-array"])
def test_a_scorer_returning_odd_values_is_one_line(tmp_path, make, fragment):
    with pytest.raises(KitError) as raised:
        api.evaluate(returning(make), name="odd", queries=QUERY, runs_dir=tmp_path / "runs")
    assert fragment in one_line(raised)
    assert not list((tmp_path / "runs").rglob("run.trec"))  # nothing stored


class Returning:
    def __init__(self, make):
        self.make = make

    def encode(self, texts):
        return self.make(list(texts))


@pytest.mark.parametrize("make, fragment", [
    (lambda texts: [[1.0, 2.0]] + [[1.0]] * (len(texts) - 1), "vectors of different lengths"),
    (lambda texts: np.array([object()] * len(texts), dtype=object).reshape(-1, 1), "object values, not numbers"),
    (lambda texts: {t: [1.0, 2.0] for t in texts}, "encode gave a dict"),
    (lambda texts: np.ones((len(texts), 3)) * (1 + 1j), "complex vectors"),
    (lambda texts: torch.ones(len(texts), 3, dtype=torch.complex64), "complex vectors"),
    (lambda texts: [["a", "b"]] * len(texts), "not numbers"),
    (lambda texts: np.full((len(texts), 3), 1e300), "beyond float32"),
    (lambda texts: np.ones(len(texts)), "shape"),
], ids=["ragged", "object-array", "dict", "complex", "complex-tensor", "strings", "beyond-float32", "1d"])
def test_an_encoder_returning_odd_values_is_one_line(tmp_path, make, fragment):
    with pytest.raises(KitError) as raised:
        api.evaluate(Returning(make), name="odd", queries=QUERY, runs_dir=tmp_path / "runs")
    assert fragment in one_line(raised)


@pytest.mark.parametrize("kwargs, fragment", [
    ({"query_template": "{instr} {query}"}, "query_template= '{instr} {query}' names field {instr}"),
    ({"doc_template": "{body}"}, "doc_template= '{body}' names field {body}"),
    ({"query_template": "{query"}, "query_template= '{query' is not a template"),
    ({"seeds": ["123"]}, "seeds= csfcube has no seed paper 123"),
    ({"seeds": "929877"}, "seeds='929877': a str is not a list of ids"),
    ({"queries": ["nope"]}, "queries= csfcube has no query nope"),
    ({"seeds": ["929877"], "queries": QUERY}, "give seeds= or queries=, not both"),
    ({"aggregate": "median"}, "aggregate='median'"),
    ({"measures": "AP"}, "measures='AP': a str is not a list of measures"),
    ({"measures": ["AP", "AP"]}, "measures= lists AP twice"),
    ({"revision": " "}, "revision= is empty"),
    ({"name": "bm25"}, "name='bm25': is a model of the registry"),
    ({"role": "boss"}, "role='boss'"),
    ({"reference": "no-such-model"}, "reference='no-such-model': neither a model"),
    ({"protocol": "poool"}, "protocol='poool'"),
    ({"profile": "nope"}, "profile='nope'"),
    ({"variants": ["terse"]}, "variants='terse': csfcube has the variants base"),
    ({"discount": "log"}, "discount='log'"),
    ({"k": 0}, "k=0"),
    ({"instructions": "missing.yaml"}, "instructions='missing.yaml': no such file"),
])
def test_api_errors_name_the_argument_as_the_api_spells_it(tmp_path, kwargs, fragment):
    def words(query, documents):
        return [len(d.text) for d in documents]

    arguments = {"name": "words", "queries": QUERY, **kwargs}
    if "seeds" in kwargs and "queries" not in kwargs:
        arguments.pop("queries")
    with pytest.raises(KitError) as raised:
        api.evaluate(words, runs_dir=tmp_path / "runs", **arguments)
    assert fragment in one_line(raised)


def test_st_label_and_a_template_field_that_does_not_exist(tmp_path):
    from evalkit.models import registry

    assert registry.spec("st:org/model;label=My model", "offline").label == "My model"
    assert registry.spec("st:org/model", "offline").label == "st:model"
    with pytest.raises(KitError, match="names field {instr}"):
        registry.build(registry.spec("st:org/model;query={instr} {query}", "offline"), None)


def test_a_closed_pipe_ends_quietly_with_status_0(tmp_path):
    """`evalkit models | head -1`: the reader goes away after one line."""
    code = "import sys; from evalkit import cli; sys.exit(cli.main(['models']))"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    writer = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    writer.stdout.close()  # the reader is gone before anything is written
    status = writer.wait(timeout=120)
    err = writer.stderr.read().decode()
    assert status == 0 and err == "", err


def test_ctrl_c_is_one_line_and_status_130(monkeypatch, capsys):
    def interrupted(args):
        raise KeyboardInterrupt

    monkeypatch.setattr(cli.models, "cmd_models", interrupted)  # the parser is built with it
    assert cli.main(["models"]) == 130
    assert capsys.readouterr().err == "evalkit: interrupted\n"
