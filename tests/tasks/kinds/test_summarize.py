from pld_cli.tasks.kinds import kind_of
from pld_cli.tasks.prompts import Task


def test_a_summary_is_trimmed_to_one_final_newline():
    assert kind_of("summarize").finish(Task("summarize", "doc"), "  A summary.  ") == "A summary.\n"
