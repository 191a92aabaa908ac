import os

import pytest

from pld_cli.errors import PldError
from pld_cli.files import atomic_write, read_document


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
        (b"\xff\xfeab", "UTF-8"),
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
