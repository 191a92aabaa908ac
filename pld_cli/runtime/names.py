"""The runtimes by name, in the order `--runtime auto` tries them: the registry the command line
and the bench read (this module imports nothing of pld's or torch's, so `pld --help` stays
torch-free). Each name has its opener in opening.py; a new runtime is one module, one name here and
one opener there."""

from enum import Enum


class RuntimeName(str, Enum):
    NATIVE = "native"  # pld's own forward over a cache it owns (native/)
    STATIC = "static"  # transformers' forward on a preallocated cache (hf/static.py)
    DYNAMIC = "dynamic"  # transformers' forward on a growing cache (hf/dynamic.py)

    def __str__(self) -> str:
        return self.value
