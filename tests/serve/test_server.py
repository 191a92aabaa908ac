"""pld serve on the real default model, in this process: what it serves, answers equal to pld's
own for the same prompt (streamed or not, alone or eight at once), a prediction that changes the
speed and never the answer, every bad request a 4xx JSON error, and a client that leaves freeing
its slot."""

from __future__ import annotations

import json
import socket
import threading
import time
from pathlib import Path

import pytest
from pld_server import CONTEXT, JOBS, events, get, post, start, streamed_text

from pld_cli.core.config import DecodeConfig
from pld_cli.engines.local import decode_ids
from pld_cli.files import read_document
from pld_cli.tasks.prompts import Task, answer_start, messages, prompt_ids

pytestmark = pytest.mark.slow  # the real default model
SAMPLES = Path(__file__).parents[2] / "samples"
CHAT, TEXT = "/v1/chat/completions", "/v1/completions"
MODEL = "SmolLM2-135M-Instruct"


def chat(content: str, **fields) -> dict:
    return {"model": MODEL, "messages": [{"role": "user", "content": content}]} | fields


def test_health_and_models_say_what_is_served(pld_server):
    assert get(pld_server.url, "/health") == (200, {"status": "ok"})
    status, listed = get(pld_server.url, "/v1/models")
    (entry,) = listed["data"]
    assert status == 200 and entry["id"] == MODEL and entry["object"] == "model"
    assert entry["max_model_len"] == CONTEXT and Path(entry["root"]).is_dir()
    assert get(pld_server.url, f"/v1/models/{MODEL}") == (200, entry)


NOTE = (
    "The river authority met on Tuesday. It approved a new flood wall for the east bank, "
    "costing 4 million euros, and asked the city to close the old ferry landing by June.\n"
)


def test_a_chat_answer_is_what_pld_summarize_prints(pld_server, pld, tmp_path):
    path = tmp_path / "note.txt"
    path.write_text(NOTE)
    path = str(path)
    text, name = read_document(path)
    body = {"model": MODEL, "messages": messages(Task("summarize", text, name=name))}
    body["max_tokens"] = 64
    status, answer = post(pld_server.url, CHAT, body)
    streamed = events(pld_server.url, CHAT, body | {"stream_options": {"include_usage": True}})
    code, out, err = pld("summarize", path, "--max-new-tokens", "64", "--allow-repetition")
    assert code in (0, 3), err  # 3: cut at --max-new-tokens, as the server's "length"
    content = answer["choices"][0]["message"]["content"]
    assert status == 200 and content.strip() + "\n" == out
    assert streamed_text(streamed) == content
    *chunks, usage, done = streamed
    # The second request finds the first's prompt kept: only the cached count may differ.
    kept, first = (
        u.pop("prompt_tokens_details")["cached_tokens"] for u in (usage["usage"], answer["usage"])
    )
    assert done == "[DONE]" and usage["usage"] == answer["usage"] and not usage["choices"]
    assert first < kept <= answer["usage"]["prompt_tokens"]
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert chunks[-1]["choices"][0]["finish_reason"] == answer["choices"][0]["finish_reason"]
    assert answer["usage"]["completion_tokens"] <= 64


def test_a_completion_of_token_ids_is_the_local_decode(pld_server):
    engine = pld_server.holder.current
    task = Task("edit", (SAMPLES / "demo/app.yaml").read_text(), "Change the port to 9000.")
    ids = prompt_ids(engine.tokenizer, task)
    tokens, _ = decode_ids(engine.loaded, ids, DecodeConfig(max_new_tokens=200))
    body = {"model": MODEL, "prompt": ids, "max_tokens": 200, "return_token_ids": True}
    status, answer = post(pld_server.url, TEXT, body)
    (choice,) = answer["choices"]
    assert status == 200 and choice["token_ids"] == tokens
    assert choice["text"] == engine.tokenizer.decode(tokens, skip_special_tokens=True)
    streamed = events(pld_server.url, TEXT, body)
    ids_streamed = [t for e in streamed[:-1] for c in e["choices"] for t in c["token_ids"]]
    assert ids_streamed == tokens and streamed_text(streamed) == choice["text"]
    assert "port: 9000" in choice["text"]


def test_a_prediction_changes_the_speed_not_the_answer(pld_server):
    """An edit as pld asks it (its answer starts with the code fence: continue_final_message),
    the file as the prediction."""
    source = (SAMPLES / "demo/app.yaml").read_text()
    task = Task("edit", source, "Change the port to 9000.", "app.yaml")
    fence = {"role": "assistant", "content": answer_start(task)}
    body = {"model": MODEL, "messages": [*messages(task), fence], "max_tokens": 300}
    body["continue_final_message"] = True
    _, plain = post(pld_server.url, CHAT, body)
    prediction = {"type": "content", "content": source}
    _, predicted = post(pld_server.url, CHAT, body | {"prediction": prediction})
    content = predicted["choices"][0]["message"]["content"]
    assert content == plain["choices"][0]["message"]["content"] and "port: 9000" in content
    details = predicted["usage"]["completion_tokens_details"]
    assert details["accepted_prediction_tokens"] > 20 and details["rejected_prediction_tokens"] > 0
    assert plain["usage"]["completion_tokens_details"]["accepted_prediction_tokens"] == 0
    streamed = events(pld_server.url, CHAT, body | {"prediction": prediction})
    assert streamed_text(streamed) == content


def test_a_seeded_sample_is_the_same_with_a_prediction_and_without(pld_server):
    """Sampled with a seed, the drafts a prediction adds change nothing (core/sampling.py)."""
    source = (SAMPLES / "demo/app.yaml").read_text()
    task = Task("edit", source, "Change the port to 9000.", "app.yaml")
    fence = {"role": "assistant", "content": answer_start(task)}
    body = {"model": MODEL, "messages": [*messages(task), fence], "max_tokens": 120}
    body |= {"continue_final_message": True, "temperature": 0.7, "seed": 5}
    _, plain = post(pld_server.url, CHAT, body)
    prediction = {"type": "content", "content": source}
    _, predicted = post(pld_server.url, CHAT, body | {"prediction": prediction})
    assert predicted["choices"][0]["message"] == plain["choices"][0]["message"]
    details = predicted["usage"]["completion_tokens_details"]
    assert details["accepted_prediction_tokens"] > 0 and details["rejected_prediction_tokens"] > 0


def test_no_pld_serves_the_same_answer_without_drafting(pld_server):
    """pld serve --no-pld, the baseline: plain decoding, the prediction unused, the same answer."""
    source = (SAMPLES / "demo/app.yaml").read_text()
    body = chat(f"{source}\nChange the port to 9000. Output the file.", max_tokens=120)
    body["prediction"] = {"type": "content", "content": source}
    plain_server = start(jobs=1, use_pld=False)
    try:
        _, plain = post(plain_server.url, CHAT, body)
    finally:
        plain_server.close()
    _, drafted = post(pld_server.url, CHAT, body)
    assert plain["choices"][0]["message"] == drafted["choices"][0]["message"]
    assert plain["usage"]["completion_tokens_details"]["accepted_prediction_tokens"] == 0
    assert drafted["usage"]["completion_tokens_details"]["accepted_prediction_tokens"] > 20


def test_eight_requests_at_once_are_each_as_alone(pld_server):
    topics = ["rivers", "bread", "trains", "bees", "glass", "chess", "salt", "clocks"]
    bodies = [chat(f"Write two sentences about {topic}.", max_tokens=40) for topic in topics]
    alone = [post(pld_server.url, CHAT, body)[1] for body in bodies]
    together: list[dict | None] = [None] * len(bodies)
    batch, most = pld_server.holder.current.batch, [0]

    def ask(i: int) -> None:
        together[i] = post(pld_server.url, CHAT, bodies[i])[1]

    threads = [threading.Thread(target=ask, args=(i,)) for i in range(len(bodies))]
    for thread in threads:
        thread.start()
    while any(thread.is_alive() for thread in threads):
        most[0] = max(most[0], batch.held)
        time.sleep(0.005)
    texts = [answer["choices"][0]["message"]["content"] for answer in alone]
    assert [answer["choices"][0]["message"]["content"] for answer in together] == texts
    assert most[0] == JOBS  # the batch was full; the other four waited for a slot
    assert len(set(texts)) == len(texts)


@pytest.mark.parametrize(
    "path, body, status, words",
    [
        (CHAT, b"{not json", 400, "not valid JSON"),
        (CHAT, chat("hi", model="gpt-4o"), 404, "'gpt-4o' does not exist"),
        (CHAT, chat("word " * 2100), 400, "exceed this model's context of 2048"),
        (TEXT, {"prompt": [1, 2, 3], "max_tokens": 2046}, 400, "exceed this model's context"),
        (CHAT, chat("hi", n=2), 400, "n = 2 is not supported"),
        (CHAT, chat("hi", max_tokens="ten"), 400, "max_tokens: expected an integer"),
        (CHAT, {"model": MODEL}, 400, "messages: expected a non-empty array"),
        (TEXT, {"prompt": [10**9]}, 400, "beyond the vocabulary"),
        ("/v1/embeddings", {"input": "x"}, 404, "no such path"),
    ],
    ids=["json", "model", "context", "max-tokens", "n", "type", "messages", "vocab", "path"],
)
def test_a_bad_request_is_a_4xx_json_error_and_the_server_goes_on(
    pld_server, path, body, status, words
):
    got, answer = post(pld_server.url, path, body)
    assert got == status and words in answer["error"]["message"], answer
    assert set(answer["error"]) == {"message", "type", "param", "code"}
    assert post(pld_server.url, CHAT, chat("Say yes.", max_tokens=3))[0] == 200


def wait_until_free(server, seconds: float = 30) -> None:
    deadline = time.perf_counter() + seconds
    while server.holder.users or server.holder.current.batch.held:
        assert time.perf_counter() < deadline, "the slot was never freed"
        time.sleep(0.05)


# The model counts on until max_tokens: a minute or more, unless the decode is stopped.
LONG = {"model": MODEL, "prompt": "1, 2, 3, 4, 5, 6, 7, 8, 9, 10,", "max_tokens": 1500}


def test_a_client_gone_mid_stream_frees_its_slot(pld_server):
    with socket.create_connection(pld_server.url.removeprefix("http://").split(":")) as sock:
        payload = json.dumps(LONG | {"stream": True}).encode()
        head = f"POST {TEXT} HTTP/1.1\r\nHost: x\r\nContent-Length: {len(payload)}\r\n\r\n"
        sock.sendall(head.encode() + payload)
        received = b""
        while received.count(b"data: ") < 3:  # three passes' text
            received += sock.recv(4096)
        assert pld_server.holder.users == 1
    start = time.perf_counter()
    wait_until_free(pld_server)
    assert time.perf_counter() - start < 10  # at its next pass, not after 1,500 tokens
    assert any("the client went away" in note for note in pld_server.note)
    assert post(pld_server.url, CHAT, chat("Say yes.", max_tokens=3))[0] == 200


def test_a_client_gone_before_a_plain_answer_frees_its_slot(pld_server):
    with socket.create_connection(pld_server.url.removeprefix("http://").split(":")) as sock:
        payload = json.dumps(LONG).encode()
        head = f"POST {TEXT} HTTP/1.1\r\nHost: x\r\nContent-Length: {len(payload)}\r\n\r\n"
        sock.sendall(head.encode() + payload)
        deadline = time.perf_counter() + 30
        while not pld_server.holder.users:
            assert time.perf_counter() < deadline
            time.sleep(0.01)
    wait_until_free(pld_server)
    assert post(pld_server.url, CHAT, chat("Say yes.", max_tokens=3))[0] == 200


def test_sampling_is_honoured_and_a_seed_repeats_its_answer(pld_server):
    body = chat("Name a colour.", max_tokens=12, temperature=1.0, seed=7)
    first, again = (post(pld_server.url, CHAT, body)[1] for _ in range(2))
    assert first["choices"][0]["message"] == again["choices"][0]["message"]
    seeds = {
        post(pld_server.url, CHAT, body | {"seed": seed})[1]["choices"][0]["message"]["content"]
        for seed in range(6)
    }
    assert len(seeds) > 1  # sampled, not greedy
