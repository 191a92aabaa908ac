"""Reading the user's input and replacing the user's files: checked on the way in, atomic out."""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
import sys
import tempfile
from pathlib import Path

from pld_cli.errors import ExitStatus, PldError


def read_document(path: str | None) -> tuple[str, str]:
    """(text, display name) of FILE, or of stdin for '-' or no FILE."""
    if path in (None, "-"):
        if sys.stdin is None or sys.stdin.isatty():
            raise PldError("no input: give a FILE, or pipe text on stdin", code=ExitStatus.USAGE)
        return decode_text(sys.stdin.buffer.read(), "stdin"), "stdin"
    file = Path(path)
    if file.is_dir():
        raise PldError(f"{path}: is a directory, not a file")
    try:
        data = file.read_bytes()
    except FileNotFoundError:
        raise PldError(f"{path}: no such file") from None
    except OSError as exc:
        raise PldError(f"{path}: cannot read ({exc.strerror})") from None
    return decode_text(data, path), file.name


def decode_text(data: bytes, name: str) -> str:
    if b"\0" in data[:8192]:
        raise PldError(f"{name}: looks like a binary file, not text")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise PldError(f"{name}: not UTF-8 text (bad byte at offset {exc.start})") from None
    if not text.strip():
        raise PldError(f"{name}: is empty")
    return text


def atomic_write(path: Path, text: str) -> None:
    """Replace path with text in one rename: readers see the old file or the new one, never half."""
    target = Path(path).resolve()
    try:
        fd, temp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".pld-tmp")
    except OSError as exc:
        raise PldError(f"{path}: cannot write ({exc.strerror})") from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as out:
            out.write(text)
            out.flush()
            os.fsync(out.fileno())
        # mkstemp makes the file private; keep the replaced file's mode, or the umask's default.
        os.chmod(temp, stat.S_IMODE(target.stat().st_mode) if target.exists() else default_mode())
        os.replace(temp, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temp)
        raise


def default_mode() -> int:
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask


def keep_backup(path: Path, suffix: str) -> Path:
    """Copy path to path + suffix (bytes, mode and times), itself atomically, before a rewrite."""
    source = Path(path)
    backup = source.with_name(source.name + suffix)
    refusal = f"{backup}: cannot keep the backup ({{}}); {path} left untouched"
    try:
        fd, temp = tempfile.mkstemp(dir=source.parent, prefix=f".{backup.name}.", suffix=".pld-tmp")
    except OSError as exc:
        raise PldError(refusal.format(exc.strerror)) from None
    os.close(fd)
    try:
        shutil.copy2(source, temp)
        os.replace(temp, backup)
    except OSError as exc:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temp)
        raise PldError(refusal.format(exc.strerror)) from None
    return backup
