"""The one error type users see: a single line naming the problem and the fix."""


class KitError(Exception):
    """A user-facing problem (bad input, missing data); the CLI prints it as one line and exits 2."""
