"""pld serve's kept prompts on the real default model: a second request on a document prefills
only its instruction (usage's cached_tokens) and answers bit for bit as a server that keeps
nothing; eight requests on one document at once, and again once their prompts are kept, each
answer the one it gets alone."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from pld_server import events, post, start

pytestmark = pytest.mark.slow  # the real default model
DOCUMENT = (Path(__file__).parents[2] / "samples" / "summarize" / "tech_doc.md").read_text()
CHAT = "/v1/chat/completions"
INSTRUCTIONS = [
    "Summarize this in one sentence.",
    "List the section titles.",
    "What is the main topic?",
    "Translate the first sentence into French.",
    "Name one command the document shows.",
    "Give the document a title.",
    "Which requirements does it list?",
    "Write one question a reader might ask.",
]


def body(instruction: str, **fields) -> dict:
    content = f"{DOCUMENT}\n\n{instruction}"
    return {
        "model": "SmolLM2-135M-Instruct",
        "messages": [{"role": "user", "content": content}],
        "max_tokens": 24,
        "return_token_ids": True,
    } | fields


def answer(url: str, instruction: str) -> tuple[list[int], int, int]:
    """The answer's token ids, prompt tokens and cached tokens."""
    status, reply = post(url, CHAT, body(instruction))
    assert status == 200, reply
    usage = reply["usage"]
    cached = usage["prompt_tokens_details"]["cached_tokens"]
    return reply["choices"][0]["token_ids"], usage["prompt_tokens"], cached


@pytest.fixture(scope="module")
def servers(tmp_path_factory):
    """A server that keeps prompts (4 slots) and one that keeps none (1 slot: each alone)."""
    with pytest.MonkeyPatch.context() as patch:
        folder = tmp_path_factory.getbasetemp() / "pld-cache"
        patch.setattr("pld_cli.loading.ready.cache_dir", lambda: folder)
        keeping, plain = start(jobs=4), start(jobs=1, cache_ram=0)
        yield keeping, plain
        keeping.stop()
        plain.stop()


def test_a_second_instruction_on_a_document_is_answered_from_its_kept_prompt(servers):
    keeping, plain = servers
    first, prompt_tokens, cached = answer(keeping.url, INSTRUCTIONS[0])
    assert cached == 0 and prompt_tokens > 1000
    second, _, cached = answer(keeping.url, INSTRUCTIONS[1])
    assert prompt_tokens - 40 < cached < prompt_tokens  # the document, not the instruction
    again, _, cached_again = answer(keeping.url, INSTRUCTIONS[1])
    assert again == second and cached_again > cached  # the whole prompt was kept
    assert (first, 0) == answer(plain.url, INSTRUCTIONS[0])[::2]
    assert (second, 0) == answer(plain.url, INSTRUCTIONS[1])[::2]
    found = events(keeping.url, CHAT, body(INSTRUCTIONS[1], stream_options={"include_usage": True}))
    usage = found[-2]["usage"]  # the last chunk before [DONE]
    assert usage["prompt_tokens_details"]["cached_tokens"] == cached_again


def test_eight_requests_on_one_document_answer_as_alone(servers):
    keeping, plain = servers
    alone = [answer(plain.url, instruction)[0] for instruction in INSTRUCTIONS]
    for _ in range(2):  # at once with nothing of theirs kept, then again, each kept
        got = at_once(keeping.url)
        assert [tokens for tokens, _, _ in got] == alone
    assert all(cached == prompt_tokens - 1 for _, prompt_tokens, cached in got)


def at_once(url: str) -> list:
    got: list = [None] * len(INSTRUCTIONS)

    def ask(i: int) -> None:
        got[i] = answer(url, INSTRUCTIONS[i])

    threads = [threading.Thread(target=ask, args=(i,)) for i in range(len(INSTRUCTIONS))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return got
