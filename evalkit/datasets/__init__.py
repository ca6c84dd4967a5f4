"""Dataset adapters: each reads one collection's own format and returns a `Collection`.

`load_dataset(spec)` is the one entry point (the CLI's ``--dataset``); a spec names the
adapter by scheme. Each adapter module declares its scheme (``SCHEME``, a `Scheme`:
`evalkit.datasets.scheme`); this package registers the kit's own in the order the help lists them,
and everything here reads that one registry: `load_dataset`, the help (``DATASET_HELP``), the scheme
names (``SCHEMES``) and the usage line of the errors. A collection of a user's registers itself with
`register` (then ``load_dataset("toy:FOLDER")`` reads it and the help lists it): `DECLARED`, the
kit's one registry pattern (`evalkit.core.declarations`). Declaring a scheme imports nothing heavy:
an adapter imports its optional library (``ir_datasets``, ``huggingface_hub``) inside its loader, so
a CSFCube run never imports ``ir_datasets`` and a missing optional package is reported only by the
scheme that needs it. A mistyped folder is reported as not found, never as a missing package.
"""

from __future__ import annotations

from pathlib import Path

from evalkit.core.declarations import Declarations
from evalkit.core.errors import DataError, RequestError
from evalkit.data.collection import Collection
from evalkit.datasets import beir, csfcube, followir, instructir, irds
from evalkit.datasets.scheme import FOLDER, NOTHING, Annotators, FullCorpus, Scheme

# The kit's own schemes, in the order the help lists them: the one registration list.
KIT_SCHEMES = (csfcube.SCHEME, beir.SCHEME, followir.SCHEME, instructir.SCHEME, irds.SCHEME)
DECLARED = Declarations(Scheme, "scheme", KIT_SCHEMES, example="NAME, TAKES, LOADER, HELP")
register = DECLARED.register  # a scheme of a user's (listed last in the help); returns it: ``SCHEME = register(...)``


def schemes() -> tuple[Scheme, ...]:
    """The registered schemes, in help order (the kit's own first)."""
    return DECLARED.values()


def dataset_help() -> str:
    """The help's datasets section: every registered scheme, its spec and what it reads."""
    return "\n".join(["datasets (--dataset SPEC):", *(line for s in schemes() for line in s.help_lines())])


def usage() -> str:
    """The errors' usage line: ``use csfcube, beir:FOLDER, ... or irds:ID``."""
    specs = [s.spec for s in schemes()]
    return "use " + (f"{', '.join(specs[:-1])} or {specs[-1]}" if len(specs) > 1 else specs[0])


def __getattr__(name: str):
    """``DATASET_HELP`` and ``SCHEMES``, read from the registry when asked for (a scheme registered
    later is in them)."""
    if name == "DATASET_HELP":
        return dataset_help()
    if name == "SCHEMES":
        return tuple(DECLARED.items)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _folder(spec: str, path: str, scheme: Scheme) -> Path:
    folder = Path(path).expanduser()
    if not folder.exists():
        raise DataError(f"`{spec}`", f"folder not found; {scheme.hint}")
    if not folder.is_dir():
        raise DataError(f"`{spec}`", f"not a folder; {scheme.hint}")
    return folder


def scheme_of(spec: str) -> Scheme | None:
    """The registered scheme a dataset spec names (the word before ':'), or None."""
    return DECLARED.get(spec.strip().partition(":")[0])


def declared_corpus(spec: str) -> FullCorpus | None:
    """The full protocol's corpus file the scheme of dataset `spec` declares (`Scheme.full_corpus`), or None."""
    scheme = scheme_of(spec)
    return None if scheme is None else scheme.full_corpus


def missing_corpus(spec: str) -> str:
    """The full protocol without a corpus file, as a `RequestError` problem of ``protocol``: what the
    dataset's scheme declares (`Scheme.full_corpus`: its file and how to download it), else that a
    corpus file must be given."""
    declared = declared_corpus(spec)
    if declared is not None:
        return declared.missing
    return "needs {corpus}, a corpus file its collection reads (this dataset declares none to download)"


def full_corpus(spec: str, given: str | None = None) -> str:
    """The one rule for the full protocol's corpus file of dataset `spec`, for every front end: `given`,
    else the file its scheme's declaration finds downloaded (`Scheme.full_corpus`), else a RequestError
    of ``protocol`` (`missing_corpus`)."""
    if given:
        return given
    declared = declared_corpus(spec)
    found = None if declared is None else declared.downloaded()
    if found is None:
        raise RequestError("protocol", missing_corpus(spec), value="full")
    return str(found)


def input_folder(spec: str) -> Path | None:
    """The folder whose files a dataset spec reads, where its scheme can say (`Scheme.input_folder`);
    None for an unknown scheme or one whose data lies elsewhere (an outputs check reads this)."""
    scheme = scheme_of(spec)
    return None if scheme is None else scheme.input_folder(spec.strip().partition(":")[2])


def _resolve(spec: str) -> tuple[Scheme, tuple, bool]:
    """(the scheme a spec names, what its loader takes: nothing, the text or the checked folder,
    whether it is one of the scheme's `names` for `load_name`), or the spec's one-line error."""
    name, colon, rest = spec.strip().partition(":")
    scheme = DECLARED.get(name)
    if not colon and scheme is not None and scheme.takes == NOTHING:
        return scheme, (), False
    if not colon:
        raise RequestError("dataset", f"no dataset scheme; {usage()} (e.g. beir:{spec})", value=spec)
    if scheme is not None and scheme.takes == NOTHING:
        raise RequestError("dataset", f"{name} takes no folder ({scheme.hint}); write {name}", value=spec)
    if scheme is None:
        raise RequestError("dataset", f"unknown dataset scheme {name!r}; {usage()}", value=spec)
    if not rest:
        raise RequestError("dataset", f"nothing after '{name}:'; {usage()}", value=spec)
    if scheme.takes != FOLDER:
        return scheme, (rest,), False
    if rest.lower() in scheme.names and not Path(rest).expanduser().is_dir():
        return scheme, (rest.lower(),), True
    return scheme, (_folder(spec, rest, scheme),), False


def load_dataset(spec: str) -> Collection:
    """The collection a spec names (``DATASET_HELP``), checked (`Collection.check`)."""
    scheme, arguments, by_name = _resolve(spec)
    return scheme.load_name(*arguments) if by_name else scheme.load(*arguments)


def human_schemes() -> tuple[Scheme, ...]:
    """The registered schemes whose collections carry annotators' grades (`Scheme.human`)."""
    return tuple(s for s in schemes() if s.human is not None)


def load_annotated(spec: str) -> tuple[Collection, Annotators]:
    """The collection a spec names and each query's annotators' grades (`Scheme.human`), for the
    Human reference; a scheme without them is a one-line error naming those that have them."""
    scheme = scheme_of(spec)
    if scheme is None or scheme.human is None:
        having = " or ".join(s.name for s in human_schemes()) or "no registered dataset"
        raise RequestError("dataset", f"the Human reference exists only for {having} (its annotators' grades)",
                           value=spec)
    scheme, arguments, by_name = _resolve(spec)
    if by_name:
        raise RequestError("dataset", f"the Human reference reads {scheme.name}'s folder, not a name", value=spec)
    return scheme.human(*arguments)


__all__ = ["DATASET_HELP", "KIT_SCHEMES", "SCHEMES", "Annotators", "Scheme", "dataset_help", "human_schemes",
           "input_folder", "load_annotated", "load_dataset", "register", "scheme_of", "schemes", "usage"]
