"""Hostile make parameters and notebook failures: a parameter is data, never shell code.

- every make parameter reaches the launched notebook as one literal string (quotes, ``$``,
  backticks, spaces, ``$(shell ...)``): make runs a stand-in interpreter that records what it
  was given, and nothing the values spell is executed;
- the launcher (`evalkit.make.launch`) hands those strings to papermill unchanged, typed only
  where the notebook's default is a number;
- an error inside a notebook ends as the kit's one line, status 2, with no ``.tmp.ipynb`` and
  no executed notebook that looks complete.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from notebook_run import write_notebook

from evalkit.core.errors import KitError
from evalkit.make import launch
from evalkit.study import tag

ROOT = Path(__file__).resolve().parents[2]
HOSTILE = ['bm25"; touch pwned-dq; echo "', "bm25'; touch pwned-sq; echo '", "a`touch pwned-bt`b",
           "$(touch pwned-sub)", "$(shell touch pwned-make)", "x $HOME ${PATH} $$ y", "semi;colon & amp | pipe"]

RECORDER = """#!{python}
import json, os, sys
with open({log!r}, "a") as log:
    log.write(json.dumps({{"argv": sys.argv[1:], "env": {{k: v for k, v in os.environ.items()
                          if k.startswith("EVALKIT_PARAM_")}}}}) + "\\n")
"""


@pytest.fixture
def recorder(tmp_path):
    """A stand-in for the venv's python and evalkit that records its arguments and parameters."""
    log = tmp_path / "calls.jsonl"
    script = tmp_path / "record"
    script.write_text(RECORDER.format(python=sys.executable, log=str(log)))
    script.chmod(0o755)
    stamp = tmp_path / "stamp"
    stamp.touch()
    return script, stamp, log


def _make(recorder, tmp_path, target: str, **params: str) -> subprocess.CompletedProcess:
    script, stamp, _ = recorder
    args = ["make", "-s", target, f"PY={script}", f"EVALKIT={script}", f"STAMP={stamp}",
            f"OUTPUT_DIR={tmp_path / 'build'}", *(f"{k}={v}" for k, v in params.items())]
    return subprocess.run(args, cwd=ROOT, capture_output=True, text=True, timeout=120)


def _no_pwned(*folders: Path) -> None:
    found = [p for folder in folders for p in folder.glob("pwned*")]
    assert not found, f"a parameter ran as shell code: {found}"


@pytest.mark.parametrize("value", HOSTILE)
def test_every_make_parameter_reaches_the_notebook_literally(recorder, tmp_path, value):
    params = {"MODELS": value, "SEEDS": value, "REFERENCE_MODEL": value, "CORPUS": value, "RUNS_DIR": value,
              "FIGURES_DIR": value, "INSTRUCTIONS": value, "PROFILE": value}
    done = _make(recorder, tmp_path, "relevance", **params)
    assert done.returncode == 0, done.stderr
    calls = [json.loads(line) for line in recorder[2].read_text().splitlines()]
    launched = [c for c in calls if c["argv"][:2] == ["-m", "evalkit.make.launch"]]
    assert [c["argv"] for c in launched] == [["-m", "evalkit.make.launch", "relevance"]]
    env = launched[0]["env"]
    assert all(env[f"EVALKIT_PARAM_{k}"] == v for k, v in params.items())
    _no_pwned(ROOT, tmp_path, Path.cwd())
    # the target make built is named by the same tag as the launcher computes
    expected = tag.build_tag(value, "pool", value, MODELS=value, REFERENCE_MODEL=value, INSTRUCTIONS=value,
                             CORPUS=value)
    assert launch.tag_of(launch.environment_parameters(env)) == expected and "/" not in expected and "'" not in expected


def test_explore_and_report_take_hostile_values_as_data(recorder, tmp_path):
    value = HOSTILE[0]
    done = _make(recorder, tmp_path, "explore", SEED=value, MODELS=value, K="7")
    assert done.returncode == 0, done.stderr
    _no_pwned(ROOT, tmp_path)
    calls = [json.loads(line) for line in recorder[2].read_text().splitlines()]
    explore = next(c for c in calls if c["argv"][-1:] == ["explore"])
    assert explore["env"]["EVALKIT_PARAM_SEED"] == value and explore["env"]["EVALKIT_PARAM_MODELS"] == value


def test_make_all_prints_its_budget_first_and_its_stage_times_last(recorder, tmp_path):
    """`make all` starts with evalkit.make.budget's start lines and ends with its stage times,
    both given the build tag and every executed notebook's stem (the pooled hybrid too), hostile
    MODELS as data (issue 38 item 10)."""
    value = HOSTILE[0]
    done = _make(recorder, tmp_path, "all", MODELS=value)
    assert done.returncode == 0, done.stderr
    _no_pwned(ROOT, tmp_path)
    calls = [json.loads(line)["argv"] for line in recorder[2].read_text().splitlines()]
    built, pooled = tag.build_tag("offline", "pool", MODELS=value), tag.build_tag("offline", "pooled", MODELS=value)
    stems = [f"{n}-{built}" for n in ("relevance", "instruction_following", "sensitivity", "hybrid", "summary",
                                       "promptriever")] + [f"hybrid-{pooled}"]
    assert calls[0] == ["-m", "evalkit.make.budget", "start", built, *stems]
    assert calls[-1] == ["-m", "evalkit.make.budget", "end", built, *stems]
    assert sum("evalkit.make.budget" in c for c in calls) == 2


# --- the launcher: parameters to papermill, errors in one line -----------------------------------------




def test_the_launcher_passes_declared_parameters_literally_and_typed(tmp_path, monkeypatch):
    import papermill

    write_notebook(tmp_path, "echo", "", 'MODELS = ""\nK = 10\nOUTPUT_DIR = "build"\nTAG = ""')
    seen = {}

    def fake_execute(source, out, parameters, **kwargs):
        seen.update(parameters)
        Path(out).write_text("{}")

    monkeypatch.setattr(papermill, "execute_notebook", fake_execute)
    given = {"MODELS": HOSTILE[1], "K": "7", "OUTPUT_DIR": str(tmp_path / "build"), "SEEDS": "1", "PROFILE": "p"}
    out = launch.run("echo", given, root=tmp_path)
    assert seen == {"MODELS": HOSTILE[1], "K": 7, "OUTPUT_DIR": str(tmp_path / "build"),
                    "TAG": launch.tag_of(given)}  # SEEDS and PROFILE are not declared: not passed
    assert out.is_file() and not list(out.parent.glob("*.tmp.ipynb"))
    with pytest.raises(KitError, match=r"K='seven': is not a number"):
        launch.run("echo", {**given, "K": "seven"}, root=tmp_path)


@pytest.mark.parametrize("body, line, kept", [
    ('from evalkit.core.errors import KitError\nraise KitError("SEEDS: 1 is no seed; list seed paper ids")',
     "evalkit: error: SEEDS: 1 is no seed; list seed paper ids", False),
    ("1 / 0", "evalkit: error: notebooks/broken.ipynb failed: ZeroDivisionError: division by zero", True),
])
def test_an_error_inside_a_notebook_is_one_line_and_leaves_nothing_complete(tmp_path, body, line, kept):
    write_notebook(tmp_path, "broken", body, 'OUTPUT_DIR = "build"')
    env = {**os.environ, "EVALKIT_PARAM_OUTPUT_DIR": str(tmp_path / "build"), "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", "import sys; from evalkit.make import launch; "
                           "sys.exit(launch.main(['broken']))"], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 2
    lines = [x for x in done.stderr.splitlines() if x.startswith("evalkit: error:")]
    assert len(lines) == 1 and lines[0].startswith(line) and "Traceback" not in done.stderr
    assert done.stderr.strip().splitlines()[-1] == lines[0]  # the last thing printed
    left = sorted(p.name for p in (tmp_path / "build" / "notebooks").iterdir())
    assert not [n for n in left if n.endswith(".tmp.ipynb") or n == "broken-offline-pool.ipynb"]
    assert left == (["broken-offline-pool.failed.ipynb"] if kept else [])


def test_an_explore_page_is_named_by_every_parameter_that_changes_it():
    given = {"SEED": "929877", "MODELS": "bm25, minilm", "K": "7", "DISCOUNT": "trec", "PROFILE": "offline",
             "PROTOCOL": "pool"}
    assert launch.explore_stem(given) == "explore-929877-bm25+minilm-k7-trec-offline-pool"
    assert launch.explore_stem({**given, "DISCOUNT": "csfcube"}) == "explore-929877-bm25+minilm-k7-offline-pool"
    hostile = launch.explore_stem({**given, "SEED": "../x", "MODELS": "st:/m/a,bm25"})
    assert "/" not in hostile and hostile.startswith("explore-x") and "+bm25-k7-trec-" in hostile


# --- every variable the Makefile reads, set to a value that would run code anywhere it was pasted ----------

ASSIGNED = re.compile(r"^(?:override\s+|export\s+)*(?:define\s+)?([A-Za-z_][A-Za-z0-9_]*)\s*(?::=|\?=|\+=|=|$)")
REFERENCED = re.compile(r"\$[({]([A-Za-z_][A-Za-z0-9_]*)[)}]")
TOOLS = {"PYTHON", "PY", "EVALKIT", "STAMP", "MAKE", "SHELL", "MAKEFILE_LIST", "VENV"}
PATHS = {"FIGURES_DIR", "RUNS_DIR"}  # kept under the test's folder: notebooks create them


def makefile_variables() -> set[str]:
    """Every variable the Makefile assigns or references (a command line may set any of them)."""
    text = (ROOT / "Makefile").read_text()
    names = {m.group(1) for line in text.splitlines() if (m := ASSIGNED.match(line)) and not line.startswith("\t")}
    names |= set(REFERENCED.findall(text))
    names |= set(re.search(r"ENVIRONMENT_PARAMETERS := ((?:.*\\\n)*.*)", text).group(1).replace("\\", " ").split())
    return {n for n in names if n not in {"value", "shell", "if", "or", "and", "filter", "origin", "eval", "call",
                                          "foreach", "subst", "wildcard", "strip", "info"} and not n.isdigit()}


def hostile(name: str, tmp_path: Path) -> str:
    """One value with every way to run code: make's $(shell), the shell's $(...) and backticks, and
    breaking out of single and double quotes; each touches a marker named after the variable."""
    m = tmp_path / f"pwned-{name}"
    value = (f"a$(shell touch {m}-make)b$(touch {m}-sub)c`touch {m}-bt`d'; touch {m}-sq; '"
             f"e\"; touch {m}-dq; \"f")
    return f"{tmp_path}/o/{value}" if name in PATHS else value


def parameters() -> set[str]:
    """The Makefile's parameters (ENVIRONMENT_PARAMETERS): what a command line may set."""
    text = (ROOT / "Makefile").read_text()
    return set(re.search(r"ENVIRONMENT_PARAMETERS := ((?:.*\\\n)*.*)", text).group(1).replace("\\", " ").split())


def test_the_parser_finds_the_makefiles_variables():
    found = makefile_variables()
    assert {"PROTOCOL", "OUTPUT_DIR", "FORCE", "EXPLORE_MODELS", "SEED", "K", "TAG", "NB", "BUILD", "PY", "STAMP",
            "STRICT", "EVALKIT_PROGRESS", "MAKE"} <= found


@pytest.mark.parametrize("target", ["help", "relevance", "explore", "report", "plan"])
@pytest.mark.parametrize("dry", [True, False], ids=["make-n", "make"])
def test_no_make_variable_runs_code(recorder, tmp_path, target, dry):
    """Every parameter the Makefile reads set on the command line to `hostile`: nothing runs, under
    make and make -n, at parse time and in the recipes; the parameters reach the launched notebook
    literally. The tool variables (programs the recipes run) keep the recorder here and are tested
    below; the Makefile's other variables are refused by name (the next test)."""
    script, stamp, log = recorder
    params = {n: hostile(n, tmp_path) for n in parameters() - TOOLS}
    params["OUTPUT_DIR"] = str(tmp_path / "build")  # make's targets: a plain path (refused otherwise, below)
    args = ["make", "-s", *(["-n"] if dry else []), target, f"PY={script}", f"EVALKIT={script}", f"STAMP={stamp}",
            *(f"{k}={v}" for k, v in params.items())]
    done = subprocess.run(args, cwd=ROOT, capture_output=True, text=True, timeout=120)
    _no_pwned(ROOT, tmp_path)
    if not dry and target in ("relevance", "explore"):
        assert done.returncode == 0, done.stderr
        launched = [json.loads(line) for line in log.read_text().splitlines()]
        env = next(c["env"] for c in launched if "evalkit.make.launch" in c["argv"])
        assert env["EVALKIT_PARAM_SEED"] == params["SEED"]
        assert env["EVALKIT_PARAM_MODELS"] == params["MODELS"]
        assert env["EVALKIT_PARAM_OUTPUT_DIR"] == params["OUTPUT_DIR"]


@pytest.mark.parametrize("dry", [True, False], ids=["make-n", "make"])
def test_a_variable_that_is_no_parameter_is_one_line_naming_the_parameters(recorder, tmp_path, dry):
    """46.7: ``make relevance MODEL=bm25`` (MODELS misspelled) ran the whole profile, MODEL read by
    nothing. A command-line variable that is no parameter, a misspelling or one of the Makefile's own
    (TAG, NB, ... set to `hostile`), is one line naming it and the parameters, before anything runs
    and without its value being expanded; the same name in the environment is not refused."""
    script, stamp, log = recorder
    internals = {n: hostile(n, tmp_path) for n in makefile_variables() - parameters() - TOOLS}
    assert {"TAG", "NB", "BUILD"} <= set(internals)
    base = ["make", "-s", *(["-n"] if dry else []), "relevance", f"PY={script}", f"EVALKIT={script}",
            f"STAMP={stamp}", f"OUTPUT_DIR={tmp_path / 'build'}"]
    for extra in ({"MODEL": "bm25"}, {"MODEL": "bm25", **internals}):
        done = subprocess.run([*base, *(f"{k}={v}" for k, v in extra.items())], cwd=ROOT, capture_output=True,
                              text=True, timeout=120)
        lines = done.stderr.strip().splitlines()
        assert done.returncode != 0 and len(lines) == 1, done.stderr
        named = lines[0].split("unknown parameter ", 1)[1].split(":", 1)[0].split()
        assert sorted(named) == sorted(extra) and "the parameters are PROFILE PROTOCOL MODELS " in lines[0]
        assert not log.exists()  # nothing launched
        _no_pwned(ROOT, tmp_path)
    env = {**os.environ, "MODEL": "bm25", "TAG": "x"}  # the environment's variables are not parameters: ignored
    done = subprocess.run([*base, "-n"] if not dry else base, cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0 and "evalkit.make.launch relevance" in done.stdout, done.stderr


@pytest.mark.parametrize("dry", [True, False], ids=["make-n", "make"])
def test_an_output_dir_make_cannot_name_targets_with_is_one_line(recorder, tmp_path, dry):
    script, stamp, _ = recorder
    done = subprocess.run(["make", "-s", *(["-n"] if dry else []), "relevance", f"PY={script}", f"STAMP={stamp}",
                           f"OUTPUT_DIR={hostile('OUTPUT_DIR', tmp_path)}"], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode != 0 and "is not a plain folder path" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    _no_pwned(ROOT, tmp_path)


def test_no_tool_variable_runs_code(tmp_path):
    """PYTHON, PY, EVALKIT, STAMP, MAKE, SHELL, MAKEFILE_LIST, VENV name programs and files: a hostile
    one is one word that does not exist (make fails), never shell code."""
    tools = {n: hostile(n, tmp_path) for n in TOOLS}
    for target in (["help"], ["-n", "relevance"], ["relevance"], ["pooled"]):
        subprocess.run(["make", "-s", *target, *(f"{k}={v}" for k, v in tools.items())], cwd=ROOT,
                       capture_output=True, text=True, timeout=120)
        _no_pwned(ROOT, tmp_path)


def test_parameters_from_the_environment_run_no_code(recorder, tmp_path):
    script, stamp, log = recorder
    env = {**os.environ, **{n: hostile(n, tmp_path) for n in ("PROTOCOL", "FORCE", "EXPLORE_MODELS", "RUNS_DIR",
                                                               "MODELS", "EVALKIT_PROGRESS", "STRICT")}}
    done = subprocess.run(["make", "-s", "explore", "SEED=1", f"PY={script}", f"EVALKIT={script}",
                           f"STAMP={stamp}", f"OUTPUT_DIR={tmp_path / 'build'}"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    _no_pwned(ROOT, tmp_path)


@pytest.mark.parametrize("sig", [signal.SIGTERM])  # SIGHUP takes the same handler
def test_a_stopped_launch_leaves_no_temporarywrite_notebook(tmp_path, sig):
    write_notebook(tmp_path, "slow", "import time\ntime.sleep(60)", 'OUTPUT_DIR = "build"')
    env = {**os.environ, "EVALKIT_PARAM_OUTPUT_DIR": str(tmp_path / "build"), "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, "-m", "evalkit.make.launch", "slow"], cwd=tmp_path, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    folder = tmp_path / "build" / "notebooks"
    deadline = time.monotonic() + 120
    while not list(folder.glob("*.tmp.ipynb")):  # papermill writes it when the kernel starts
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.05)
    time.sleep(0.5)
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 128 + sig
    lines = [line for line in err.splitlines() if line.startswith("evalkit: error:")]  # (the kernel may add
    assert len(lines) == 1 and lines[0].startswith("evalkit: error: notebooks/slow.ipynb stopped by SIG")  # a note)
    assert list(folder.iterdir()) == []


@pytest.mark.parametrize("given, line", [
    ({"MODELS": "bm25,nosuch"}, "MODELS: unknown model 'nosuch' in profile offline"),
    ({"MODELS": "bm25", "REFERENCE_MODEL": "nosuch", "PROFILE": "paper"}, "REFERENCE_MODEL: unknown model 'nosuch' "
                                                                          "in profile paper"),
])
def test_a_wrong_model_name_is_refused_before_a_kernel_starts(tmp_path, monkeypatch, given, line):
    import papermill

    def no_kernel(*args, **kwargs):
        raise AssertionError("papermill started a kernel")

    monkeypatch.setattr(papermill, "execute_notebook", no_kernel)
    (tmp_path / "notebooks").mkdir()
    (tmp_path / "notebooks" / "relevance.ipynb").write_bytes((ROOT / "notebooks" / "relevance.ipynb").read_bytes())
    with pytest.raises(KitError, match=re.escape(line)):
        launch.run("relevance", {**given, "OUTPUT_DIR": str(tmp_path / "build")}, root=tmp_path)
    assert not (tmp_path / "build").exists()
