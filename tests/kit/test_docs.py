"""The documentation site: `mkdocs build --strict` succeeds (a broken link, a missing page or a bad
API reference fails it, which a damaged copy shows), and every code block marked as running
(an HTML comment ``<!-- runs -->`` on the line before its fence) runs as written, each page's
blocks in order in one fresh interpreter, in an empty folder with its own cache."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
MARK = "<!-- runs -->"
BLOCK = re.compile(re.escape(MARK) + r"\n```python\n(.*?)\n```", re.S)


def build(config: Path, site: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1", "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(config), "-d",
                           str(site)], capture_output=True, text=True, env=env, cwd=config.parent)


def test_the_site_builds_strictly(tmp_path):
    done = build(ROOT / "mkdocs.yml", tmp_path / "site")
    assert done.returncode == 0, done.stdout + done.stderr
    api = (tmp_path / "site" / "api" / "index.html").read_text()
    assert "csfcube_tasks" in api and "to_ranx" in api  # the reference is generated from the docstrings


def test_a_broken_link_fails_the_strict_build(tmp_path):
    shutil.copytree(DOCS, tmp_path / "docs")
    shutil.copy(ROOT / "mkdocs.yml", tmp_path / "mkdocs.yml")
    (tmp_path / "evalkit").symlink_to(ROOT / "evalkit")  # the API reference reads the package
    page = tmp_path / "docs" / "index.md"
    page.write_text(page.read_text() + "\nSee [a page that is not there](no-such-page.md).\n")
    done = build(tmp_path / "mkdocs.yml", tmp_path / "site")
    assert done.returncode != 0 and "no-such-page.md" in done.stdout + done.stderr


def pages_with_blocks() -> list[Path]:
    return sorted(p for p in DOCS.rglob("*.md") if MARK in p.read_text())


def test_every_mark_precedes_a_python_block():
    for page in pages_with_blocks():
        text = page.read_text()
        assert text.count(MARK) == len(BLOCK.findall(text)), f"{page}: a {MARK} not followed by a python block"
    names = {p.relative_to(DOCS).as_posix() for p in pages_with_blocks()}
    assert {"getting-started.md", "adding-a-model.md", "adding-a-collection.md", "adding-a-measure.md",
            "tasks/other-tools.md"} <= names


@pytest.mark.parametrize("page", pages_with_blocks(), ids=lambda p: p.relative_to(DOCS).as_posix())
def test_marked_blocks_run_as_written(page, tmp_path):
    script = tmp_path / f"{page.stem}.py"
    script.write_text("\n\n".join(BLOCK.findall(page.read_text())) + "\n")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "EVALKIT_CACHE": str(tmp_path / "cache"),
           "EVALKIT_PROGRESS": "off", "HF_HUB_OFFLINE": "1"}
    env.pop("EVALKIT_MODELS", None)
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, cwd=tmp_path,
                          timeout=600)
    assert done.returncode == 0, f"{page.name}:\n{done.stdout}\n{done.stderr[-3000:]}"


def test_the_readme_task_list_links_each_task_to_its_page():
    readme = (ROOT / "README.md").read_text()
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


def test_the_readmes_links_into_docs_exist():
    for target in re.findall(r"\]\((docs/[^)#\s]+)", (ROOT / "README.md").read_text()):
        assert (ROOT / target).exists(), target
