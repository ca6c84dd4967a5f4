"""What every benchmark does with its figures: print them as JSON and, with --out, keep a copy."""

from __future__ import annotations

import json
from pathlib import Path


def emit(report: dict, out: Path | None) -> None:
    """Print the report as indented JSON; also write it to `out` (folders created) when given."""
    text = json.dumps(report, indent=1)
    print(text)
    if out:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text + "\n")
