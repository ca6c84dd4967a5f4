"""The build tag that names a study's outputs, from the parameters that change their content.

``PROFILE-PROTOCOL``; a smoke run (SEEDS) adds ``-smoke-HASH`` of the sorted seed ids; any
parameter that changes a table's rows (MODELS, REFERENCE_MODEL, a non-default DISCOUNT,
INSTRUCTIONS, CORPUS, the recipe's BEIR / FOLLOWIR / INSTRUCTIR, OFFICIAL=yes) adds ``-custom-HASH`` of
those values, so a partial model list or another instruction file never overwrites the full
study's tables; an edited notebook adds ``-edited-HASH`` (`evalkit.study.edited`), so an edited
study never replaces the kit's. A profile or protocol name that is not a plain path part is written by the kit's
one naming rule (`evalkit.core.names.name_part`: its slug and a digest; the parameter check
refuses it later, in one line).

Standard library only: the Makefile runs this module with the system Python from the repository
root to name its targets (``python3 -m evalkit.study.tag NAME=VALUE ...``), before the kit is
installed; ``evalkit/__init__.py``, ``evalkit/core`` and ``evalkit/study/__init__.py`` import
nothing beyond the standard library on that path.
"""

from __future__ import annotations

import sys
from pathlib import Path

from evalkit.core.names import digest as _digest
from evalkit.core.names import name_part
from evalkit.study.edited import edited_part

CONTENT = ("MODELS", "REFERENCE_MODEL", "DISCOUNT", "INSTRUCTIONS", "CORPUS", "BEIR", "FOLLOWIR", "INSTRUCTIR",
           "OFFICIAL")
DEFAULTS = {"DISCOUNT": "csfcube", "OFFICIAL": "no"}


def seed_ids(seeds: str) -> list[str]:
    """The seed ids of SEEDS, sorted and unique (blanks dropped)."""
    return sorted({s.strip() for s in str(seeds).split(",") if s.strip()})


def build_tag(profile: str, protocol: str, seeds: str = "", **content: str) -> str:
    """PROFILE-PROTOCOL[-smoke-HASH][-custom-HASH] (see the module docstring)."""
    tag = f"{name_part(profile)}-{name_part(protocol)}"
    chosen = seed_ids(seeds)
    if chosen:
        tag += f"-smoke-{_digest(','.join(chosen))}"
    unknown = sorted(set(content) - set(CONTENT))
    if unknown:
        raise ValueError(f"build_tag: {unknown[0]} does not name a content parameter")
    changed = {k: str(v) for k, v in content.items() if str(v or "").strip() and str(v) != DEFAULTS.get(k)}
    if changed:
        tag += f"-custom-{_digest(chr(10).join(f'{k}={v}' for k, v in sorted(changed.items())))}"
    return tag


def main(argv: list[str]) -> None:
    values = dict(arg.split("=", 1) for arg in argv if "=" in arg)
    print(build_tag(values.pop("PROFILE", ""), values.pop("PROTOCOL", ""), values.pop("SEEDS", ""),
                    **{k: v for k, v in values.items() if k in CONTENT}) + edited_part(Path("notebooks")))


if __name__ == "__main__":
    main(sys.argv[1:])
