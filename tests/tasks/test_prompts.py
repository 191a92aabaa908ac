from pld_cli.tasks.prompts import Task, finish, messages, prompt_ids, strip_fence, template


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


def test_the_fence_closes_after_the_files_own_closing_lines():
    again = "```\nOutput:\n```\na = 2\n```\n"  # what a small model may write after the file
    assert strip_fence("```\na = 2\n" + again, inner=0) == "a = 2\n"
    inner = "```\n# T\n```\nls\n```\nend\n"
    assert strip_fence(inner + again, inner=2) == "# T\n```\nls\n```\nend\n"
    assert finish(Task("edit", "a = 1\n"), "a = 2\n" + again) == "a = 2\n"


def test_unfenced_text_is_kept():
    assert strip_fence("a = 1\n") == "a = 1\n"


def test_an_answer_cut_before_its_closing_fence_loses_only_the_opening_line():
    assert strip_fence("```python\na = 1\nb =") == "a = 1\nb =\n"


def test_finish_adds_the_answer_start_and_keeps_the_final_newline():
    # The edit template starts the answer with a fence, so the model writes the file right away.
    assert template("edit")[2] == "```\n"
    assert finish(Task("edit", "a = 1\n"), "a = 2\n```\nDone.") == "a = 2\n"
    assert finish(Task("edit", "a = 1\n"), "a = 2```") == "a = 2```\n"
    assert finish(Task("summarize", "doc"), "  A summary.  ") == "A summary.\n"


def test_prompt_ends_with_the_answer_start(default_model):
    tokenizer = default_model.tokenizer
    text = tokenizer.decode(prompt_ids(tokenizer, Task("edit", "a = 1\n", "x", "a.py")))
    assert text.endswith("<|im_start|>assistant\n```\n")
