"""A dataset scheme: how ``--dataset SPEC`` names one collection format, and the loader that reads it.

Each adapter module declares its scheme as one frozen `Scheme` (``SCHEME`` beside its loader);
`evalkit.datasets` registers the kit's own in help order and reads that one registry for
`load_dataset`, the help (``DATASET_HELP``), the scheme names (``SCHEMES``) and the usage line of
its errors. A collection of a user's registers itself the same way (``evalkit.datasets.register``),
as an ``ir_datasets`` collection does.

A scheme takes one of three things after its name:

- `NOTHING`: the spec is the bare name (``csfcube``); the loader is called with no argument;
- `FOLDER`: ``name:FOLDER``; the folder is checked (found, a folder) before the loader gets its
  `Path`, and a scheme may also accept some `names` instead (``followir:news21``), read by
  `load_name` when no folder by that name exists;
- `NAME`: ``name:TEXT``; the loader gets the text (``irds:dl19``).

A scheme also declares what the commands beyond evaluation may do with its collections, so no
command asks for a collection by name: `exports`, the ``evalkit export`` formats it is written
in (`evalkit.datasets.export.FORMATS`; none: it is already in such a format), and `human`, the
loader of its collection with each query's annotators' grades (`Annotators`), which the Human
reference ranks by (``evalkit human``; None: it has no annotators' grades). A collection's own
evaluation traits (its default table, a reader of its own ranked files) are parts of the
`Collection` its loader returns (`evalkit.data.collection`).

Declaring a scheme imports nothing heavy: an adapter imports an optional library (``ir_datasets``,
``huggingface_hub``) inside its loader, so a CSFCube run never loads them and a missing optional
package is reported only by the scheme that needs it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from evalkit.core.errors import DeclarationError, KitError
from evalkit.data.collection import Collection
from evalkit.datasets.export import FORMATS

NOTHING, FOLDER, NAME = "nothing", "folder", "name"
TAKES = (NOTHING, FOLDER, NAME)
HELP_COLUMN = 25  # the width of the spec column in the help
Annotators = Mapping[str, Sequence[Mapping[str, int]]]  # qid -> each annotator's grades, in annotator order


@dataclass(frozen=True)
class FullCorpus:
    """A scheme's corpus file for the ``full`` protocol (its collections' `Collection.read_corpus`
    reads it): the file's name, where it is published, the command that downloads it and the make
    target that runs the command, and `downloaded` (the file once downloaded, else None). The kit's
    one rule for the full protocol's corpus (`evalkit.datasets.full_corpus`) reads it, for every
    front end and the plan, so no caller names a collection."""

    file: str
    source: str
    command: str
    target: str
    downloaded: Callable[[], Path | None]

    @property
    def missing(self) -> str:
        """The full protocol without a corpus file: a `RequestError` problem of ``protocol``."""
        return (f"needs {{corpus}}, {self.file} from {self.source}: download it with `{self.command}` "
                f"({self.target}), then no path is needed")

    @property
    def fix(self) -> str:
        """What the plan says to do while the file is not downloaded."""
        return f"{self.command} ({self.target}), or give --corpus PATH"


@dataclass(frozen=True)
class Scheme:
    """One ``--dataset`` scheme (module docstring).

    `help` is the text beside the spec in the help, one line or several (newline-separated);
    `argument` the word after the colon in the help and the usage line (``FOLDER``, ``ID``; ""
    for `NOTHING`). `hint` completes the one-line errors: for `FOLDER`, what the folder must hold
    (``give a BEIR folder holding ...``), said when it is missing or not a folder; for `NOTHING`,
    why the scheme takes no folder (``the kit fetches and verifies it``). `exports` and `human`:
    the module docstring (`human` takes what `load` takes)."""

    name: str
    takes: str
    load: Callable[..., Collection]
    help: str
    argument: str = ""
    hint: str = ""
    names: tuple[str, ...] = ()  # FOLDER: names read by `load_name` instead of a folder (lower case)
    load_name: Callable[[str], Collection] | None = None
    locate: Callable[[], Path] | None = None  # NOTHING: the folder its files are in (outputs may not overwrite them)
    exports: tuple[str, ...] = ()  # the `evalkit export` formats (of FORMATS) its collections are written in
    human: Callable[..., tuple[Collection, Annotators]] | None = None  # (collection, annotators' grades)
    full_corpus: FullCorpus | None = None  # the full protocol's corpus file, where the scheme has one to download

    def __post_init__(self):
        if not isinstance(self.name, str) or not self.name.isidentifier() or self.name != self.name.lower():
            raise DeclarationError(f"scheme {self.name!r}", "the name must be a lower-case identifier (the word "
                                                              "before ':')")
        declared = f"scheme {self.name!r}"
        if self.takes not in TAKES:
            raise DeclarationError(declared, f"takes {self.takes!r} is not one of {', '.join(TAKES)}")
        if (self.takes == NOTHING) != (not self.argument):
            raise DeclarationError(declared, "give an argument word (FOLDER, ID...) unless it takes nothing")
        if self.names and (self.takes != FOLDER or self.load_name is None):
            raise DeclarationError(declared, "names need a FOLDER scheme and load_name")
        if not callable(self.load):
            raise DeclarationError(declared, f"load {self.load!r} is not callable; give the loader function")
        if self.locate is not None and self.takes != NOTHING:
            raise DeclarationError(declared, "locate is for a scheme that takes nothing (a FOLDER scheme's folder "
                                             "is its spec's)")
        unknown = [f for f in self.exports if f not in FORMATS]
        if isinstance(self.exports, str) or unknown:
            raise DeclarationError(declared, f"exports {unknown or self.exports!r}: give a tuple of formats of "
                                             f"{', '.join(FORMATS)}")
        if self.human is not None and not callable(self.human):
            raise DeclarationError(declared, f"human {self.human!r} is not callable; give the loader of the "
                                             "collection and its annotators' grades")
        if self.full_corpus is not None and not isinstance(self.full_corpus, FullCorpus):
            raise DeclarationError(declared, f"full_corpus {self.full_corpus!r}: give a FullCorpus (its file, source, "
                                             "download command and make target, and where it is once downloaded)")
        if not isinstance(self.help, str) or not self.help.strip():
            raise DeclarationError(declared, "give a help line")

    @property
    def spec(self) -> str:
        """The spec as the help and the usage line write it: ``csfcube``, ``beir:FOLDER``."""
        return f"{self.name}:{self.argument}" if self.argument else self.name

    def input_folder(self, rest: str) -> Path | None:
        """The folder a spec of this scheme reads (``rest`` after the colon), where it is known:
        a `FOLDER` scheme's existing folder, a `NOTHING` scheme's `locate` (None when it cannot
        say, e.g. not downloaded yet); a `NAME` scheme's data is the library's, not a folder here."""
        if self.takes == FOLDER:
            folder = Path(rest).expanduser()
            return folder if rest and folder.is_dir() else None
        if self.takes == NOTHING and self.locate is not None:
            try:
                return self.locate()
            except KitError:
                return None
        return None

    def help_lines(self) -> list[str]:
        """The scheme's lines of the help: the spec, then the help text in a column beside it."""
        width = max(HELP_COLUMN, len(self.spec) + 2)
        lines = self.help.splitlines()
        return [f"  {self.spec.ljust(width)}{lines[0]}", *(f"  {' ' * width}{line}" for line in lines[1:])]
