"""Reading a configuration file a user names (model registry, instructions, templates, prompts),
bounded: a regular file of at most `LIMIT` bytes, so ``EVALKIT_MODELS=/dev/zero``, a FIFO or a
huge file is one error line, not a hang or a MemoryError."""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

LIMIT = 16 << 20  # bytes; the kit's own configuration files are a few kB


def read_text(path: Path, limit: int = LIMIT) -> str:
    """The UTF-8 text of `path`; OSError (with a reason the caller prints) when it is not a regular
    file or holds more than `limit` bytes; UnicodeDecodeError when it is not UTF-8."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))  # a FIFO opens without waiting for a writer
    with os.fdopen(fd, "rb") as fh:
        if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
            raise OSError(errno.EINVAL, "not a regular file (a device, FIFO or socket)", str(path))
        data = fh.read(limit + 1)
    if len(data) > limit:
        raise OSError(errno.EFBIG, f"larger than {limit} bytes, too large for a configuration file", str(path))
    return data.decode("utf-8")
