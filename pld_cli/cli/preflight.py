"""Everything a run can be refused for, checked before torch or transformers is imported.

The output target (its folder exists and is writable, it is not a folder, a file to replace is
not read-only), every input (exists, is text, is not empty) and the model's name are checked
here, so such an error takes as long as a usage error, not as long as loading a model. With
several files a bad one is reported and left out; the others go on.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path

from pld_cli.cli.options import Settings
from pld_cli.errors import ExitStatus, PldError
from pld_cli.files import check_target, read_document
from pld_cli.loading.sources import check_source
from pld_cli.tasks.prompts import Task


@dataclass(frozen=True)
class Request:
    """One command's job: which files, what to do with each, where results go."""

    kind: str  # a registered task kind (tasks/kinds): 'edit', 'summarize'
    files: list[str | None]  # None or '-': stdin
    instruction: str = ""
    output: Path | None = None
    write: bool = False
    diff: bool = False
    use_pld: bool = True  # draft (pld) or decode plainly (--no-pld)
    check: bool = True  # refuse to write an edit that breaks the file's format (--no-check)
    force: bool = False  # write an edit that removes top-level structure without asking
    backup: str | None = None  # keep the original as FILE + this suffix (--backup)

    @property
    def several(self) -> bool:
        return len(self.files) > 1


@dataclass
class Document:
    path: str | None  # as given; None for stdin
    task: Task

    @property
    def label(self) -> str:
        return self.path or "stdin"


@dataclass(frozen=True)
class Failure:
    """A file refused before the model loads (already reported on stderr)."""

    label: str
    message: str


Entry = Document | Failure


def prepare(request: Request, settings: Settings, json_records: bool) -> list[Entry]:
    """Each file read and checked, in order; raises for what stops the whole run. Under --json a
    failed file's record is printed here only when the run stops here (else in its turn)."""
    if request.output is not None:
        check_target(request.output)
    entries = [entry(request, path, json_records) for path in request.files]
    if not any(isinstance(item, Document) for item in entries):
        for failure in entries if json_records else []:
            print_record(failure.label, failure.message)
        raise PldError("no file could be read")
    if settings.server:  # -m names a served model: the server says whether it has it
        refuse_local_only(request, settings)
    elif settings.model is not None:
        check_source(settings.model, settings.revision)
    return entries


def refuse_local_only(request: Request, settings: Settings) -> None:
    """What only pld's own engine can do, asked of a server."""
    if not request.use_pld:
        raise PldError(
            "--no-pld with --server: the server drafts or not as it was started "
            "(its --speculative-config)",
            code=ExitStatus.USAGE,
        )


def entry(request: Request, path: str | None, json_records: bool) -> Entry:
    label = "stdin" if path in (None, "-") else path
    try:
        text, name = read_document(path)
        if request.write:
            check_target(label)
    except PldError as exc:
        if not request.several:
            if json_records and exc.code != ExitStatus.USAGE:
                print_record(label, str(exc))
            raise
        print(f"pld: error: {exc}", file=sys.stderr)
        return Failure(label, str(exc))
    path = None if label == "stdin" else label
    return Document(path, Task(request.kind, text, request.instruction, name))


def print_record(label: str, message: str) -> None:
    """--json: a file that failed is a record too, so every file named has one line."""
    print(json.dumps({"file": label, "error": message}, ensure_ascii=False), flush=True)
