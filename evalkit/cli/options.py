"""What the commands share: the one-line usage error, and the options checked before anything is
loaded or scored (ids, folders, output files, measures, the full protocol's corpus)."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from evalkit.core.errors import RequestError, report
from evalkit.core.workers import ascii_whole
from evalkit.datasets import full_corpus as corpus_of
from evalkit.datasets import input_folder
from evalkit.evaluation.evaluate import AGGREGATIONS, DISCOUNTS
from evalkit.evaluation.measures import measure_help
from evalkit.evaluation.request import EvaluationRequest
from evalkit.pipeline.run_input import same_file


class ArgumentParser(argparse.ArgumentParser):
    """argparse that reports a usage error in the kit's one line (no usage block)."""

    def error(self, message: str):  # type: ignore[override]
        sys.exit(report(message))


# --- arguments checked before anything is loaded or scored ------------------------------------


def whole(text: str) -> int:
    """argparse's type of a whole-number option (``--k``, ``--depth``, ``--seed``): an optional sign
    and ASCII digits (`evalkit.core.workers.ascii_whole`; ``int`` would read ``٢٠`` as 20); the
    request's rules then check the number. Anything else: argparse's one line, "invalid whole number"."""
    text = text.strip()
    sign = -1 if text.startswith("-") else 1
    value = ascii_whole(text[1:] if text[:1] in "+-" and text[:1] else text)
    if value is None:
        raise ValueError(text)
    return sign * value


whole.__name__ = "whole number"  # argparse names the type in its error: "invalid whole number value"


def split_ids(text: str | None, option: str) -> tuple[str, ...] | None:
    """Comma-separated ids, blanks dropped, repeats dropped (first kept); None when not given."""
    if text is None:
        return None
    ids = tuple(dict.fromkeys(part.strip() for part in text.split(",") if part.strip()))
    if not ids:
        raise RequestError(option.lstrip("-").replace("-", "_"),
                           f"{text!r} names no ids; give comma-separated ids, e.g. {option} a,b")
    return ids


def split_list(text: str | None) -> list[str] | None:
    """Comma-separated values as a list (blanks dropped), for a request rule to check
    (`evalkit.data.collection.select_queries`: ``--seeds ,`` names no ids); None when not given."""
    return None if text is None else [part.strip() for part in text.split(",") if part.strip()]


def check_output_file(path: Path, option: str) -> Path:
    """The file to write for an output option: a regular file or a new one, in an existing folder this
    user may write (checked before any work). A symlink is written through (the file it points at
    is replaced, the link kept); a device, FIFO or socket is refused, never replaced by a file."""
    if path.is_symlink():
        try:
            path = path.resolve(strict=False)
        except (OSError, RuntimeError):  # a loop of links
            raise RequestError(option.lstrip("-").replace("-", "_"),
                               "is a symlink that resolves to no file; give a file name",
                               value=str(path)) from None
    if path.exists() and not path.is_dir() and not path.is_file():
        raise RequestError(option.lstrip("-").replace("-", "_"),
                           "is not a regular file (a device, FIFO or socket); give a file name",
                           value=str(path))
    if path.is_dir():
        raise RequestError(option.lstrip("-").replace("-", "_"), "is a folder; give a file name", value=str(path))
    if not path.parent.is_dir():
        raise RequestError(option.lstrip("-").replace("-", "_"),
                           f"cannot write the file (folder {path.parent} does not exist)",
                           value=str(path))
    if not os.access(path.parent, os.W_OK | os.X_OK) or (path.exists() and not os.access(path, os.W_OK)):
        raise RequestError(option.lstrip("-").replace("-", "_"),
                           "cannot write the file (not writable); give a path you can write",
                           value=str(path))
    return path


def is_within(path: Path, folder: Path) -> bool:
    try:
        return path.resolve().is_relative_to(folder.resolve())
    except OSError:
        return False


def check_not_input(path: Path, runs: Path | None, dataset: str, option: str) -> None:
    """Refuse an output path that is one of the files the command reads (the run, the dataset's files)."""
    inputs = [] if runs is None else [runs] if runs.is_file() else \
        [p for p in runs.iterdir() if p.is_file()] if runs.is_dir() else []
    hit = next((p for p in inputs if same_file(path, p)), None)
    folder = input_folder(dataset)
    if hit is None and folder is not None and path.is_file() and is_within(path, folder):
        hit = path
    if hit is not None:
        raise RequestError(option.lstrip("-").replace("-", "_"),
                           f"is an input file ({hit}); write the per-query CSV elsewhere",
                           value=str(path))


def choices(values) -> str:
    """The metavar of an option whose value a request rule checks (not argparse's ``choices``, so the
    refusal is the rule's one line, as every front end's): ``{a,b,c}``, as argparse shows choices."""
    return "{" + ",".join(values) + "}"


# --- measures -----------------------------------------------------------------------------------


def evaluation_request(args: argparse.Namespace, **fields) -> EvaluationRequest:
    """The evaluation request the command's options fill (``--measures a,b`` a list of names;
    options a command lacks keep the request's defaults; `fields` override). The request's
    rules (`evalkit.evaluation.request`) check it; their errors name ``--measures`` etc. when
    the CLI prints them."""
    given = {name: getattr(args, name) for name in ("dataset", "protocol", "discount", "k", "aggregate", "test",
                                                       "permutations", "seed", "family", "pmrr_ties")
             if hasattr(args, name)}
    if getattr(args, "measures", None) is not None:
        given["measures"] = args.measures.split(",")
    return EvaluationRequest(**({k: v for k, v in given.items() if v is not None} | fields))


def add_measure_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--measures", metavar="M1,M2",
                        help=f"measures ({measure_help().replace('%', '%%')}); default: the dataset's own, for csfcube "
                             "the kit's table and the release's official MAP_csfcube and nDCG_csfcube%%20")
    parser.add_argument("--discount", metavar=choices(DISCOUNTS), default=None,
                        help="csfcube default table: nDCG_csfcube@k (official script, the default) or nDCG@k (trec)")
    parser.add_argument("--k", type=whole, default=None, help="csfcube default table: cut-off for nDCG, P and R (20)")
    parser.add_argument("--aggregate", metavar=choices(AGGREGATIONS), default="folds",
                        help="folds: mean of the test folds' means where the dataset has folds; mean: plain mean")
    parser.add_argument("--per-query", metavar="CSV", help="also write per-query values to this CSV")
    parser.add_argument("--json", action="store_true", help="print one JSON object (NaN as null) instead of a table")



def full_corpus(args: argparse.Namespace) -> None:
    """The full protocol's corpus: --corpus, else the file the dataset's scheme downloaded
    (`evalkit.datasets.full_corpus`, every front end's rule)."""
    if args.protocol == "full":
        args.corpus = corpus_of(args.dataset, args.corpus)
