"""Errors the user caused or can fix, and the exit statuses pld ends with."""

from enum import IntEnum


class ExitStatus(IntEnum):
    OK = 0
    ERROR = 1  # bad input, a failed run, or an unexpected error
    USAGE = 2  # the command line itself is wrong
    INCOMPLETE = 3  # generation stopped at --max-new-tokens: text shown, nothing written
    INTERRUPTED = 130  # Ctrl-C, as shells report SIGINT


class PldError(Exception):
    """A problem with the user's input or setup: one line on stderr, never a traceback."""

    def __init__(self, message: str, code: ExitStatus = ExitStatus.ERROR) -> None:
        super().__init__(message)
        self.code = code


class Unsupported(PldError):
    """pld cannot run this model this way (a runtime, a cache, a rollback); the message says why.
    Raised where a caller may fall back to another way (runtime/opening.py) or refuse drafting."""
