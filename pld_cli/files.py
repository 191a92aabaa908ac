"""Reading the user's input and replacing the user's files: checked on the way in, atomic out.

Byte fidelity: a result goes back with the original's line endings (CRLF or LF) and final-newline
state, and a replaced file keeps its mode (and owner and group, where the user may set them).
A read-only file is not replaced, as an editor would not overwrite it without being told.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
import sys
import tempfile
from pathlib import Path

from pld_cli.errors import ExitStatus, PldError

UTF16_BOMS = (b"\xff\xfe", b"\xfe\xff")


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
    if looks_utf16(data):
        raise PldError(
            f"{name}: not UTF-8 (looks like UTF-16); convert it first, e.g. "
            "`iconv -f UTF-16 -t UTF-8`"
        )
    if b"\0" in data[:8192]:
        raise PldError(f"{name}: looks like a binary file, not text")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise PldError(f"{name}: not UTF-8 text (bad byte at offset {exc.start})") from None
    if not text.strip():
        raise PldError(f"{name}: is empty")
    return text


def looks_utf16(data: bytes) -> bool:
    """A UTF-16 byte order mark, or ASCII-range text with every other byte zero."""
    if data.startswith(UTF16_BOMS):
        return True
    head = data[:8192]
    if len(head) < 4 or len(head) % 2:
        return False
    high, low = head[0::2], head[1::2]
    return (low.count(0) == len(low) and high.count(0) == 0) or (
        high.count(0) == len(high) and low.count(0) == 0
    )


def line_ending(text: str) -> str | None:
    """'\\r\\n' when every line ends so, '\\n' when none does, None for a mix (left as it is)."""
    crlf, lf = text.count("\r\n"), text.count("\n")
    if crlf == 0:
        return "\n"
    return "\r\n" if crlf == lf else None


def as_original(original: str, text: str) -> str:
    """text with the original's line endings and final-newline state (a model writes LF lines
    and ends a file with a newline whatever the file had)."""
    ending = line_ending(original)
    if ending is not None:
        text = text.replace("\r\n", "\n").replace("\n", ending)
    if not original.endswith("\n"):
        return text.rstrip("\r\n")
    if not text.endswith("\n"):
        return text + (ending or "\n")
    return text


def check_target(path: Path | str) -> None:
    """Fail now, before any model loads, where writing `path` would fail, or would replace a
    read-only file: its folder must exist and be writable, and it must not be a folder."""
    target = Path(path)
    if target.is_dir():
        raise PldError(f"{path}: is a directory, not a file")
    folder = target.resolve().parent
    if not folder.is_dir():
        why = "is not a folder" if folder.exists() else "does not exist"
        raise PldError(f"{path}: cannot write: the folder {folder} {why}")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise PldError(f"{path}: cannot write: the folder {folder} is not writable")
    if target.exists() and read_only(target):
        mode = stat.S_IMODE(target.stat().st_mode)
        raise PldError(
            f"{path}: is read-only (mode {mode:o}), not replaced; make it writable (chmod u+w) "
            "to let pld replace it"
        )


def read_only(path: Path) -> bool:
    """By its permission bits, not by whether an open would fail (root's always succeeds)."""
    return not path.stat().st_mode & stat.S_IWUSR or not os.access(path, os.W_OK)


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
        keep_attributes(temp, target)
        os.replace(temp, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temp)
        raise


def keep_attributes(temp: str, target: Path) -> None:
    """mkstemp makes the file private: give it the replaced file's owner, group and mode (owner
    first: a chown clears set-id bits), or for a new file the umask's default mode."""
    if not target.exists():
        os.chmod(temp, default_mode())
        return
    info = target.stat()
    with contextlib.suppress(PermissionError):  # only root may give a file away
        os.chown(temp, info.st_uid, info.st_gid)
    os.chmod(temp, stat.S_IMODE(info.st_mode))


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
