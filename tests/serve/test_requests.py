"""A request's JSON into typed values: both endpoints' shapes, greedy by default, sampling kept,
every fault or unsupported field a 400 naming its field (no model needed)."""

from __future__ import annotations

import json

import pytest

from pld_cli.core.config import SamplingConfig
from pld_cli.serve.errors import ApiError
from pld_cli.serve.requests import Endpoint, Message, Role, parse


def read(endpoint: Endpoint, body: dict):
    return parse(endpoint, json.dumps(body).encode())


def refusal(endpoint: Endpoint, body: dict | bytes) -> ApiError:
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    with pytest.raises(ApiError) as raised:
        parse(endpoint, data)
    assert raised.value.status == 400
    return raised.value


def test_a_chat_request_with_text_parts_and_a_prediction():
    request = read(
        Endpoint.CHAT,
        {
            "model": "m",
            "messages": [
                {"role": "developer", "content": "Be brief."},
                {
                    "role": "user",
                    "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}],
                },
            ],
            "max_completion_tokens": 9,
            "stream": True,
            "stream_options": {"include_usage": True},
            "prediction": {"type": "content", "content": [{"type": "text", "text": "guess"}]},
        },
    )
    assert request.messages == (Message(Role.SYSTEM, "Be brief."), Message(Role.USER, "ab"))
    assert request.max_tokens == 9 and request.stream and request.include_usage
    assert request.prediction == "guess" and request.model == "m"


def test_greedy_unless_a_temperature_is_given_and_then_the_sampling_fields_are_kept():
    assert read(Endpoint.CHAT, {"messages": [{"role": "user", "content": "x"}]}).sampling == (
        SamplingConfig()
    )
    body = {"prompt": "x", "temperature": 0.7, "top_p": 0.9, "top_k": -1, "seed": 3}
    assert read(Endpoint.TEXT, body).sampling == SamplingConfig(0.7, 0.9, 0, 3)


@pytest.mark.parametrize(
    "prompt, expected",
    [("text", "text"), ([5, 6], (5, 6)), (["text"], "text"), ([[5, 6]], (5, 6))],
)
def test_a_prompt_is_text_or_token_ids_alone_or_in_an_array_of_one(prompt, expected):
    assert read(Endpoint.TEXT, {"prompt": prompt}).prompt == expected


@pytest.mark.parametrize(
    "body, param",
    [
        (b"[1, 2", None),
        (b"[1, 2]", None),
        ({"messages": []}, "messages"),
        ({"messages": [{"role": "tool", "content": "x"}]}, "messages[0].role"),
        (
            {"messages": [{"role": "user", "content": [{"type": "image_url"}]}]},
            "messages[0].content[0]",
        ),
        ({"messages": [{"role": "user", "content": "x"}], "stream": "yes"}, "stream"),
        ({"messages": [{"role": "user", "content": "x"}], "max_tokens": True}, "max_tokens"),
        ({"messages": [{"role": "user", "content": "x"}], "max_tokens": 0}, "max_tokens"),
        ({"messages": [{"role": "user", "content": "x"}], "temperature": 3}, "temperature"),
        ({"messages": [{"role": "user", "content": "x"}], "top_p": 0}, "top_p"),
        ({"messages": [{"role": "user", "content": "x"}], "logprobs": True}, "logprobs"),
        ({"messages": [{"role": "user", "content": "x"}], "stop": ["\n"]}, "stop"),
        ({"messages": [{"role": "user", "content": "x"}], "prediction": "guess"}, "prediction"),
        (
            {"messages": [{"role": "user", "content": "x"}], "continue_final_message": True},
            "continue_final_message",
        ),
        (
            {
                "messages": [{"role": "user", "content": "x"}],
                "response_format": {"type": "json_object"},
            },
            "response_format",
        ),
    ],
    ids=[
        "json",
        "array",
        "no-messages",
        "role",
        "image",
        "stream",
        "bool-as-int",
        "zero-tokens",
        "temperature",
        "top-p",
        "logprobs",
        "stop",
        "prediction",
        "continue",
        "json-mode",
    ],
)
def test_every_fault_is_a_400_naming_its_field(body, param):
    assert refusal(Endpoint.CHAT, body).param == param


@pytest.mark.parametrize(
    "body", [{"prompt": ""}, {"prompt": []}, {"prompt": [1, -2]}, {"prompt": ["a", "b"]}]
)
def test_a_completion_needs_one_prompt(body):
    assert refusal(Endpoint.TEXT, body).param == "prompt"


def test_fields_that_change_nothing_and_fields_pld_does_not_know_pass():
    body = {"prompt": "x", "n": 1, "stop": [], "logprobs": None, "user": "me", "echo": False}
    assert read(Endpoint.TEXT, body).prompt == "x"
