"""Dataset adapters: each reads one collection's own format and returns a `Collection`.

`load_dataset(spec)` is the one entry point (the CLI's ``--dataset``); a spec names the
adapter by scheme (`DATASET_HELP`). Adapters import lazily, so a CSFCube run never imports
``ir_datasets`` and a missing optional package is reported only by the scheme that needs it.
A mistyped folder is reported as not found, never as a missing package.
"""

from __future__ import annotations

import importlib
from pathlib import Path

from evalkit.core.errors import KitError
from evalkit.data.collection import Collection

DATASET_HELP = """\
datasets (--dataset SPEC):
  csfcube                  CSFCube (Mysore et al., 2021), fetched and verified by the kit
  beir:FOLDER              a BEIR folder: corpus.jsonl, queries.jsonl, qrels/test.tsv
                           (qrels/dev.tsv, or else 10 seeded qrels/train.tsv queries, as the dev fold)
  followir:FOLDER_OR_NAME  a FollowIR folder (robust04, news21 or core17 in its name), or one
                           of robust04, news21, core17 fetched from the Hugging Face hub
  instructir:FOLDER        the InstructIR folder (BEIR layout, queries '<instruction> [SEP] <query>')
  irds:ID                  an ir_datasets id (beir/scifact/test...) or msmarco-dev, dl19, dl20
                           (needs pip install 'evalkit[recipe]')"""

SCHEMES = ("csfcube", "beir", "followir", "instructir", "irds")
_USAGE = "use csfcube, beir:FOLDER, followir:FOLDER_OR_NAME, instructir:FOLDER or irds:ID"
_FOLDERS = {
    "beir": "give a BEIR folder holding corpus.jsonl, queries.jsonl and qrels/test.tsv",
    "followir": "give a FollowIR folder or one of robust04, news21, core17",
    "instructir": "give the InstructIR folder holding corpus.jsonl, queries.jsonl and qrels/test.tsv",
}


def _folder(spec: str, path: str, scheme: str) -> Path:
    folder = Path(path).expanduser()
    if not folder.exists():
        raise KitError(f"`{spec}`: folder not found; {_FOLDERS[scheme]}")
    if not folder.is_dir():
        raise KitError(f"`{spec}`: not a folder; {_FOLDERS[scheme]}")
    return folder


def load_dataset(spec: str) -> Collection:
    """The collection a spec names (`DATASET_HELP`), checked (`Collection.check`)."""
    scheme, colon, rest = spec.strip().partition(":")
    if not colon and scheme == "csfcube":
        return importlib.import_module("evalkit.datasets.csfcube").load_collection()
    if not colon:
        raise KitError(f"`{spec}`: no dataset scheme; {_USAGE} (e.g. beir:{spec})")
    if scheme == "csfcube":
        raise KitError(f"`{spec}`: csfcube takes no folder (the kit fetches and verifies it); write csfcube")
    if scheme not in SCHEMES:
        raise KitError(f"`{spec}`: unknown dataset scheme {scheme!r}; {_USAGE}")
    if not rest:
        raise KitError(f"`{spec}`: nothing after '{scheme}:'; {_USAGE}")
    if scheme == "irds":
        # lazy (start-up cost): an adapter loads only when its scheme is asked for
        from evalkit.datasets.irds import load_irds

        return load_irds(rest)
    if scheme == "beir":
        # lazy (start-up cost): an adapter loads only when its scheme is asked for
        from evalkit.datasets.beir import load_beir

        return load_beir(_folder(spec, rest, scheme))
    if scheme == "instructir":
        # lazy (start-up cost): an adapter loads only when its scheme is asked for
        from evalkit.datasets.instructir import load_instructir

        return load_instructir(_folder(spec, rest, scheme))
    # lazy (start-up cost): an adapter loads only when its scheme is asked for
    from evalkit.datasets.followir import HUB, fetch_followir, load_followir

    if rest.lower() in HUB and not Path(rest).expanduser().is_dir():
        return load_followir(fetch_followir(rest.lower()), name=rest.lower())
    return load_followir(_folder(spec, rest, scheme))


__all__ = ["DATASET_HELP", "SCHEMES", "load_dataset"]
