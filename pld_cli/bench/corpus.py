"""Benchmark corpora: folders with a manifest.jsonl of edit and summarize tasks, checked on load.

Each manifest line is {"id", "task": "edit" | "summarize", "file" (relative to the manifest),
"instruction" (edits only)}; any problem is a PldError naming the manifest line. An item too
long for one call is benchmarked as the chunks or pieces it starts with (`expand`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from pld_cli.errors import PldError
from pld_cli.files import read_document
from pld_cli.tasks.kinds import kind_of
from pld_cli.tasks.prompts import Task

if TYPE_CHECKING:  # longdoc imports torch: manifests are read and checked before it loads
    from pld_cli.tasks.longdoc import Splitter


@dataclass(frozen=True)
class Item:
    id: str
    corpus: str  # the corpus folder's name
    task: Task
    part_of: str | None = None  # a chunk or piece of this long item (its id is 'item#k')


def load_corpus(folder: Path, corpus: str | None = None) -> list[Item]:
    """The items of a corpus folder's manifest.jsonl, documents read and checked."""
    manifest = Path(folder) / "manifest.jsonl"
    if not manifest.is_file():
        raise PldError(f"{folder}: no manifest.jsonl (expected a corpus folder)")
    corpus = corpus or Path(folder).resolve().name
    items = []
    for number, line in enumerate(manifest.read_text(encoding="utf-8").splitlines(), 1):
        if line.strip():
            items.append(manifest_item(json_line(line, f"{manifest}:{number}"), manifest, number))
    if not items:
        raise PldError(f"{manifest}: no items")
    return [Item(entry_id, corpus, task) for entry_id, task in items]


def json_line(line: str, where: str) -> dict:
    try:
        entry = json.loads(line)
    except json.JSONDecodeError as exc:
        raise PldError(f"{where}: not valid JSON ({exc.msg})") from None
    if not isinstance(entry, dict):
        raise PldError(f"{where}: expected a JSON object")
    return entry


def manifest_item(entry: dict, manifest: Path, number: int) -> tuple[str, Task]:
    where = f"{manifest}:{number}"
    for key in ("id", "task", "file"):
        if not isinstance(entry.get(key), str) or not entry[key]:
            raise PldError(f'{where}: missing or empty "{key}"')
    try:
        kind = kind_of(entry["task"])
    except PldError as exc:
        raise PldError(f"{where}: {exc}") from None
    instruction = entry.get("instruction", "") if kind.needs_instruction else ""
    if kind.needs_instruction and (not isinstance(instruction, str) or not instruction.strip()):
        raise PldError(f'{where}: a task "{kind.name}" needs an "instruction"')
    text, name = read_document(str(manifest.parent / entry["file"]))
    return entry["id"], Task(kind.name, text, instruction.strip(), name)


def corpus_names(folders: Sequence[Path]) -> list[str]:
    """Each folder's name, or parent/name where two folders share a name (samples/edit)."""
    paths = [Path(folder).resolve() for folder in folders]
    names = [path.name for path in paths]
    return [f"{p.parent.name}/{p.name}" if names.count(p.name) > 1 else p.name for p in paths]


def load_corpora(folders: Sequence[Path]) -> list[Item]:
    names = corpus_names(folders)
    items = [item for f, name in zip(folders, names, strict=True) for item in load_corpus(f, name)]
    seen: set[tuple[str, str]] = set()
    for item in items:
        if (item.corpus, item.id) in seen:
            raise PldError(f"corpus {item.corpus}: item id {item.id!r} appears twice")
        seen.add((item.corpus, item.id))
    return items


def expand(items: Sequence[Item], splitter: Splitter) -> list[Item]:
    """Each item, or for a long one its chunks or pieces as items 'id#1', 'id#2', ..."""
    out = []
    for item in items:
        try:
            parts = kind_of(item.task.kind).first_round(item.task, splitter)
        except PldError as exc:
            raise PldError(f"{item.corpus}/{item.id}: {exc}") from None
        if len(parts) == 1:
            out.append(item)
            continue
        out += [
            Item(f"{item.id}#{k}", item.corpus, task, item.id)
            for k, (_, task) in enumerate(parts, 1)
        ]
    return out
