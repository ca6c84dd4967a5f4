"""The kit's one rule for turning a text into a folder- or file-name part.

`name_part(text)` is `text` itself when it is already plain (`is_plain`: letters, digits and
``_ . + -``, not starting with ``.``, ``+`` or ``-``) and does not end as a derived name does
(`looks_derived`: ``-`` and 8 hex digits), so plain names (``csfcube``, ``offline``, ``pool``,
``bm25``) keep their folders and build tags; any other text becomes `labelled(text, text)`: its
readable `slug` and ``-`` and 8 hex digits of the whole text, so two texts never share a part unless
their digests collide (``beir:/data/scifact`` -> ``beir-data-scifact-<8 hex>``; ``café`` ->
``caf-850f7dc4``, and the plain text ``caf-850f7dc4`` -> ``caf-850f7dc4-<8 hex>``, never itself).

`run_part` is the same rule for one part of a run name, whose parts are joined by ``--``
(`evalkit.pipeline.settings.RunSettings.run_name`): a part never holds ``--``, so a model named
``bm25--generic`` never names the folder of bm25's ``generic`` variant. `LIMIT` is the longest run
name and folder name part the run store takes (`evalkit.data.runstore.check_path_part`).
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
    one ``-`` (and runs of ``-`` one ``-``, so a slug never holds a run name's separator ``--``), no
    leading or trailing ``-`` or ``.``, at most 40 characters, `fallback` when nothing is left. Never a
    name on its own (two texts may share a slug): `labelled` adds the digest."""
    return re.sub(r"(?:[^A-Za-z0-9_.-]|-)+", "-", text).strip("-.")[:SLUG_LENGTH].rstrip("-.") or fallback


def labelled(readable: str, whole: str, fallback: str = "x") -> str:
    """``slug(readable)-digest(whole)``: readable, and as distinct as `whole`."""
    return f"{slug(readable, fallback)}-{digest(whole)}"


_DERIVED = re.compile(r".*-[0-9a-f]{8}")
LIMIT = 200  # characters of a run name or a folder name part: a folder name holds 255 bytes, less the
# store's suffixes (``@subset-`` and 10 hex digits, a writer's ``.NAME.new.XXXXXXXX``)


def looks_derived(text: str) -> bool:
    """Whether `text` ends as `labelled` ends its result (``-`` and 8 hex digits): such a text never
    names itself, so no plain name equals another text's derived one."""
    return _DERIVED.fullmatch(text) is not None


def name_part(text: str) -> str:
    """`text` when plain and not `looks_derived`, else its slug and a digest of the whole text
    (module docstring)."""
    return text if is_plain(text) and not looks_derived(text) else labelled(text, text)


def run_part(text: str, reserved: tuple[str, ...] = ()) -> str:
    """One part of a run name: `name_part`'s rule, and no ``--`` (the parts' separator) in it: a text
    holding ``--``, or starting with one of `reserved` (the prefixes of the parts that follow it),
    becomes `labelled` (whose slug holds no ``--``)."""
    if is_plain(text) and not looks_derived(text) and "--" not in text and not text.startswith(reserved):
        return text
    return labelled(text, text)
