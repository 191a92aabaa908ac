"""The bench's methods on equal terms: transformers' generate() stops at a loop where pld does."""

from types import SimpleNamespace

from conftest import repetitive_prompt
from families import tiny_family_model

from pld_cli.bench.methods import run_hf_generate
from pld_cli.core.decode import DecodeConfig, Pass, generate
from pld_cli.runtime.hf.dynamic import DynamicRuntime


def test_generate_stops_at_the_loop_where_pld_does():
    model = tiny_family_model("llama")
    prompt = repetitive_prompt(0)[:40]
    config = DecodeConfig(max_new_tokens=80, stop_loops=True, loop_span=4)
    tokens, stops = [], []
    for event in generate(DynamicRuntime(model), prompt, {2}, config):
        if isinstance(event, Pass):
            tokens += event.emitted
            stops.append(event.stop)
    assert stops[-1] == "repetition" and len(tokens) < 80
    loaded = SimpleNamespace(
        model=model, tokenizer=SimpleNamespace(pad_token_id=0), eos_ids=frozenset({2})
    )
    assert run_hf_generate(loaded, prompt, config).token_ids == tokens
    assert run_hf_generate(loaded, prompt, config, lookup=10).token_ids == tokens
