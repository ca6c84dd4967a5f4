"""Reading a configuration file a user names (model registry, instructions, templates, prompts),
bounded: a regular file of at most `LIMIT` bytes, so ``EVALKIT_MODELS=/dev/zero``, a FIFO or a
huge file is one error line, not a hang or a MemoryError. `open_regular` is the one check behind
it, also used for every file of a run folder (`evalkit.data.runstore`) and a TREC run file."""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path
from typing import BinaryIO

LIMIT = 16 << 20  # bytes; the kit's own configuration files are a few kB


def open_regular(path: Path, follow: bool = True) -> BinaryIO:
    """`path` opened for reading in binary, when it is a regular file; OSError (with a reason the
    caller prints) for a device, FIFO or socket, checked on the opened file (no race), and, with
    `follow` False, for a symbolic link (a file the kit wrote itself is never one)."""
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0)  # a FIFO opens without waiting for a writer
    if not follow:
        flags |= getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        if not follow and exc.errno == errno.ELOOP:
            raise OSError(errno.ELOOP, "a symbolic link, where the kit writes a regular file", str(path)) from None
        raise
    fh = os.fdopen(fd, "rb")
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        fh.close()
        raise OSError(errno.EINVAL, "not a regular file (a device, FIFO or socket)", str(path))
    return fh


def read_bytes(path: Path, limit: int = LIMIT, follow: bool = True, what: str = "a configuration file") -> bytes:
    """The bytes of the regular file `path` (`open_regular`); OSError when it holds more than `limit`."""
    with open_regular(path, follow) as fh:
        data = fh.read(limit + 1)
    if len(data) > limit:
        raise OSError(errno.EFBIG, f"larger than {limit} bytes, too large for {what}", str(path))
    return data


def read_text(path: Path, limit: int = LIMIT) -> str:
    """The UTF-8 text of `path`; OSError (with a reason the caller prints) when it is not a regular
    file or holds more than `limit` bytes; UnicodeDecodeError when it is not UTF-8."""
    return read_bytes(path, limit).decode("utf-8")
