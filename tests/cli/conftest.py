"""The command line run in-process: `pld(*args)` gives (exit status, stdout, stderr)."""

from __future__ import annotations

import io
import sys

import pytest

from pld_cli.cli.app import main


class Stdin(io.TextIOWrapper):
    def __init__(self, data: bytes, tty: bool = False) -> None:
        super().__init__(io.BytesIO(data), encoding="utf-8")
        self.tty = tty

    def isatty(self) -> bool:
        return self.tty


@pytest.fixture
def pld(monkeypatch, capsys):
    def invoke(*args: str, stdin: bytes | None = None, tty: bool = False):
        monkeypatch.setattr(sys, "argv", ["pld", *args])
        monkeypatch.setattr(sys, "stdin", Stdin(stdin or b"", tty=stdin is None or tty))
        with pytest.raises(SystemExit) as exit_info:
            main()
        out, err = capsys.readouterr()
        return exit_info.value.code, out, err

    return invoke


@pytest.fixture
def tiny(tiny_model_dir):
    return ["-m", tiny_model_dir, "--max-new-tokens", "8"]
