from pld_cli.core.config import DecodeConfig
from pld_cli.core.decode import Pass, Prefill, generate
from pld_cli.core.scripted import ScriptedRuntime
from pld_cli.core.stats import Stats

PROMPT = [10, 11, 12, 13, 14, 15, 16, 10, 11]
# The model copies the prompt's run 12..16, then writes 20, 21 and ends (EOS = 2).
SCRIPT = PROMPT + [12, 13, 14, 15, 16, 20, 21, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]


def run(config: DecodeConfig, script=SCRIPT, context_limit=1000):
    runtime = ScriptedRuntime(script, context_limit=context_limit)
    events = list(generate(runtime, PROMPT, {2}, config))
    stats = Stats()
    for event in events:
        stats.add(event)
    return events, stats


def emitted(events):
    return [t for e in events if isinstance(e, Pass) for t in e.emitted]


def test_first_event_is_the_prefill():
    events, stats = run(DecodeConfig())
    assert isinstance(events[0], Prefill)
    assert stats.prompt_tokens == len(PROMPT)


def test_pld_and_plain_emit_the_same_tokens_in_fewer_passes():
    pld_events, pld = run(DecodeConfig())
    plain_events, plain = run(DecodeConfig(use_pld=False))
    assert emitted(pld_events) == emitted(plain_events) == [12, 13, 14, 15, 16, 20, 21, 2]
    assert plain.passes == 8
    assert pld.passes < plain.passes
    assert pld.stop == plain.stop == "eos"


def test_copy_source_is_reported():
    events, _ = run(DecodeConfig())
    first = next(e for e in events if isinstance(e, Pass))
    assert first.source == 2 and first.from_prompt
    assert first.accepted >= 4


def test_stops_at_max_new_tokens_without_overshoot():
    events, stats = run(DecodeConfig(max_new_tokens=3))
    assert emitted(events) == [12, 13, 14]
    assert stats.stop == "max_new_tokens"


def test_stops_at_the_context_limit():
    events, stats = run(DecodeConfig(), context_limit=len(PROMPT) + 2)
    assert stats.stop == "context"
    assert len(emitted(events)) <= 3


def test_eos_inside_an_accepted_draft_ends_the_output():
    # The prompt holds an EOS (2) after 10 11 12; the model agrees with the draft up to it.
    prompt = [10, 11, 12, 2, 13, 14, 10, 11]
    runtime = ScriptedRuntime(prompt + [12, 2] + [9] * 30, context_limit=1000)
    passes = [e for e in generate(runtime, prompt, {2}, DecodeConfig()) if isinstance(e, Pass)]
    assert passes[0].drafted[:2] == (12, 2) and passes[0].accepted == 2
    assert emitted(passes) == [12, 2]  # nothing after the EOS, not even the model's own token
    assert passes[-1].stop == "eos" and len(passes) == 1


def test_stats_follow_the_events():
    events, stats = run(DecodeConfig())
    passes = [e for e in events if isinstance(e, Pass)]
    assert stats.new_tokens == sum(len(p.emitted) for p in passes) == 8
    assert stats.accepted_tokens == sum(p.accepted for p in passes)
    assert stats.drafted_tokens == sum(len(p.drafted) for p in passes)
    assert stats.copy_rate == stats.accepted_tokens / stats.new_tokens
    accepting = [p for p in passes if p.accepted]
    assert stats.mean_accepted == sum(p.accepted for p in accepting) / len(accepting)
    assert set(stats.as_dict()) >= {
        "prompt_tokens",
        "new_tokens",
        "passes",
        "drafted_tokens",
        "accepted_tokens",
        "prefill_s",
        "decode_s",
        "tokens_per_s",
        "copy_rate",
        "mean_accepted",
    }


def test_a_prediction_gives_the_same_tokens_in_fewer_passes_and_is_counted():
    # An edit: the prompt holds nothing to copy, the prediction is the old output (12..16, 17),
    # the model writes it with 17 changed into 20, then more and EOS.
    prompt = [30, 31, 32]
    output = [12, 13, 14, 15, 16, 20, 21, 2]
    script = prompt + output + [0] * 30
    prediction = [12, 13, 14, 15, 16, 17, 21, 2]
    runs = {}
    for name, predicted in (("plain", ()), ("predicted", prediction)):
        runtime = ScriptedRuntime(script)
        events = list(generate(runtime, prompt, {2}, DecodeConfig(), prediction=predicted))
        stats = Stats()
        for event in events:
            stats.add(event)
        runs[name] = (emitted(events), stats)
    (tokens, plain), (predicted_tokens, stats) = runs["plain"], runs["predicted"]
    assert predicted_tokens == tokens == output
    assert stats.passes < plain.passes
    assert stats.prediction_accepted >= 4 and stats.prediction_rejected >= 1
    assert stats.prediction_accepted + stats.prediction_rejected <= stats.drafted_tokens
    assert plain.prediction_accepted == plain.prediction_rejected == 0
