"""`evalkit data`: fetch and verify the CSFCube files, or download the full corpus."""

from __future__ import annotations

import argparse
import json

from evalkit.datasets import csfcube


def cmd_data(args: argparse.Namespace) -> None:
    if args.corpus:
        _data_corpus(args.path)
        return
    root = csfcube.fetch()
    if args.path:
        print(root)
        return
    data = csfcube.load(root)
    print(f"CSFCube at {root}: {len(data.queries)} queries, {len(data.papers)} papers, sha256 verified")


def _data_corpus(path_only: bool) -> None:
    """`evalkit data --corpus`: download abstracts-preds.zip (resumed, md5-checked) into the cache."""
    # lazy: loaded only when this command runs (start-up cost, tests/kit/test_imports.py)
    from evalkit.datasets import csfcube_download

    path = csfcube_download.download()
    if path_only:
        print(path)
        return
    record = json.loads(csfcube_download.record_path(path).read_text(encoding="utf-8"))
    print(f"corpus at {path}: {record['size']:,} bytes, md5 {record['md5']} as published, sha256 {record['sha256']}")


def add_parser(command) -> None:
    """Add `evalkit data`, its options and its handler (`command` makes the subparser)."""
    data = command("data", "fetch (if needed) and verify the CSFCube files; with --corpus, download the full "
                           "corpus")
    data.add_argument("--path", action="store_true", help="print only the verified data folder (or corpus file)")
    data.add_argument("--corpus", action="store_true",
                      help="download abstracts-preds.zip (figshare 14796339; resumed, md5-checked) into the cache, "
                           "where the full protocol finds it without --corpus")
    data.set_defaults(func=cmd_data)
