from pld_cli.tasks.kinds import kind_of
from pld_cli.tasks.kinds.edit import strip_fence
from pld_cli.tasks.prompts import Task, answer_start


def test_strip_one_surrounding_fence():
    assert strip_fence("```python\na = 1\n```\n") == "a = 1\n"


def test_strip_fence_drops_remarks_after_it_and_keeps_inner_fences():
    text = "```markdown\n# T\n```sh\nls\n```\nend\n```\nThis file now has a title."
    assert strip_fence(text) == "# T\n```sh\nls\n```\nend\n"


def test_unfenced_text_is_kept():
    assert strip_fence("a = 1\n") == "a = 1\n"


def test_an_answer_cut_before_its_closing_fence_loses_only_the_opening_line():
    assert strip_fence("```python\na = 1\nb =") == "a = 1\nb =\n"


def test_an_edit_result_keeps_the_final_newline_of_the_document():
    edit, task = kind_of("edit"), Task("edit", "a = 1\n")
    assert edit.finish(task, answer_start(task) + "a = 2\n```\nDone.") == "a = 2\n"
    assert edit.finish(task, answer_start(task) + "a = 2```") == "a = 2```\n"
    assert edit.finish(Task("edit", "a = 1"), "a = 2") == "a = 2"


def test_the_fence_closes_after_the_files_own_closing_lines():
    again = "```\nOutput:\n```\na = 2\n```\n"  # what a small model may write after the file
    assert strip_fence("```\na = 2\n" + again, inner=0) == "a = 2\n"
    inner = "```\n# T\n```\nls\n```\nend\n"
    assert strip_fence(inner + again, inner=2) == "# T\n```\nls\n```\nend\n"
    task = Task("edit", "a = 1\n")
    assert kind_of("edit").finish(task, answer_start(task) + "a = 2\n" + again) == "a = 2\n"
