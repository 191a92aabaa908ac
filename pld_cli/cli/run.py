"""What edit and summarize do once their options are read: open the engine, decode, deliver.

Every file is read and checked before the model loads; each is then one call, or many for a long
document (tasks/longdoc.py), and delivered: text, JSON line, `==> name <==` section, diff, or a
file replaced atomically and only by a complete result. With several files a failing file is
reported on stderr and the others go on; the run ends with a summary line and exit status 1 if
any failed. An engine that takes several calls at once (-j N: a server, or pld's C decoder) gets
up to N: files and the chunks of long ones decode concurrently, and are delivered in the order
given, as one after another would be. Imported only when a command runs (it pulls in torch and
transformers).
"""

from __future__ import annotations

import dataclasses
import functools
import json
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from pld_cli import waiting
from pld_cli.cli.board import Board
from pld_cli.cli.guard import refusal
from pld_cli.cli.options import Display, Settings
from pld_cli.cli.preflight import Document, Entry, Failure, Request, print_record
from pld_cli.cli.records import as_json
from pld_cli.cli.render import Ui
from pld_cli.cli.tally import Tally, close
from pld_cli.core.config import DecodeConfig
from pld_cli.core.decode import Stop
from pld_cli.core.sampling import fresh_seed
from pld_cli.core.stats import Stats
from pld_cli.engines import open_engine
from pld_cli.errors import ExitStatus, PldError
from pld_cli.files import as_original, atomic_write, keep_backup
from pld_cli.tasks import longdoc
from pld_cli.tasks.checks import Check, check_edit, summary_line
from pld_cli.tasks.diff import unified
from pld_cli.tasks.engine import Engine
from pld_cli.tasks.kinds import kind_of
from pld_cli.tasks.longdoc import MapCalls, Part, Splitter, in_order
from pld_cli.tasks.pipeline import run_task
from pld_cli.tasks.prompts import Task, prompt_ids
from pld_cli.tasks.result import Result


def execute(
    request: Request, entries: list[Entry], settings: Settings, display: Display
) -> ExitStatus:
    """Decode and deliver each file read by preflight.prepare; the exit status of the run."""
    ui = Ui(quiet=settings.quiet, live=display.live, verbose=settings.verbose)
    settings = settings.seeded(fresh_seed())  # sampling without --seed: one seed, shown
    tally = Tally()
    documents = [item for item in entries if isinstance(item, Document)]
    ui.quiet_libraries()
    with ui.progress("loading model", announce=False) as report:
        engine = open_engine(settings, report)
        # The model's own repetition penalty unless --repetition-penalty says otherwise.
        config = settings.decode_config(request.use_pld, engine.repetition_penalty)
        splitter = Splitter(engine, config.max_new_tokens, settings.chunk_tokens)
        longest = max(len(prompt_ids(engine.tokenizer, doc.task)) for doc in documents)
        positions = min(longest + config.max_new_tokens, splitter.context)
        engine.prepare(positions, config, report, ui.detail)
    jobs = min(settings.jobs, engine.parallel)
    if settings.jobs > jobs:
        ui.note(f"-j {settings.jobs}: {engine.limit}")
    worker = Worker(engine, config, settings, display, ui, concurrent=jobs > 1)
    with ui.board([doc.label for doc in documents], on=jobs > 1) as worker.board:
        outcomes = worker.outcomes(documents, splitter, jobs)
        deliver_all(request, entries, worker, outcomes, tally)
    if request.several:
        close(ui, tally)
    return tally.status


def deliver_all(
    request: Request,
    entries: list[Entry],
    worker: Worker,
    outcomes: Iterator[Outcome],
    tally: Tally,
) -> None:
    """Each entry in order: a file that failed preflight, else its outcome delivered."""
    documents = [item for item in entries if isinstance(item, Document)]
    display, ui = worker.display, worker.ui
    try:
        for item in entries:
            if isinstance(item, Failure):  # already on stderr (preflight)
                tally.failure(ExitStatus.ERROR)
                if display.json:
                    print_record(item.label, item.message)
                continue
            if request.several:
                ui.note(f"{item.label} ({documents.index(item) + 1}/{len(documents)})")
            outcome = next(outcomes)
            try:
                tally.finished(*worker.deliver_outcome(item, request, outcome))
            except PldError as exc:
                failed(exc, item.label, request, display, ui)
                tally.failure(exc.code)
    finally:
        worker.engine.close()  # Ctrl-C: what is in flight is cut, so the threads end at once
        outcomes.close()


def failed(exc: PldError, label: str, request: Request, display: Display, ui: Ui) -> None:
    """A file's error: its JSON record, then raised (one file) or one line (several go on)."""
    message = str(exc) if str(exc).startswith(label) else f"{label}: {exc}"
    if display.json:
        print_record(label, message)
    if not request.several:
        raise exc
    ui.error(message)


@dataclass
class Outcome:
    """One document decoded: its calls, the result, the plain twin (--compare); or its error."""

    parts: list[Part] = field(default_factory=list)
    result: Result | None = None
    plain: Result | None = None
    error: PldError | None = None


class Worker:
    """Decodes and delivers documents with one engine."""

    def __init__(
        self,
        engine: Engine,
        config: DecodeConfig,
        settings: Settings,
        display: Display,
        ui: Ui,
        concurrent: bool = False,
    ) -> None:
        self.engine, self.config, self.display, self.ui = engine, config, display, ui
        penalty = engine.repetition_penalty
        self.plain_config = settings.decode_config(use_pld=False, model_penalty=penalty)
        self.concurrent = concurrent  # no live view: several decodes would share it
        self.engine_label = "server" if engine.drafts_itself else "pld"
        self.sections = 0  # `==> name <==` sections written to stdout
        self.board: Board | None = None  # the live view of documents at once (-j N)

    def outcomes(
        self, documents: list[Document], splitter: Splitter, jobs: int
    ) -> Iterator[Outcome]:
        """Each document's outcome, in order: decoded one after another, or `jobs` files (and
        the chunks of long ones) at a time, each delivered as soon as those before it are."""
        if jobs == 1:
            for doc in documents:
                yield self.decode(doc, splitter, in_order)
            return
        files, calls = ThreadPoolExecutor(jobs), ThreadPoolExecutor(jobs)
        map_calls: MapCalls = lambda one, many: list(calls.map(one, many))  # noqa: E731
        futures = [files.submit(self.decode, doc, splitter, map_calls) for doc in documents]
        try:
            for future in futures:
                yield waiting.result(future)  # Ctrl-C ends the wait, whichever thread takes it
        finally:
            # Cut short (Ctrl-C, an error): what has not started never starts, and nothing here
            # waits for the calls in flight (a `with` would, for minutes): execute closes the
            # engine next, which cuts them.
            for pool in (files, calls):
                pool.shutdown(wait=False, cancel_futures=True)

    def decode(self, doc: Document, splitter: Splitter, map_calls: MapCalls) -> Outcome:
        kind = kind_of(doc.task.kind)
        call = functools.partial(self.call, doc.label)
        try:
            text, parts = kind.long(doc.task, splitter, call, map_calls)
        except PldError as exc:
            if self.board:
                self.board.finished(doc.label, ok=False)
            return Outcome(error=exc)
        if self.board:
            self.board.finished(doc.label, ok=True)
        result = longdoc.total(parts, text)
        if kind.rewrites:  # the file as it was written: its endings, its last line
            result = dataclasses.replace(result, text=as_original(doc.task.document, result.text))
        plain = longdoc.total(parts, plain=True) if self.display.compare else None
        return Outcome(parts, result, plain)

    def deliver_outcome(
        self, doc: Document, request: Request, outcome: Outcome
    ) -> tuple[Stats, bool]:
        """The file's stats, and whether its output was cut at --max-new-tokens."""
        if outcome.error is not None:
            raise outcome.error
        self.report(outcome.parts, outcome.result, outcome.plain)
        self.deliver(doc, request, outcome.parts, outcome.result, outcome.plain)
        return outcome.result.stats, longdoc.unfinished(outcome.parts) is not None

    def call(self, label: str, task: Task, where: str) -> Part:
        """One decode (and its plain twin under --compare), in the live view."""
        whole = where.startswith("the whole")
        if not whole:
            self.ui.note(f"{label}: {where}")
        with self.ui.live(None if whole else where, off=self.concurrent) as observe:
            observe = self.board.observer(label) if self.board else observe
            try:
                result = run_task(self.engine, task, self.config, observe=observe)
            except PldError as exc:  # input too long, a server's fault: which part
                raise PldError(str(exc) if whole else f"{where}: {exc}", exc.code) from None
        if result.stats.stop == Stop.REPETITION:
            self.ui.note(
                f"{label}: stopped where the output began to repeat itself "
                "(--allow-repetition goes on)"
            )
        plain = None
        if self.display.compare:
            # One line per call of a long document would only repeat its "chunk" line.
            with self.ui.progress("decoding again without drafting (--compare)", quiet=not whole):
                plain = run_task(self.engine, task, self.plain_config)
        return Part(0, 0, where, len(task.document), result, plain)

    def report(self, parts: list[Part], result: Result, plain: Result | None) -> None:
        if len(parts) > 1 and (self.display.stats or self.display.compare):
            self.ui.parts_table(parts)
        if plain is not None:
            self.ui.comparison(result, plain)
        if self.display.stats:
            label = "plain" if not self.config.use_pld else self.engine_label
            self.ui.stats_table({label: result.stats} | ({"plain": plain.stats} if plain else {}))
            if self.config.sampling.temperature > 0:
                self.ui.note(f"sampled with --seed {self.config.sampling.seed}")

    def deliver(
        self,
        doc: Document,
        request: Request,
        parts: list[Part],
        result: Result,
        plain: Result | None,
    ) -> None:
        """One rule for a cut result (stopped at --max-new-tokens): shown on stdout or in JSON
        with a warning (exit 3), never written to a file or diffed (refused, exit 3)."""
        destination = Path(doc.path) if request.write else request.output
        cut = cut_short(parts, self.config.max_new_tokens)
        if cut and (request.diff or destination is not None):
            what = "edit incomplete: no diff" if destination is None else "left untouched"
            where = f" {destination}" if request.output else ""
            raise PldError(f"{doc.label}:{where} {what}: {cut}", code=ExitStatus.INCOMPLETE)
        patch = None
        if request.diff:
            patch = unified(doc.task.document, result.text, doc.label)
            if not patch and not request.write:
                self.ui.note(f"{doc.label}: no changes")
        check, refused = self.checked(doc, request, result, destination)
        if request.write and result.text == doc.task.document:
            self.ui.note(f"{doc.label}: no changes, not rewritten")
        elif destination is not None and not refused:
            if request.backup:
                keep_backup(destination, request.backup)
            atomic_write(destination, result.text)
            self.ui.note(f"wrote {destination}")
        if self.display.json:
            record = as_json(result, self.engine, plain, parts, doc.label, self.config.sampling)
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
        if cut:
            self.ui.warning(f"{doc.label}: incomplete: {cut} (exit 3)")

    def checked(
        self, doc: Document, request: Request, result: Result, destination: Path | None
    ) -> tuple[Check | None, str | None]:
        """An edit's checks, their summary line on stderr, and why it may not be written."""
        if not kind_of(doc.task.kind).rewrites:
            return None, None
        check = check_edit(doc.label, doc.task.document, result.text)
        if result.text != doc.task.document:
            self.ui.note(summary_line(doc.label, check))
        why = refusal(check, destination, request.write, request.check, request.force, self.ui)
        return check, why


def cut_short(parts: list[Part], max_new_tokens: int) -> str:
    """Why the result is incomplete ('' when every call ended at EOS)."""
    part = longdoc.unfinished(parts)
    if part is None:
        return ""
    which = f"of {part.where} " if len(parts) > 1 else ""
    return (
        f"generation {which}stopped at {part.result.stats.stop} "
        f"({part.result.stats.new_tokens} tokens) before the model finished; "
        f"raise --max-new-tokens (now {max_new_tokens})"
    )
