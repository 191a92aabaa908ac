"""The server engine's logic against a scripted server (fake_server.py): chunks as passes, what
the server reports and what stays unknown, the loop stop, retries and every fault named."""

from __future__ import annotations

import re
import threading
import time

import pytest
from fake_server import Answer, FakeServer
from transformers import AutoTokenizer

from pld_cli.cli.options import Settings
from pld_cli.core.config import DecodeConfig, SamplingConfig
from pld_cli.engines.http import Client, ServerError
from pld_cli.engines.server import ServerEngine, open_engine

PROMPT = [11, 22, 33, 44]


@pytest.fixture
def fake(tiny_model_dir):
    server = FakeServer(tiny_model_dir)
    yield server
    server.close()


def engine(fake, parallel=1, key=None, timeout=5.0) -> ServerEngine:
    tokenizer = AutoTokenizer.from_pretrained(fake.root)
    client = Client(fake.url, key, timeout)
    return ServerEngine(client, "fake", tokenizer, 2048, frozenset({2}), parallel)


def test_each_chunk_is_a_pass_and_the_servers_metrics_are_kept(fake):
    tokens, stats = engine(fake).decode(PROMPT, DecodeConfig(max_new_tokens=5))
    assert tokens == [1, 2, 3, 4, 5]
    assert stats.passes == 3 and stats.passes_accepting == 1  # [1], [2, 3, 4], [5]
    assert (stats.drafted_tokens, stats.accepted_tokens) == (9, 2)  # as the server said
    assert stats.drafts_known and stats.stop == "eos" and stats.prompt_tokens == len(PROMPT)
    assert stats.as_dict()["drafted_tokens"] == 9


def test_what_the_server_does_not_report_is_unknown(fake):
    fake.queue.append(Answer(chunks=[[1], [2, 3], [4, 5, 6]], metrics=None, finish="length"))
    tokens, stats = engine(fake).decode(PROMPT, DecodeConfig(max_new_tokens=6))
    assert stats.accepted_tokens == 3  # from the chunks: 0 + 1 + 2
    assert not stats.drafts_known and stats.as_dict()["drafted_tokens"] is None
    assert stats.stop == "max_new_tokens"


def test_the_request_is_the_prompt_ids_greedy_streamed(fake):
    config = DecodeConfig(max_new_tokens=7, repetition_penalty=1.1)
    engine(fake).decode(PROMPT, config)
    (body,) = fake.requests
    assert body["prompt"] == PROMPT and body["model"] == "fake" and body["max_tokens"] == 7
    assert body["temperature"] == 0 and "top_p" not in body and "seed" not in body
    assert body["stream"] and body["return_token_ids"] and body["repetition_penalty"] == 1.1
    sampled = DecodeConfig(sampling=SamplingConfig(temperature=0.7, top_p=0.9, top_k=5, seed=3))
    engine(fake).decode(PROMPT, sampled)
    assert {k: fake.requests[1][k] for k in ("temperature", "top_p", "top_k", "seed")} == {
        "temperature": 0.7,
        "top_p": 0.9,
        "top_k": 5,
        "seed": 3,
    }


def test_a_server_that_takes_only_text_gets_the_same_prompt_rendered(fake):
    fake.queue.append(Answer(status=422, message="prompt: expected a string"))
    shared = engine(fake)
    assert shared.decode(PROMPT, DecodeConfig())[0] == [1, 2, 3, 4, 5]
    shared.decode(PROMPT, DecodeConfig())
    refused, *texts = (body["prompt"] for body in fake.requests)
    assert refused == PROMPT and texts == [shared.tokenizer.decode(PROMPT)] * 2


def test_a_loop_is_cut_off_where_the_local_loop_stops(fake):
    fake.queue.append(Answer(chunks=[[1, 2, 3]] * 6 + [[9]]))
    config = DecodeConfig(stop_loops=True, loop_span=3)
    tokens, stats = engine(fake).decode(PROMPT, config)
    # The span's third copy ends it, as LoopStop ends pld's own loop; the rest is never read.
    assert tokens == [1, 2, 3] * 3 and stats.stop == "repetition" and stats.passes == 3


def test_busy_and_loading_are_retried_then_answered(fake):
    fake.queue.extend([Answer(status=503, retry_after="0"), Answer(status=429, retry_after="0")])
    tokens, _ = engine(fake).decode(PROMPT, DecodeConfig())
    assert tokens == [1, 2, 3, 4, 5] and len(fake.requests) == 3


@pytest.mark.parametrize(
    "answer, words",
    [
        (Answer(status=400, message="maximum context length is 2048"), "400 Bad Request: maximum"),
        (Answer(status=500, message="boom"), "500 Internal Server Error: boom"),
        (Answer(cut_after=1), "ended the stream before the answer did"),
        (Answer(error_after=1), "failed mid-answer: engine died"),
        (Answer(delay=1.5), "sent nothing for 0.5 s (--timeout)"),
    ],
    ids=["400", "500", "cut", "error-event", "timeout"],
)
def test_every_fault_is_one_line_naming_its_cause(fake, answer, words):
    fake.queue.append(answer)
    with pytest.raises(ServerError) as raised:
        engine(fake, timeout=0.5).decode(PROMPT, DecodeConfig())
    assert words in str(raised.value) and "\n" not in str(raised.value)
    assert len(fake.requests) == 1  # never retried


def test_an_unreachable_server_is_named(fake):
    fake.close()
    with pytest.raises(
        ServerError,
        match=r"cannot reach the server at http://127\.0\.0\.1:\d+: "
        "connection refused",
    ):
        engine(fake).decode(PROMPT, DecodeConfig())


def test_the_key_is_sent_and_never_shown(fake):
    fake.queue.append(Answer(status=401, message="Unauthorized"))
    with pytest.raises(ServerError) as raised:
        engine(fake, key="sk-secret-123").decode(PROMPT, DecodeConfig())
    assert fake.headers[0]["Authorization"] == "Bearer sk-secret-123"
    assert "sk-secret" not in str(raised.value)


def test_calls_in_flight_stay_within_parallel(fake):
    fake.answer = lambda body: Answer(delay=0.1)
    shared = engine(fake, parallel=2)
    threads = [
        threading.Thread(target=shared.decode, args=(PROMPT, DecodeConfig())) for _ in range(5)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert fake.most_in_flight == 2 and len(fake.requests) == 5


def test_close_cuts_a_call_in_flight(fake):
    fake.queue.append(Answer(chunks=[[1]] * 50, delay=0.2))
    shared, failures = engine(fake), []

    def decode():
        try:
            shared.decode(PROMPT, DecodeConfig())
        except ServerError as exc:
            failures.append(exc)

    thread = threading.Thread(target=decode)
    thread.start()
    time.sleep(0.5)
    start = time.perf_counter()
    shared.close()
    thread.join(timeout=5)
    assert not thread.is_alive() and failures and time.perf_counter() - start < 1.0


@pytest.fixture
def quick_stall(monkeypatch):
    monkeypatch.setattr("pld_cli.engines.http.STALL", 0.3)


def test_a_silent_stream_of_an_unwell_server_fails_at_once(fake, quick_stall):
    fake.health = 503  # vLLM's front end up, its engine gone: the stream stays open and silent
    fake.queue.append(Answer(delay=30.0))
    start = time.perf_counter()
    with pytest.raises(
        ServerError, match=r"stopped answering mid-answer \(its /health answered 503"
    ):
        engine(fake, timeout=60.0).decode(PROMPT, DecodeConfig())
    assert time.perf_counter() - start < 5


@pytest.mark.parametrize("health", [200, None], ids=["health", "models"])
def test_a_healthy_server_may_be_silent_for_longer(fake, quick_stall, health):
    fake.health = health  # None: no /health, so /v1/models is asked
    fake.queue.append(Answer(delay=1.0))  # each chunk after three probes' worth of silence
    tokens, stats = engine(fake, timeout=5.0).decode(PROMPT, DecodeConfig())
    assert tokens == [1, 2, 3, 4, 5] and stats.stop == "eos"


@pytest.fixture
def quick_token_stall(monkeypatch):
    monkeypatch.setattr("pld_cli.engines.http.TOKEN_STALL", 0.5)


@pytest.mark.parametrize("health", [200, None], ids=["health", "models"])
def test_a_healthy_server_stalled_after_its_first_token_fails_within_the_limit(
    fake, quick_token_stall, health
):
    fake.health = health  # healthy by /health, or by /v1/models where it has none
    fake.queue.append(Answer(pauses={1: 30.0}))  # the first token, then nothing
    start = time.perf_counter()
    with pytest.raises(ServerError) as raised:
        engine(fake, timeout=60.0).decode(PROMPT, DecodeConfig())
    assert time.perf_counter() - start < 3  # the limit (0.5 s) and a probe, not --timeout
    assert re.fullmatch(
        r"the server at http://127\.0\.0\.1:\d+ sent nothing for 0\.5 s after its first token "
        r"\(healthy by its health check, yet stalled; --token-timeout\)",
        str(raised.value),
    )
    assert len(fake.requests) == 1  # never retried


def test_before_its_first_token_a_healthy_server_may_be_silent_past_the_limit(
    fake, quick_stall, quick_token_stall
):
    fake.queue.append(Answer(pauses={0: 1.5}))  # a long prefill: three times the limit, probed
    tokens, stats = engine(fake, timeout=5.0).decode(PROMPT, DecodeConfig())
    assert tokens == [1, 2, 3, 4, 5] and stats.stop == "eos"


def test_an_unwell_server_stalled_after_its_first_token_is_named_unwell(fake, quick_token_stall):
    fake.health = 503
    fake.queue.append(Answer(pauses={1: 30.0}))
    with pytest.raises(ServerError, match=r"stopped answering mid-answer \(its /health answered"):
        engine(fake, timeout=60.0).decode(PROMPT, DecodeConfig())


def test_the_per_token_limit_is_the_clients_own_from_token_timeout(fake, tiny_model_dir):
    settings = Settings(server=fake.url, tokenizer=tiny_model_dir, token_timeout=0.5)
    shared = open_engine(settings, lambda _: None)
    assert shared.client.token_timeout == 0.5 and Settings().token_timeout == 60.0
    fake.queue.append(Answer(pauses={1: 30.0}))
    with pytest.raises(ServerError, match=r"sent nothing for 0\.5 s after its first token"):
        shared.decode(PROMPT, DecodeConfig())
