"""pld serve through OpenAI's own client package (`openai`): models, chat and text completions,
streamed, a predicted output and its usage, and the client's typed errors for a 404 and a 400."""

from __future__ import annotations

from pathlib import Path

import openai
import pytest
from pld_server import post

pytestmark = pytest.mark.slow  # the real default model
MODEL = "SmolLM2-135M-Instruct"
QUESTION = [{"role": "user", "content": "What is the capital of France?"}]
SOURCE = (Path(__file__).parents[2] / "samples/demo/app.yaml").read_text()


@pytest.fixture(scope="module")
def client(pld_server):
    return openai.OpenAI(base_url=f"{pld_server.url}/v1", api_key="unused", max_retries=0)


def test_the_client_lists_the_model_and_gets_the_raw_answer(client, pld_server):
    assert [model.id for model in client.models.list()] == [MODEL]
    answer = client.chat.completions.create(model=MODEL, messages=QUESTION, max_tokens=24)
    _, raw = post(pld_server.url, "/v1/chat/completions", {"messages": QUESTION, "max_tokens": 24})
    assert answer.choices[0].message.content == raw["choices"][0]["message"]["content"]
    assert answer.choices[0].finish_reason in ("stop", "length") and answer.model == MODEL
    assert answer.usage.total_tokens == answer.usage.prompt_tokens + answer.usage.completion_tokens


def test_a_stream_joins_into_the_answer_and_ends_with_its_usage(client):
    whole = client.chat.completions.create(model=MODEL, messages=QUESTION, max_tokens=24)
    stream = client.chat.completions.create(
        model=MODEL,
        messages=QUESTION,
        max_tokens=24,
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = list(stream)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == whole.choices[0].message.content
    assert chunks[-1].usage.completion_tokens == whole.usage.completion_tokens


def test_a_predicted_edit_reports_the_prediction_tokens(client):
    ask = [{"role": "user", "content": f"{SOURCE}\nChange the port to 9000. Output the file."}]
    plain = client.chat.completions.create(model=MODEL, messages=ask, max_tokens=200)
    predicted = client.chat.completions.create(
        model=MODEL,
        messages=ask,
        max_tokens=200,
        prediction={"type": "content", "content": SOURCE},
    )
    assert predicted.choices[0].message.content == plain.choices[0].message.content
    details = predicted.usage.completion_tokens_details
    assert details.accepted_prediction_tokens > 0
    assert details.rejected_prediction_tokens >= 0


def test_a_text_completion(client):
    answer = client.completions.create(model=MODEL, prompt="The capital of France is", max_tokens=8)
    assert answer.choices[0].text and answer.usage.completion_tokens <= 8


def test_errors_are_the_client_s_own(client):
    with pytest.raises(openai.NotFoundError, match="does not exist"):
        client.chat.completions.create(model="gpt-4o", messages=QUESTION)
    with pytest.raises(openai.BadRequestError, match="context"):
        client.chat.completions.create(model=MODEL, messages=QUESTION, max_tokens=4096)
    with pytest.raises(openai.BadRequestError, match="not supported"):
        client.chat.completions.create(model=MODEL, messages=QUESTION, n=3)
