from pld_cli.core.scripted import ScriptedRuntime
from pld_cli.core.verify import accepted_prefix, verify_greedy

# The model's own continuation: after the prompt [1, 2] it would write 3, 4, 5, 6, 7.
SCRIPT = [1, 2, 3, 4, 5, 6, 7, 8]


def runtime_after_prompt() -> ScriptedRuntime:
    runtime = ScriptedRuntime(SCRIPT)
    runtime.prefill([1])  # the cache holds all but the pending token 2
    return runtime


def test_no_draft_token_accepted():
    runtime = runtime_after_prompt()
    accepted, emitted = verify_greedy(runtime, 2, [9, 4])
    assert (accepted, emitted) == (0, [3])
    assert runtime.length == 2  # pending token kept, both drafts rolled back


def test_some_draft_tokens_accepted():
    runtime = runtime_after_prompt()
    accepted, emitted = verify_greedy(runtime, 2, [3, 4, 9, 9])
    assert accepted == 2
    assert emitted == [3, 4, 5]  # two copies, then the model's own token
    assert runtime.length == 4
    assert runtime.rollbacks == [4]


def test_all_draft_tokens_accepted_plus_bonus():
    runtime = runtime_after_prompt()
    accepted, emitted = verify_greedy(runtime, 2, [3, 4, 5])
    assert accepted == 3
    assert emitted == [3, 4, 5, 6]  # the bonus token comes from the same pass
    assert runtime.length == 5


def test_empty_draft_is_a_plain_step():
    runtime = runtime_after_prompt()
    assert verify_greedy(runtime, 2, []) == (0, [3])
    assert runtime.passes == [[2]]


def test_accepted_prefix_stops_at_first_disagreement():
    assert accepted_prefix([1, 2, 3], [1, 5, 3, 0]) == 1
    assert accepted_prefix([], [4]) == 0
