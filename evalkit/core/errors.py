"""The one error type users see: a single line naming the problem and the fix."""

import sys


class KitError(Exception):
    """A user-facing problem (bad input, missing data); the CLI prints it as one line and exits 2."""


def report(message: object) -> int:
    """Print `message` as the kit's one error line on stderr (line breaks joined); the exit status, 2."""
    print(f"evalkit: error: {' '.join(str(message).splitlines())}", file=sys.stderr)
    return 2
