"""What edit and summarize do once their options are read: load once, decode each file, deliver.

Every file is read and checked before the model loads; each is then one call, or many for a long
document (tasks/longdoc.py), and delivered: text, JSON line, `==> name <==` section, diff, or a
file replaced atomically and only by a complete result. With several files a failing file is
reported on stderr and the others go on; the run ends with a summary line and exit status 1 if
any failed. Imported only when a command runs (it pulls in torch and transformers).
"""

from __future__ import annotations

import json
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from pld_cli.cli.guard import refusal
from pld_cli.cli.options import Display, Settings
from pld_cli.cli.render import Ui
from pld_cli.core.stats import Stats
from pld_cli.errors import PldError
from pld_cli.files import atomic_write, keep_backup, read_document
from pld_cli.tasks import longdoc
from pld_cli.tasks.checks import Check, check_edit, summary_line
from pld_cli.tasks.diff import unified
from pld_cli.tasks.longdoc import Part, Splitter
from pld_cli.tasks.models import LoadedModel, load_model
from pld_cli.tasks.pipeline import Result, ready, run
from pld_cli.tasks.prompts import Task, prompt_ids


@dataclass(frozen=True)
class Request:
    """One command's job: which files, what to do with each, where results go."""

    kind: str  # 'edit' | 'summarize'
    files: list[str | None]  # None or '-': stdin
    instruction: str = ""
    output: Path | None = None
    write: bool = False
    diff: bool = False
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


@dataclass
class Tally:
    """Files done and failed, and their stats together, for the closing line."""

    done: int = 0
    failed: int = 0
    runs: list[Stats] = field(default_factory=list)
    start: float = field(default_factory=time.perf_counter)


def execute(request: Request, settings: Settings, display: Display) -> None:
    ui = Ui(quiet=settings.quiet, live=display.live, verbose=settings.verbose)
    tally = Tally()
    documents = [doc for path in request.files if (doc := read(request, path, ui, tally))]
    if not documents:
        raise PldError("no file could be read")
    ui.quiet_libraries()
    config = settings.decode_config(use_pld=not display.no_pld)
    with ui.progress("loading model") as report:
        loaded = load_model(settings.model_spec(), report)
        splitter = Splitter(loaded, config.max_new_tokens, settings.chunk_tokens)
        longest = max(len(prompt_ids(loaded.tokenizer, doc.task)) for doc in documents)
        positions = min(longest + config.max_new_tokens, splitter.context)
        ready(loaded, positions, config, report=report, note=ui.detail)
    worker = Worker(loaded, settings, display, ui)
    for number, doc in enumerate(documents, 1):
        if request.several:
            ui.note(f"{doc.label} ({number}/{len(documents)})")
        try:
            stats = worker.process(doc, request, splitter)
        except PldError as exc:
            if not request.several:
                raise
            message = str(exc)
            fail(ui, tally, message if message.startswith(doc.label) else f"{doc.label}: {message}")
            continue
        tally.done += 1
        tally.runs.append(stats)
    if request.several:
        close(ui, tally)


def read(request: Request, path: str | None, ui: Ui, tally: Tally) -> Document | None:
    try:
        text, name = read_document(path)
    except PldError as exc:
        if not request.several:
            raise
        fail(ui, tally, str(exc))
        return None
    return Document(
        path if path != "-" else None, Task(request.kind, text, request.instruction, name)
    )


def fail(ui: Ui, tally: Tally, message: str) -> None:
    ui.error(message)
    tally.failed += 1


def close(ui: Ui, tally: Tally) -> None:
    runs = longdoc.summed(tally.runs) if tally.runs else Stats()
    wall = time.perf_counter() - tally.start
    ui.note(
        f"{tally.done} files done, {tally.failed} failed · {runs.new_tokens} new tokens · "
        f"{runs.tokens_per_s:.1f} tok/s decoding · {wall:.1f} s in all"
    )
    if tally.failed:
        raise PldError(f"{tally.failed} of {tally.done + tally.failed} files failed")


class Worker:
    """Decodes and delivers documents with one loaded model."""

    def __init__(self, loaded: LoadedModel, settings: Settings, display: Display, ui: Ui) -> None:
        self.loaded, self.display, self.ui = loaded, display, ui
        penalty = getattr(loaded.model.generation_config, "repetition_penalty", None)
        self.config = settings.decode_config(use_pld=not display.no_pld, model_penalty=penalty)
        self.plain_config = settings.decode_config(use_pld=False, model_penalty=penalty)
        self.sections = 0  # `==> name <==` sections written to stdout

    def process(self, doc: Document, request: Request, splitter: Splitter) -> Stats:
        self.doc = doc
        if doc.task.kind == "summarize":
            text, parts = None, longdoc.summarize(doc.task, splitter, self.call)
        else:
            text, parts = longdoc.edit(doc.task, splitter, self.call)
        result = longdoc.total(parts, text)
        plain = longdoc.total(parts, plain=True) if self.display.compare else None
        self.report(parts, result, plain)
        self.deliver(doc, request, parts, result, plain)
        return result.stats

    def call(self, task: Task, where: str) -> Part:
        """One decode (and its plain twin under --compare), in the live view."""
        whole = where.startswith("the whole")
        if not whole:
            self.ui.note(f"{self.doc.label}: {where}")
        with self.ui.live(None if whole else where) as observe:
            try:
                result = run(self.loaded, task, self.config.for_task(task.kind), observe=observe)
            except PldError as exc:  # input too long: which part
                raise PldError(str(exc) if whole else f"{where}: {exc}") from None
        if result.stats.stop == "repetition":
            self.ui.note(f"{self.doc.label}: stopped where the output began to repeat itself "
                         "(--allow-repetition goes on)")  # fmt: skip
        plain = None
        if self.display.compare:
            # One line per call of a long document would only repeat its "chunk" line.
            with self.ui.progress("decoding again without drafting (--compare)", quiet=not whole):
                plain = run(self.loaded, task, self.plain_config.for_task(task.kind))
        return Part(0, 0, where, len(task.document), result, plain)

    def report(self, parts: list[Part], result: Result, plain: Result | None) -> None:
        if len(parts) > 1 and (self.display.stats or self.display.compare):
            self.ui.parts_table(parts)
        if plain is not None:
            self.ui.comparison(result, plain)
        if self.display.stats:
            label = "pld" if self.config.use_pld else "plain"
            self.ui.stats_table({label: result.stats} | ({"plain": plain.stats} if plain else {}))

    def deliver(
        self, doc: Document, request: Request, parts: list[Part], result: Result,
        plain: Result | None,
    ) -> None:  # fmt: skip
        destination = Path(doc.path) if request.write else request.output
        patch = None
        if request.diff:
            patch = unified(doc.task.document, result.text, doc.label)
            if not patch and not request.write:
                self.ui.note(f"{doc.label}: no changes")
        if request.diff or destination is not None:
            check_complete(parts, destination or doc.label, self.config.max_new_tokens)
        check, refused = self.checked(doc, request, result, destination)
        if request.write and result.text == doc.task.document:
            self.ui.note(f"{doc.label}: no changes, not rewritten")
        elif destination is not None and not refused:
            if request.backup:
                keep_backup(destination, request.backup)
            atomic_write(destination, result.text)
            self.ui.note(f"wrote {destination}")
        if self.display.json:
            record = as_json(result, self.loaded.name, plain, parts, doc.label)
            record |= {"diff": patch} if request.diff else {}
            record |= {"check": check.as_dict()} if check else {}
            print(json.dumps(record, ensure_ascii=False))
        elif request.diff:
            self.ui.diff(patch, to_stderr=destination is not None)
        elif destination is None:
            if request.several:
                sys.stdout.write(f"{chr(10) if self.sections else ''}==> {doc.label} <==\n")
                self.sections += 1
            sys.stdout.write(result.text)
        sys.stdout.flush()
        if refused:
            raise PldError(refused)

    def checked(
        self, doc: Document, request: Request, result: Result, destination: Path | None
    ) -> tuple[Check | None, str | None]:
        """An edit's checks, their summary line on stderr, and why it may not be written."""
        if doc.task.kind != "edit":
            return None, None
        check = check_edit(doc.label, doc.task.document, result.text)
        if result.text != doc.task.document:
            self.ui.note(summary_line(doc.label, check))
        why = refusal(check, destination, request.write, request.check, request.force, self.ui)
        return check, why


def check_complete(parts: list[Part], destination: Path | str, max_new_tokens: int) -> None:
    """A file is replaced (or diffed) only by a result every call of which ended at EOS."""
    part = longdoc.unfinished(parts)
    if part is None:
        return
    which = f"of {part.where} " if len(parts) > 1 else ""
    raise PldError(
        f"{destination} left untouched: generation {which}stopped at {part.result.stats.stop} "
        f"({part.result.stats.new_tokens} tokens) before the model finished; "
        f"raise --max-new-tokens (now {max_new_tokens})"
    )


def as_json(result: Result, model: str, plain: Result | None, parts: list[Part], file: str) -> dict:
    out = {"file": file, "text": result.text, "model": model, "stats": result.stats.as_dict(),
           "stop": result.stats.stop}  # fmt: skip
    if plain is not None:
        out["compare"] = {
            "plain": plain.stats.as_dict(),
            "speedup": round(result.speedup_over(plain), 3),
            "identical": plain.token_ids == result.token_ids,
        }
    if len(parts) > 1:
        out["chunks"] = [part_json(part) for part in parts]
        out["calls"] = len(parts)
    return out


def part_json(part: Part) -> dict:
    out = {"index": part.index, "round": part.round, "where": part.where, "chars": part.chars,
           "prompt_tokens": part.result.stats.prompt_tokens, "stats": part.result.stats.as_dict(),
           "stop": part.result.stats.stop}  # fmt: skip
    if part.plain is not None:
        out["identical"] = part.plain.token_ids == part.result.token_ids
    return out
