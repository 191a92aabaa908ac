from pld_cli.prompts import Task, finish, messages, strip_fence


def test_edit_prompt_carries_instruction_name_and_document():
    chat = messages(Task("edit", "x = {name}\n", "rename x", "a.py"))
    assert chat[0]["role"] == "system"
    user = chat[1]["content"]
    assert "rename x" in user and "a.py" in user
    assert "x = {name}" in user  # braces inside the document are not placeholders


def test_summarize_prompt_has_the_document():
    chat = messages(Task("summarize", "Some report text."))
    assert "Some report text." in chat[1]["content"]


def test_strip_one_surrounding_fence():
    assert strip_fence("```python\na = 1\n```\n") == "a = 1\n"


def test_strip_fence_drops_remarks_after_it_and_keeps_inner_fences():
    text = "```markdown\n# T\n```sh\nls\n```\nend\n```\nThis file now has a title."
    assert strip_fence(text) == "# T\n```sh\nls\n```\nend\n"


def test_unfenced_text_is_kept():
    assert strip_fence("a = 1\n") == "a = 1\n"


def test_finish_keeps_the_final_newline_of_an_edited_file():
    assert finish(Task("edit", "a = 1\n"), "```\na = 2```") == "```\na = 2```\n"
    assert finish(Task("edit", "a = 1\n"), "a = 2") == "a = 2\n"
    assert finish(Task("summarize", "doc"), "  A summary.  ") == "A summary.\n"
