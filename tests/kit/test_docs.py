"""The documentation: the README and the site in docs/.

- `mkdocs build --strict` succeeds (a broken link, a missing page or a bad API reference fails
  it, which a damaged copy shows), and the API page renders every parameter of `evaluate`.
- Every python and bash block a page shows is run or says why not: an HTML comment
  ``<!-- runs -->`` on the line before its fence marks it as running; ``<!-- runs in README.md -->``
  marks a copy of a block the README runs (the test checks it is the same text); any other
  block's first line is a comment ``# not run by the docs test: REASON``, which the reader sees.
- The running blocks run as written, each page's python blocks in order in one fresh
  interpreter, then its bash blocks in one shell, in an empty folder with its own cache.
- A ``text`` block after ``<!-- output -->`` shows what the page's blocks print: each of its
  lines is a line they print, in that order; and every figure the paragraph after it states is
  one the block shows (as printed, or as a fraction printed x100 to two decimals), so the
  figures a page states cannot drift from what its code prints. ``<!-- output in README.md -->``
  marks a copy of such a block of the README (the same text, the same rule for its paragraph).
"""

from __future__ import annotations

import importlib
import inspect
import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from evalkit.api import evaluate

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
README = ROOT / "README.md"
RUNS = "<!-- runs -->"
RUNS_IN_README = "<!-- runs in README.md -->"
OUTPUT = "<!-- output -->"
OUTPUT_IN_README = "<!-- output in README.md -->"
NOT_RUN = "# not run by the docs test: "
CHECKED = ("python", "bash")
FENCE = re.compile(r"^```(\w*)$")
FIGURE = re.compile(r"(?<![\w.])-?\d+\.\d+(?![\w.])")


@dataclass(frozen=True)
class Block:
    lang: str
    body: str
    mark: str  # the line before the fence
    after: str  # the paragraph after the fence


def blocks(text: str) -> list[Block]:
    """The fenced blocks of a page, each with the line before it and the paragraph after it."""
    lines, found, i = text.split("\n"), [], 0
    while i < len(lines):
        fence = FENCE.match(lines[i])
        if not fence or not fence.group(1):
            i += 1
            continue
        end = lines.index("```", i + 1)
        rest = "\n".join(lines[end + 1:]).lstrip("\n")
        found.append(Block(fence.group(1), "\n".join(lines[i + 1:end]), lines[i - 1] if i else "",
                           rest.split("\n\n", 1)[0]))
        i = end + 1
    return found


def pages() -> list[Path]:
    return [README, *sorted(DOCS.rglob("*.md"))]


def name(page: Path) -> str:
    return page.relative_to(ROOT).as_posix()


def running(page: Path) -> list[Block]:
    return [b for b in blocks(page.read_text()) if b.mark == RUNS]


def build(config: Path, site: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1", "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(config), "-d",
                           str(site)], capture_output=True, text=True, env=env, cwd=config.parent)


def test_the_site_builds_strictly_and_the_api_page_describes_every_parameter(tmp_path):
    done = build(ROOT / "mkdocs.yml", tmp_path / "site")
    assert done.returncode == 0, done.stdout + done.stderr
    api = (tmp_path / "site" / "api" / "index.html").read_text()
    assert "csfcube_tasks" in api and "to_ranx" in api  # the reference is generated from the docstrings
    for at in (m.start() for m in re.finditer("see the module docstring", api)):  # that docstring is shown
        target = re.findall(r'id="(evalkit[\w.]+)"', api[:at])[-1]
        module, _, attribute = target.rpartition(".")
        home = inspect.getmodule(getattr(importlib.import_module(module), attribute))
        assert " ".join(home.__doc__.split()[:3]) in api, f"{target} refers to {home.__name__}'s docstring, not shown"
    assert 'id="evalkit.api.evaluate"' in api
    section = api.split('id="evalkit.api.evaluate"', 1)[1].split('id="evalkit.api.register_model"', 1)[0]
    parameters = re.search(r"<table>.*?</table>", section, re.S)
    assert parameters, "evaluate's parameter table is not rendered"
    described = set(re.findall(r"<code>(\w+)</code>", parameters.group(0)))
    missing = [p for p in inspect.signature(evaluate).parameters if p not in described]
    assert not missing, f"parameters of evaluate the API page does not describe: {missing}"
    css = (tmp_path / "site" / "stylesheets" / "extra.css").read_text()
    assert 'href="../stylesheets/extra.css"' in api and "pre-wrap" in css and "overflow-wrap: anywhere" in css


def test_a_broken_link_fails_the_strict_build(tmp_path):
    shutil.copytree(DOCS, tmp_path / "docs")
    shutil.copy(ROOT / "mkdocs.yml", tmp_path / "mkdocs.yml")
    (tmp_path / "evalkit").symlink_to(ROOT / "evalkit")  # the API reference reads the package
    page = tmp_path / "docs" / "index.md"
    page.write_text(page.read_text() + "\nSee [a page that is not there](no-such-page.md).\n")
    done = build(tmp_path / "mkdocs.yml", tmp_path / "site")
    assert done.returncode != 0 and "no-such-page.md" in done.stdout + done.stderr


def unexplained(page_text: str, readme_runs: set[str]) -> list[str]:
    """The python and bash blocks of a page that neither run nor say why not (their first lines)."""
    wrong = []
    for block in blocks(page_text):
        if block.lang not in CHECKED:
            continue
        first = block.body.split("\n", 1)[0]
        if block.mark == RUNS:
            continue
        if block.mark == RUNS_IN_README and block.body in readme_runs:
            continue
        if first.startswith(NOT_RUN) and len(first[len(NOT_RUN):].split()) >= 2:
            continue
        wrong.append(first)
    return wrong


def readme_runs() -> set[str]:
    return {b.body for b in running(README)}


def test_every_python_and_bash_block_runs_or_says_why_not():
    for page in pages():
        wrong = unexplained(page.read_text(), readme_runs())
        assert not wrong, f"{name(page)}: blocks that neither run nor say why not ({NOT_RUN}REASON): {wrong}"
    names = {name(p) for p in pages() if running(p)}
    assert {"README.md", "docs/getting-started.md", "docs/adding-a-model.md", "docs/adding-a-collection.md",
            "docs/adding-a-measure.md", "docs/tasks/other-tools.md"} <= names


def test_the_rule_refuses_a_block_without_a_reason():
    assert unexplained("```bash\nmake all\n```\n", set()) == ["make all"]
    assert unexplained("```python\n# not run by the docs test:\nx = 1\n```\n", set())  # no reason given
    assert unexplained(f"{RUNS_IN_README}\n```python\nx = 2\n```\n", {"x = 1"}) == ["x = 2"]  # not the README's
    assert not unexplained(f"```bash\n{NOT_RUN}needs a GPU\nmake all\n```\n```yaml\na: 1\n```\n", set())


def test_every_mark_precedes_a_block_it_can_mark():
    for page in pages():
        text = page.read_text()
        found = blocks(text)
        for mark, langs in ((RUNS, CHECKED), (RUNS_IN_README, CHECKED), (OUTPUT, ("text",)),
                            (OUTPUT_IN_README, ("text",))):
            assert text.count(mark + "\n```") == text.count(mark), f"{name(page)}: a {mark} not before a fence"
            assert all(b.lang in langs for b in found if b.mark == mark), f"{name(page)}: {mark} before a " \
                                                                         f"block other than {langs}"


def figures_stated(after: str, shown: str) -> list[str]:
    """The figures of the paragraph `after` an output block that the block does not show."""
    printed = FIGURE.findall(shown)
    hundredths = {f"{float(p) * 100:.2f}" for p in printed}
    return [f for f in FIGURE.findall(after) if f not in printed and f.lstrip("-") not in hundredths]


def test_a_copy_of_the_readmes_output_is_the_same_and_states_only_its_figures():
    shown = {b.body for b in blocks(README.read_text()) if b.mark == OUTPUT}
    copies = [(page, b) for page in pages() for b in blocks(page.read_text()) if b.mark == OUTPUT_IN_README]
    assert copies, f"no page copies the README's output ({OUTPUT_IN_README})"
    for page, copy in copies:
        assert copy.body in shown, f"{name(page)}: an output block that is not the README's"
        assert not figures_stated(copy.after, copy.body), f"{name(page)}: {figures_stated(copy.after, copy.body)}"


def test_a_stated_figure_must_be_one_the_output_shows():
    shown = "nDCG_csfcube@20   0.641151 0.111570 3.852158 0.003893 10"
    assert figures_stated("NDCG@20 64.12, delta 11.16, p = 0.003893", shown) == []  # as printed, or x100
    assert figures_stated("NDCG@20 64.13, t 3.85, p = 0.0039", shown) == ["64.13", "3.85", "0.0039"]


def printed_in_order(expected: str, printed: str) -> list[str]:
    """The lines of `expected` not found in `printed`'s lines in that order."""
    lines, at, missing = [line.rstrip() for line in printed.splitlines()], 0, []
    for line in (x.rstrip() for x in expected.splitlines()):
        if line in lines[at:]:
            at = lines.index(line, at) + 1
        else:
            missing.append(line)
    return missing


@pytest.mark.parametrize("page", [p for p in pages() if running(p)], ids=name)
def test_marked_blocks_run_as_written(page, tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT), "EVALKIT_CACHE": str(tmp_path / "cache"),
           "EVALKIT_PROGRESS": "off", "HF_HUB_OFFLINE": "1",
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    env.pop("EVALKIT_MODELS", None)
    printed = ""
    for lang, command in (("python", [sys.executable]), ("bash", ["bash", "-euo", "pipefail"])):
        code = [b.body for b in running(page) if b.lang == lang]
        if not code:
            continue
        script = tmp_path / f"{page.stem}.{lang}"
        script.write_text("\n\n".join(code) + "\n")
        done = subprocess.run([*command, str(script)], capture_output=True, text=True, env=env, cwd=tmp_path,
                              timeout=600)
        assert done.returncode == 0, f"{name(page)} ({lang}):\n{done.stdout}\n{done.stderr[-3000:]}"
        printed += done.stdout
    for shown in (b for b in blocks(page.read_text()) if b.mark == OUTPUT):
        assert not printed_in_order(shown.body, printed), \
            f"{name(page)}: shown but not printed: {printed_in_order(shown.body, printed)}\nprinted:\n{printed}"
        assert not figures_stated(shown.after, shown.body), \
            f"{name(page)}: figures stated but not printed: {figures_stated(shown.after, shown.body)}"


def test_the_readme_task_list_links_each_task_to_its_page():
    readme = README.read_text()
    tasks = readme.split("\n# Tasks\n", 1)[1].split("\n## ", 1)[0]
    bullets = [line for line in tasks.splitlines() if line.startswith("- ")]
    assert len(bullets) >= 8
    nav = (ROOT / "mkdocs.yml").read_text()
    for bullet in bullets:
        pages = re.findall(r"\]\((docs/[^)#]+\.md)\)", bullet)
        assert pages, f"README task without a page: {bullet}"
        for page in pages:
            assert (ROOT / page).is_file(), page
            assert page.removeprefix("docs/") in nav, f"{page} is not in the site's nav"


def test_the_make_targets_tables_list_every_output_the_study_names():
    """Each ``study.name("X")`` output of the study code and notebooks (the comparison table, the
    findings, ...) is in the notebooks page's make targets table (the README links it)."""
    code = "".join(p.read_text() for p in (ROOT / "evalkit" / "study").glob("*.py"))
    for notebook in (ROOT / "notebooks").glob("*.ipynb"):  # the notebooks' own cells name outputs too
        code += "".join("".join(c["source"]) for c in json.loads(notebook.read_text())["cells"])
    outputs = set(re.findall(r"study\.name\([\"']([\w-]+)[\"']\)", code))
    assert "comparison" in outputs
    assert "docs/tasks/notebooks-and-make.md" in README.read_text()
    for page in (DOCS / "tasks" / "notebooks-and-make.md",):
        table = "\n".join(line for line in page.read_text().splitlines() if line.startswith("| `make "))
        assert not [o for o in outputs if f"{o}-TAG" not in table], f"{name(page)}: outputs not listed"


def test_the_readmes_links_into_docs_exist():
    for target in re.findall(r"\]\((docs/[^)#\s]+)", README.read_text()):
        assert (ROOT / target).exists(), target


def test_the_readme_stays_the_guide():
    """The quick start and the tasks, at most 450 lines; the reference lives in docs/."""
    assert len(README.read_text(encoding="utf-8").splitlines()) <= 450
