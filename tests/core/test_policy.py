from pld_cli.core.policy import AcceptanceModel, choose_length, run_bucket

FLAT = [1.0] * 12  # a GPU-like pass: extra positions free
CPU = [0.0] + [1.0 + 0.1 * (q - 1) for q in range(1, 12)]  # a pass over 11 positions costs 2×


def test_free_positions_verify_the_whole_draft():
    assert choose_length(10, 1, AcceptanceModel(), FLAT).k == 10


def test_costly_positions_and_a_fresh_short_match_verify_little():
    choice = choose_length(10, 1, AcceptanceModel(), CPU)
    assert 1 <= choice.k <= 2  # a little, not nothing: a fresh match still pays on a CPU


def test_a_long_accepted_run_predicts_more():
    model = AcceptanceModel()
    for _ in range(50):
        model.update(run=16, drafted=10, accepted=10)
    assert choose_length(10, 20, model, CPU).k == 10
    assert choose_length(10, 20, model, CPU).k > choose_length(10, 1, model, CPU).k


def test_hopeless_matches_are_not_verified():
    model = AcceptanceModel()
    for _ in range(200):
        model.update(run=1, drafted=1, accepted=0)
    choice = choose_length(10, 1, model, CPU)
    assert choice.k == 0
    assert "t(1)" in choice.reason


def test_update_counts_the_first_rejection_only():
    model = AcceptanceModel()
    before = list(model.trials)
    model.update(run=1, drafted=5, accepted=2)  # positions at runs 1, 2 held; run 3 failed
    added = [after - b for after, b in zip(model.trials, before, strict=True)]
    assert added == [1, 1, 1, 0, 0, 0, 0]


def test_an_ambiguous_match_has_its_own_first_token_estimate():
    model = AcceptanceModel()
    assert model.p(3, ambiguous=True) < model.p(3)
    before = list(model.trials)
    model.update(run=3, drafted=4, accepted=1, ambiguous=True)  # first held, second failed
    added = [after - b for after, b in zip(model.trials, before, strict=True)]
    assert added == [0, 0, 0, 1, 0, 0, 1]  # the first token counts as ambiguous, the next as run 4
    assert choose_length(10, 3, model, CPU, ambiguous=True).k <= choose_length(10, 3, model, CPU).k


def test_run_buckets():
    assert [run_bucket(r) for r in (0, 1, 2, 3, 5, 9, 40)] == [0, 0, 1, 2, 3, 4, 5]
