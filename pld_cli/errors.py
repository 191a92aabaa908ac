"""Errors the user caused or can fix: reported as one line on stderr, never as a traceback."""


class PldError(Exception):
    """A problem with the user's input or setup; `code` is the process exit status."""

    def __init__(self, message: str, code: int = 1) -> None:
        super().__init__(message)
        self.code = code
