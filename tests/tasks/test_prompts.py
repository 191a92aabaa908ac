from pld_cli.tasks.prompts import Task, answer_start, messages, prompt_ids, template


def test_edit_prompt_carries_instruction_name_and_document():
    chat = messages(Task("edit", "x = {name}\n", "rename x", "a.py"))
    assert chat[0]["role"] == "system"
    user = chat[1]["content"]
    assert "rename x" in user and "a.py" in user
    assert "x = {name}" in user  # braces inside the document are not placeholders


def test_summarize_prompt_has_the_document():
    chat = messages(Task("summarize", "Some report text."))
    assert "Some report text." in chat[1]["content"]


def test_the_edit_answer_starts_with_a_fence_so_the_model_writes_the_file_at_once():
    assert template("edit")[2] == answer_start(Task("edit", "a")) == "```\n"
    assert answer_start(Task("summarize", "doc")) == ""


def test_prompt_ends_with_the_answer_start(tokenizer):
    text = tokenizer.decode(prompt_ids(tokenizer, Task("edit", "a = 1\n", "x", "a.py")))
    assert text.endswith("<|im_start|>assistant\n```\n")
