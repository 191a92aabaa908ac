import os

import pytest

from pld_cli.errors import PldError
from pld_cli.files import as_original, atomic_write, check_target, line_ending, read_document


def test_reads_utf8_text(tmp_path):
    path = tmp_path / "a.txt"
    path.write_text("héllo\n", encoding="utf-8")
    assert read_document(str(path)) == ("héllo\n", "a.txt")


@pytest.mark.parametrize(
    "content,message",
    [
        (b"", "is empty"),
        (b"  \n", "is empty"),
        (b"\x00\x01bin", "binary"),
        (b"\xe9t\xe9", "UTF-8"),
        ("héllo\n".encode("utf-16"), "looks like UTF-16"),  # with its byte order mark
        ("hello\n".encode("utf-16-le"), "looks like UTF-16"),  # without
    ],
)
def test_bad_files_are_refused(tmp_path, content, message):
    path = tmp_path / "bad"
    path.write_bytes(content)
    with pytest.raises(PldError, match=message):
        read_document(str(path))


def test_missing_file_and_directory(tmp_path):
    with pytest.raises(PldError, match="no such file"):
        read_document(str(tmp_path / "nope.txt"))
    with pytest.raises(PldError, match="directory"):
        read_document(str(tmp_path))


def test_atomic_write_replaces_and_keeps_the_mode(tmp_path):
    path = tmp_path / "f.py"
    path.write_text("old\n")
    os.chmod(path, 0o640)
    atomic_write(path, "new\n")
    assert path.read_text() == "new\n"
    assert oct(path.stat().st_mode & 0o777) == oct(0o640)
    assert os.listdir(tmp_path) == ["f.py"]  # no temporary file left behind


def test_atomic_write_creates_a_new_file_with_the_usual_mode(tmp_path):
    umask = os.umask(0o022)
    try:
        atomic_write(tmp_path / "new.json", "{}\n")
    finally:
        os.umask(umask)
    assert oct((tmp_path / "new.json").stat().st_mode & 0o777) == oct(0o644)


def test_atomic_write_leaves_the_file_alone_on_failure(tmp_path, monkeypatch):
    path = tmp_path / "f.py"
    path.write_text("old\n")

    def fail(*args):
        raise KeyboardInterrupt

    monkeypatch.setattr(os, "replace", fail)
    with pytest.raises(KeyboardInterrupt):
        atomic_write(path, "new\n")
    assert path.read_text() == "old\n"
    assert os.listdir(tmp_path) == ["f.py"]


def test_atomic_write_keeps_owner_and_group(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("only root may give a file to another owner")
    path = tmp_path / "f.py"
    path.write_text("old\n")
    os.chown(path, 12345, 23456)
    atomic_write(path, "new\n")
    assert (path.stat().st_uid, path.stat().st_gid) == (12345, 23456)


@pytest.mark.parametrize(
    "original,model,kept",
    [
        ("a\r\nb\r\n", "a\nB\n", "a\r\nB\r\n"),  # CRLF kept
        ("a\nb", "a\nB\n", "a\nB"),  # no final newline stays so
        ("a\r\nb", "a\nB\n\n", "a\r\nB"),
        ("a\nb\n", "a\nB", "a\nB\n"),
        ("a\r\nb\n", "a\nB\n", "a\nB\n"),  # mixed endings: the model's text as it is
    ],
)
def test_a_result_keeps_the_originals_line_endings_and_last_newline(original, model, kept):
    assert as_original(original, model) == kept


def test_line_ending():
    assert (line_ending("a\r\nb\r\n"), line_ending("a\nb"), line_ending("a\r\nb\n")) == (
        "\r\n",
        "\n",
        None,
    )


def test_check_target_refuses_what_a_write_would_fail_on(tmp_path):
    with pytest.raises(PldError, match="does not exist"):
        check_target(tmp_path / "no" / "out.txt")
    (tmp_path / "file").write_text("x\n")
    with pytest.raises(PldError, match="is not a folder"):
        check_target(tmp_path / "file" / "out.txt")
    with pytest.raises(PldError, match="is a directory"):
        check_target(tmp_path)
    check_target(tmp_path / "new.txt")  # a new file in a writable folder is fine


def test_check_target_refuses_a_read_only_file_by_its_mode(tmp_path):
    path = tmp_path / "f.py"
    path.write_text("x\n")
    os.chmod(path, 0o444)  # root could open it for writing: the mode decides, not an open
    with pytest.raises(PldError, match=r"read-only \(mode 444\)"):
        check_target(path)


def test_check_target_refuses_an_unwritable_folder(tmp_path, monkeypatch):
    real = os.access
    monkeypatch.setattr(
        os, "access", lambda p, mode: False if str(p) == str(tmp_path) else real(p, mode)
    )
    with pytest.raises(PldError, match="is not writable"):
        check_target(tmp_path / "out.txt")
