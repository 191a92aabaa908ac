"""The live view of documents at once: a row per file with its state and counts (a long
document's calls summed), and the run's total."""

import io

from rich.console import Console

from pld_cli.cli.board import Board
from pld_cli.core.decode import Pass
from pld_cli.core.stats import Stats

STEP = Pass(drafted=(), accepted=0, emitted=(1,), source=None, from_prompt=None, seconds=0.1)


def shown(board: Board) -> str:
    console = Console(file=io.StringIO(), width=120)
    console.print(board.__rich__())
    return console.file.getvalue()


def test_rows_show_each_files_state_and_counts_and_the_total():
    board = Board(Console(file=io.StringIO()), ["a.md", "b.md", "c.md"])
    first, second = board.observer("a.md"), board.observer("a.md")  # two calls of a long one
    first(STEP, [], Stats(new_tokens=10, passes=4, decode_s=1.0))
    second(STEP, [], Stats(new_tokens=6, passes=4, decode_s=1.0))
    board.finished("a.md", ok=True)
    board.observer("b.md")
    board.finished("c.md", ok=False)
    lines = {line.split()[0]: line.split()[1:] for line in shown(board).splitlines()[2:]}
    assert lines["a.md"] == ["done", "16", "8", "2.00", "8.0"]
    assert lines["b.md"][0] == "decoding" and lines["c.md"][0] == "failed"
    assert "16 new tokens" in shown(board)
