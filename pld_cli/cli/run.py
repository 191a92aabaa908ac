"""What edit and summarize do once their options are read: load once, decode each file, deliver.

Every file is read and checked before the model loads; each is then one call, or many for a long
document (tasks/longdoc.py), and delivered: text, JSON line, `==> name <==` section, diff, or a
file replaced atomically and only by a complete result. With several files a failing file is
reported on stderr and the others go on; the run ends with a summary line and exit status 1 if
any failed. Imported only when a command runs (it pulls in torch and transformers).
"""

from __future__ import annotations

import dataclasses
import json
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from pld_cli.cli.guard import refusal
from pld_cli.cli.options import Display, Settings
from pld_cli.cli.preflight import Document, Entry, Failure, Request, print_record
from pld_cli.cli.render import Ui
from pld_cli.core.config import DecodeConfig
from pld_cli.core.stats import Stats
from pld_cli.errors import ExitStatus, PldError
from pld_cli.files import as_original, atomic_write, keep_backup
from pld_cli.tasks import longdoc
from pld_cli.tasks.checks import Check, check_edit, summary_line
from pld_cli.tasks.diff import unified
from pld_cli.tasks.kinds import kind_of
from pld_cli.tasks.longdoc import Part, Splitter
from pld_cli.tasks.models import LoadedModel, load_model
from pld_cli.tasks.pipeline import run_task
from pld_cli.tasks.prompts import Task, prompt_ids
from pld_cli.tasks.ready import ready
from pld_cli.tasks.result import Result


@dataclass
class Tally:
    """Files done and failed, and their stats together, for the closing line."""

    done: int = 0
    failed: int = 0
    cut: int = 0  # stopped at --max-new-tokens: shown with a warning, or refused
    codes: list[ExitStatus] = field(default_factory=list)  # of each failed or cut-short file
    runs: list[Stats] = field(default_factory=list)
    start: float = field(default_factory=time.perf_counter)

    def failure(self, code: ExitStatus) -> None:
        self.failed += 1
        self.cut += code == ExitStatus.INCOMPLETE
        self.codes.append(code)

    def finished(self, stats: Stats, cut: bool) -> None:
        self.done += 1
        self.cut += cut
        self.codes += [ExitStatus.INCOMPLETE] if cut else []
        self.runs.append(stats)

    @property
    def status(self) -> ExitStatus:
        if ExitStatus.ERROR in self.codes:
            return ExitStatus.ERROR
        return ExitStatus.INCOMPLETE if self.codes else ExitStatus.OK


def execute(
    request: Request, entries: list[Entry], settings: Settings, display: Display
) -> ExitStatus:
    """Decode and deliver each file read by preflight.prepare; the exit status of the run."""
    ui = Ui(quiet=settings.quiet, live=display.live, verbose=settings.verbose)
    tally = Tally()
    documents = [item for item in entries if isinstance(item, Document)]
    ui.quiet_libraries()
    with ui.progress("loading model", announce=False) as report:
        loaded = load_model(settings.model_spec(), report)
        penalty = loaded.repetition_penalty  # unless --repetition-penalty says otherwise
        config = settings.decode_config(use_pld=request.use_pld, model_penalty=penalty)
        splitter = Splitter(loaded, config.max_new_tokens, settings.chunk_tokens)
        longest = max(len(prompt_ids(loaded.tokenizer, doc.task)) for doc in documents)
        positions = min(longest + config.max_new_tokens, splitter.context)
        ready(loaded, positions, config, report=report, note=ui.detail)
    worker = Worker(loaded, config, settings, display, ui)
    for item in entries:
        if isinstance(item, Failure):  # already on stderr (preflight)
            tally.failure(ExitStatus.ERROR)
            if display.json:
                print_record(item.label, item.message)
            continue
        if request.several:
            ui.note(f"{item.label} ({documents.index(item) + 1}/{len(documents)})")
        try:
            tally.finished(*worker.process(item, request, splitter))
        except PldError as exc:
            failed(exc, item.label, request, display, ui)
            tally.failure(exc.code)
    if request.several:
        close(ui, tally)
    return tally.status


def failed(exc: PldError, label: str, request: Request, display: Display, ui: Ui) -> None:
    """A file's error: its JSON record, then raised (one file) or one line (several go on)."""
    message = str(exc) if str(exc).startswith(label) else f"{label}: {exc}"
    if display.json:
        print_record(label, message)
    if not request.several:
        raise exc
    ui.error(message)


def plural(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"


def close(ui: Ui, tally: Tally) -> None:
    runs = Stats.merged(tally.runs)
    wall = time.perf_counter() - tally.start
    cut = f" ({tally.cut} cut short at --max-new-tokens)" if tally.cut else ""
    ui.note(
        f"{plural(tally.done, 'file')} done, {tally.failed} failed{cut} · "
        f"{runs.new_tokens} new tokens · {runs.tokens_per_s:.1f} tok/s decoding · "
        f"{wall:.1f} s in all"
    )
    if tally.failed:
        total = tally.done + tally.failed
        raise PldError(f"{tally.failed} of {plural(total, 'file')} failed", code=tally.status)


class Worker:
    """Decodes and delivers documents with one loaded model."""

    def __init__(
        self,
        loaded: LoadedModel,
        config: DecodeConfig,
        settings: Settings,
        display: Display,
        ui: Ui,
    ) -> None:
        self.loaded, self.config, self.display, self.ui = loaded, config, display, ui
        penalty = loaded.repetition_penalty
        self.plain_config = settings.decode_config(use_pld=False, model_penalty=penalty)
        self.sections = 0  # `==> name <==` sections written to stdout

    def process(self, doc: Document, request: Request, splitter: Splitter) -> tuple[Stats, bool]:
        """The file's stats, and whether its output was cut at --max-new-tokens."""
        self.doc = doc
        kind = kind_of(doc.task.kind)
        text, parts = kind.long(doc.task, splitter, self.call)
        result = longdoc.total(parts, text)
        if kind.rewrites:  # the file as it was written: its endings, its last line
            result = dataclasses.replace(result, text=as_original(doc.task.document, result.text))
        plain = longdoc.total(parts, plain=True) if self.display.compare else None
        self.report(parts, result, plain)
        self.deliver(doc, request, parts, result, plain)
        return result.stats, longdoc.unfinished(parts) is not None

    def call(self, task: Task, where: str) -> Part:
        """One decode (and its plain twin under --compare), in the live view."""
        whole = where.startswith("the whole")
        if not whole:
            self.ui.note(f"{self.doc.label}: {where}")
        with self.ui.live(None if whole else where) as observe:
            try:
                result = run_task(self.loaded, task, self.config, observe=observe)
            except PldError as exc:  # input too long: which part
                raise PldError(str(exc) if whole else f"{where}: {exc}") from None
        if result.stats.stop == "repetition":
            self.ui.note(f"{self.doc.label}: stopped where the output began to repeat itself "
                         "(--allow-repetition goes on)")  # fmt: skip
        plain = None
        if self.display.compare:
            # One line per call of a long document would only repeat its "chunk" line.
            with self.ui.progress("decoding again without drafting (--compare)", quiet=not whole):
                plain = run_task(self.loaded, task, self.plain_config)
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
