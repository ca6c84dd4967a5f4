"""Prompt templates of config/llm_templates.yaml: load, check, fingerprint."""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

import yaml

from evalkit.core import configfile
from evalkit.core.errors import DataError

TEMPLATES_FILE = Path(__file__).resolve().parents[1] / "config" / "llm_templates.yaml"
PARTS = ("instruction", "seed", "candidate")
SEPARATOR = "\n\n"  # between the prefix and the suffix of a message


@dataclass(frozen=True)
class Template:
    name: str
    prefix: str  # {instruction}, {seed}
    suffix: str  # {a} and {b} (pairwise) or {candidate} (pointwise)
    labels: tuple[str, str]
    budgets: dict[str, int] = field(hash=False)
    answer_prefix: str = ""
    system: str | None = None

    @property
    def pairwise(self) -> bool:
        return "{a}" in self.suffix

    @property
    def digest(self) -> str:
        """Hash of everything that changes a prompt (text, labels, budgets)."""
        text = json.dumps(asdict(self), sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()[:16]


def _check(name: str, path: Path, t: Template) -> None:
    needed = {"prefix": ("{instruction}", "{seed}"),
              "suffix": ("{a}", "{b}") if t.pairwise else ("{candidate}",)}
    for part, fields in needed.items():
        missing = [f for f in fields if f not in getattr(t, part)]
        if missing:
            raise DataError(path, f"template {name} {part} lacks {', '.join(missing)}; add the placeholder")
    if len(t.labels) != 2 or t.labels[0] == t.labels[1]:
        raise DataError(path, f"template {name} needs two different labels, got {list(t.labels)}")
    if set(t.budgets) != set(PARTS) or not all(isinstance(v, int) and v > 0 for v in t.budgets.values()):
        raise DataError(path, f"template {name} budgets must give a positive token count for each of {PARTS}")


def load_template(name: str, budgets: dict[str, int] | None = None, path: Path = TEMPLATES_FILE) -> Template:
    """Template `name`, with `budgets` overriding some of its token budgets."""
    try:
        table = yaml.safe_load(configfile.read_text(Path(path)))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise DataError(path, f"cannot read LLM templates ({exc}); restore the file") from None
    if not isinstance(table, dict) or name not in table:
        raise DataError(path, f"no template {name!r}; choose one of {sorted(table or {})}")
    entry = dict(table[name])
    try:
        template = Template(name=name, prefix=entry.pop("prefix"), suffix=entry.pop("suffix"),
                            labels=tuple(entry.pop("labels")),
                            budgets={**entry.pop("budgets", {}), **(budgets or {})}, **entry)
    except (KeyError, TypeError) as exc:
        raise DataError(path, f"template {name} is malformed ({exc}); give prefix, suffix, labels, budgets") from None
    _check(name, path, template)
    return template
