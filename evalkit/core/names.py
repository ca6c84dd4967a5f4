"""The kit's one rule for turning a text into a folder- or file-name part.

`name_part(text)` is `text` itself when it is already plain (`is_plain`: letters, digits and
``_ . + -``, not starting with ``.``, ``+`` or ``-``), so plain names (``csfcube``, ``offline``,
``pool``, ``bm25``) keep their folders and build tags; any other text becomes `labelled(text,
text)`: its readable `slug` and ``-`` and 8 hex digits of the whole text, so two texts never share a
part unless their digests collide (``beir:/data/scifact`` -> ``beir-data-scifact-<8 hex>``).
`labelled` is the same rule for a name whose readable half and identity differ (a model object's
class name and its fingerprint, `evalkit.api`; an ``st:`` spec's folder name and the whole spec,
`evalkit.models.adhoc`). Every result passes `evalkit.data.runstore.check_path_part`.

Standard library only and importing nothing of the kit: the Makefile names its targets with
``python3 -m evalkit.study.tag`` from the repository root before the kit is installed.
"""

from __future__ import annotations

import hashlib
import re

_PLAIN = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.+-]*")
SLUG_LENGTH = 40


def digest(text: str) -> str:
    """8 hex digits of the sha256 of `text`: the identity half of a derived name."""
    return hashlib.sha256(text.encode()).hexdigest()[:8]


def is_plain(text: str) -> bool:
    """Whether `text` is already a plain name part (it then names itself)."""
    return isinstance(text, str) and _PLAIN.fullmatch(text) is not None


def slug(text: str, fallback: str = "x") -> str:
    """The readable half of a derived name: runs of anything but letters, digits, ``_ . -`` become
    one ``-``, no leading or trailing ``-`` or ``.``, at most 40 characters, `fallback` when nothing
    is left. Never a name on its own (two texts may share a slug): `labelled` adds the digest."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", text).strip("-.")[:SLUG_LENGTH] or fallback


def labelled(readable: str, whole: str, fallback: str = "x") -> str:
    """``slug(readable)-digest(whole)``: readable, and as distinct as `whole`."""
    return f"{slug(readable, fallback)}-{digest(whole)}"


def name_part(text: str) -> str:
    """`text` when plain, else its slug and a digest of the whole text (module docstring)."""
    return text if is_plain(text) else labelled(text, text)
