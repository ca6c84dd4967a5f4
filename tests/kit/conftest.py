"""The smoke study every notebook test reads: the study notebooks run once under papermill (four
seeds, the offline profile's fast models), shared by tests/kit/test_notebooks.py and
tests/kit/test_notebook_edits.py."""

from __future__ import annotations

import pytest
from notebook_run import STUDY, execute


@pytest.fixture(scope="session")
def workspace(tmp_path_factory):
    folder = tmp_path_factory.mktemp("study")
    with pytest.MonkeyPatch.context() as patch:
        patch.delenv("EVALKIT_MODELS", raising=False)
        for name in STUDY:
            execute(name, folder)
    return folder
