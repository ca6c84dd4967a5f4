"""Run one study notebook headlessly for make: parameters from the environment, one-line errors.

The Makefile never pastes a parameter into a shell command line: it exports each one as
``EVALKIT_PARAM_NAME`` holding the literal text the user gave (quotes, ``$``, backticks and
spaces included), and ``python -m evalkit.make.launch NOTEBOOK`` hands every parameter the
notebook declares to papermill as that one string (or, for a notebook default that is a
number, that number). The executed notebook is written to a temporary file and renamed to
``OUTPUT_DIR/notebooks/NOTEBOOK-TAG.ipynb`` only after the notebook ran and wrote its table,
so a failed run leaves nothing that looks complete; its wall time then goes to
``OUTPUT_DIR/timings/NOTEBOOK-TAG.json`` (`evalkit.make.budget`), never into a table or the
notebook, so the outputs stay byte-identical. An error inside the notebook reaches the
terminal as the kit's one line (a `KitError`'s message), with exit status 2, as does a full
disk while the notebook is written (the line names the file). A SIGTERM or
SIGHUP (make stopped) removes the temporary notebook and ends in one line, status 128 + signal.

The kernel writes its own chatter to the terminal it inherits: ipykernel's warning that it runs
over TCP without encryption, "KeyboardInterrupt caught in kernel" when papermill stops it after
a run that succeeded, Jupyter's and zmq's start-up warnings. While a notebook runs, the
launcher's standard output and error go through a filter (`quiet_kernel`) that drops those
lines (`KERNEL_CHATTER`) and passes every other one to standard error, so a real error in the
kernel still reaches the terminal as written.
"""

from __future__ import annotations

import ast
import contextlib
import hashlib
import os
import re
import signal
import sys
import threading
import time
from pathlib import Path

from evalkit.core.errors import DataError, KitError, RequestError, kit_error_names, report
from evalkit.core.names import name_part
from evalkit.core.progress import announce_notebook
from evalkit.core.workspace import resolve
from evalkit.make.budget import write_stage_time
from evalkit.models import registry
from evalkit.study.edited import edited_part
from evalkit.study.tag import CONTENT, build_tag

PREFIX = "EVALKIT_PARAM_"
DEFAULT_PROFILE = "offline"  # the notebooks' PROFILE default, as the Makefile's
NOTEBOOKS = Path("notebooks")
# What each notebook must have written (under OUTPUT_DIR/tables) for its run to count as complete.
OUTPUTS = {"relevance": "relevance-{tag}.csv", "instruction_following": "instruction_following-{tag}.csv",
           "sensitivity": "sensitivity-{tag}.csv", "hybrid": "hybrid-{tag}.csv", "summary": "findings-{tag}.txt",
           "promptriever": "promptriever-csfcube-{tag}.csv"}


# The lines of the kernel's standard error that are machinery, not the notebook's: dropped (`quiet_kernel`).
KERNEL_CHATTER = re.compile(
    r"^\[IPKernelApp\] WARNING \| Kernel is running over TCP without encryption\b"
    r"|^\[IPKernelApp\] ERROR \| KeyboardInterrupt caught in kernel\.?\s*$"
    r"|DeprecationWarning: Jupyter is migrating its paths to use standard platformdirs"
    r"|^\s*from jupyter_core\.paths import"
    r"|RuntimeWarning: Proactor event loop does not implement add_reader family of methods required for zmq"
    r"|^KeyboardInterrupt caught in (kernel|CFRunLoop)\s*$")


def _forward(source: int, target: int) -> None:
    """Copy the lines read from fd `source` to fd `target`, but `KERNEL_CHATTER`; close both at the end.
    A failing `target` (a closed terminal) does not stop the reading: a full pipe would block the kernel."""
    def write(line: bytes) -> None:
        if not KERNEL_CHATTER.search(line.decode("utf-8", "replace")):
            with contextlib.suppress(OSError):
                writer.write(line)

    pending = b""
    with open(source, "rb", buffering=0) as reader, open(target, "wb", buffering=0) as writer:
        while chunk := reader.read(65536):
            *lines, pending = (pending + chunk).split(b"\n")
            for line in lines:
                write(line + b"\n")
        if pending:
            write(pending)


@contextlib.contextmanager
def quiet_kernel():
    """Standard output and error (fds 1 and 2, which the kernel inherits) through a pipe while the block
    runs; a thread forwards every line to the real standard error except `KERNEL_CHATTER`. Nothing
    else is held back: tracebacks and the kernel's other messages pass as written (to standard
    error: the launcher's standard output is the executed notebook's path, which make reads)."""
    try:
        for stream in (sys.stdout, sys.stderr):
            stream.flush()
        saved = [os.dup(1), os.dup(2)]
    except (OSError, ValueError, AttributeError):  # no fds 1 and 2 (an embedding host): nothing to filter
        yield
        return
    read, write = os.pipe()
    thread = threading.Thread(target=_forward, args=(read, os.dup(saved[1])), daemon=True)
    thread.start()
    for fd in (1, 2):
        os.dup2(write, fd)
    os.close(write)
    try:
        yield
    finally:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(OSError, ValueError, AttributeError):
                stream.flush()
        for fd, kept in zip((1, 2), saved):
            os.dup2(kept, fd)  # the pipe's last writers here; the kernel has exited
            os.close(kept)
        thread.join(timeout=5)  # a kernel still alive keeps the pipe open: its lines keep flowing


def environment_parameters(environ=os.environ) -> dict[str, str]:
    """The parameters make exported (``EVALKIT_PARAM_NAME``), each as the literal text given."""
    return {key[len(PREFIX):]: value for key, value in environ.items() if key.startswith(PREFIX)}


def tag_of(given: dict[str, str], root: Path = Path(".")) -> str:
    """The build tag of these parameters and notebooks (evalkit.study.tag, as the Makefile names its
    targets; ``-edited-HASH`` when a notebook under root/notebooks is not the kit's)."""
    return build_tag(given.get("PROFILE", "offline"), given.get("PROTOCOL", "pool"), given.get("SEEDS", ""),
                     **{k: given[k] for k in CONTENT if k in given}) + edited_part(root / NOTEBOOKS)


def _tag(given: dict[str, str], root: Path = Path(".")) -> str:
    """The build tag of the parameters, always (so an output's name says what made it). A TAG in
    the environment (``EVALKIT_PARAM_TAG``, which make never sets) is refused unless it is that tag:
    it would name the outputs after something else, or lead outside OUTPUT_DIR."""
    computed = tag_of(given, root)
    if given.get("TAG") and given["TAG"] != computed:
        raise DataError(f"{PREFIX}TAG={given['TAG']!r}", f"TAG is computed from the parameters ({computed} here) and "
                        f"names the outputs after them; unset {PREFIX}TAG")
    return computed


def _typed(name: str, text: str, declared: dict) -> object:
    """`text` as the declared parameter's type: a number where the notebook's default is one."""
    try:
        default = ast.literal_eval(declared.get("default") or "''")
    except (ValueError, SyntaxError):
        return text
    if isinstance(default, bool) or not isinstance(default, int | float):
        return text
    try:
        return type(default)(text)
    except ValueError:
        raise DataError(f"{name}={text!r}", f"is not a number; give a number (the notebook's default is "
                        f"{default})") from None


def notebook_parameters(notebook: Path, given: dict[str, str]) -> dict[str, object]:
    """The given parameters that the notebook declares (and TAG), typed as its defaults."""
    import papermill

    declared = papermill.inspect_notebook(str(notebook))
    return {name: _typed(name, given[name], declared[name]) for name in declared if name in given}


def explore_stem(given: dict[str, str]) -> str:
    """An explore page's name, holding every parameter that changes it:
    explore-SEED-MODEL+MODEL-kK[-DISCOUNT][-instructions-HASH]-PROFILE-PROTOCOL (each part a plain
    file-name part; HASH of the instruction file's bytes)."""
    models = "+".join(name_part(m.strip()) for m in given.get("MODELS", "").split(",") if m.strip())
    discount = given.get("DISCOUNT", "csfcube")
    instructions = given.get("INSTRUCTIONS", "")
    if instructions:
        source = Path(instructions).expanduser()
        data = source.read_bytes() if source.is_file() else instructions.encode()
        instructions = f"instructions-{hashlib.sha256(data).hexdigest()[:8]}"
    parts = [name_part(given.get("SEED", "")), models or "default", f"k{name_part(given.get('K', '10'))}",
             *([name_part(discount)] if discount != "csfcube" else []), *([instructions] if instructions else []),
             name_part(given.get("PROFILE", "offline")), name_part(given.get("PROTOCOL", "pool"))]
    return "-".join(["explore", *parts])


def _error_line(ename: str, evalue: str, name: str, kept: Path | None) -> str:
    """A KitError's own message; any other error named with its notebook (and the kept copy)."""
    text = " ".join(str(evalue).splitlines())
    if ename in kit_error_names():
        return text
    where = f"; the failed notebook is kept as {kept}" if kept else ""
    return f"notebooks/{name}.ipynb failed: {ename}: {text}{where}"


def check_models(name: str, given: dict[str, str]) -> None:
    """The kit's notebooks' MODELS and REFERENCE_MODEL checked against PROFILE's registry before a
    kernel starts: a wrong name is one line at once, not after the notebook's start-up (the
    notebook checks them again, `evalkit.study.params.study_models`)."""
    if name not in OUTPUTS and name != "explore":
        return
    profile = given.get("PROFILE") or DEFAULT_PROFILE
    for parameter in ("MODELS", "REFERENCE_MODEL"):
        for model in (m.strip() for m in given.get(parameter, "").split(",")):
            if model:
                try:
                    registry.spec(model, profile)
                except KitError as exc:
                    raise KitError(f"{parameter}: {exc.problem if isinstance(exc, RequestError) else exc}") from None


def run(name: str, given: dict[str, str], root: Path = Path(".")) -> Path:
    """Execute notebooks/NAME.ipynb with the given parameters; returns the executed notebook."""
    check_models(name, given)  # before papermill is imported and a kernel starts
    import papermill

    source = root / NOTEBOOKS / f"{name}.ipynb"
    if not source.is_file():
        raise DataError("notebooks", f"no notebook {source}; choose one of {', '.join(sorted(OUTPUTS))} or explore")
    given = {**given, "TAG": _tag(given, root)}
    output_dir = resolve(given.get("OUTPUT_DIR") or "build")
    folder = output_dir / "notebooks"
    stem = explore_stem(given) if name == "explore" else f"{name}-{given['TAG']}"
    out, tmp, failed = folder / f"{stem}.ipynb", folder / f"{stem}.tmp.ipynb", folder / f"{stem}.failed.ipynb"
    parameters = notebook_parameters(source, given)
    announce_notebook(name, given.get("PROFILE", ""), given.get("PROTOCOL", ""), given.get("MODELS", ""))
    folder.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    try:
        with quiet_kernel():
            papermill.execute_notebook(str(source), str(tmp), parameters=parameters, progress_bar=False,
                                       log_output=False, cwd=str(root))
        expected = OUTPUTS.get(name)
        table = output_dir / "tables" / expected.format(tag=given["TAG"]) if expected else None
        if table is not None and not table.is_file():
            raise DataError(f"notebooks/{name}.ipynb", f"ran but did not write {table}; see its last cells")
        os.replace(tmp, out)
        write_stage_time(str(output_dir), stem, time.perf_counter() - started)  # beside the tables, never in one
    except papermill.PapermillExecutionError as exc:
        kept = None
        if exc.ename not in kit_error_names() and tmp.exists():
            os.replace(tmp, failed)
            kept = failed
        raise KitError(_error_line(exc.ename, exc.evalue, name, kept)) from None
    finally:
        tmp.unlink(missing_ok=True)
    failed.unlink(missing_ok=True)
    return out


class Stopped(BaseException):
    """SIGTERM or SIGHUP (make stopped, the terminal closed): unwinds `run`, whose cleanup removes
    the temporary notebook, so nothing half-executed is left."""


def _stop(signum, frame):
    raise Stopped(signum)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1:
        print("usage: python -m evalkit.make.launch NOTEBOOK (parameters in EVALKIT_PARAM_* variables)",
              file=sys.stderr)
        return 2
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, _stop)
    try:
        print(run(argv[0], environment_parameters()))
    except KitError as exc:
        return report(exc)
    except OSError as exc:  # a full disk or an unwritable folder while the executed notebook is written
        where = f"{exc.filename}: " if exc.filename else ""
        return report(f"notebooks/{argv[0]}.ipynb: {where}{exc.strerror or exc}; nothing complete was written (free "
                      "disk space or make OUTPUT_DIR writable)")
    except KeyboardInterrupt:  # Ctrl-C (make passes it on): one line, the shell's status for SIGINT
        report(f"notebooks/{argv[0]}.ipynb interrupted; its temporary notebook was removed, nothing complete was "
               "written")
        return 130
    except Stopped as stop:
        name = signal.Signals(stop.args[0]).name
        report(f"notebooks/{argv[0]}.ipynb stopped by {name}; its temporary notebook was removed, nothing complete "
               "was written")
        return 128 + stop.args[0]
    return 0


if __name__ == "__main__":
    sys.exit(main())
