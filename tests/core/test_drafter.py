from pld_cli.core.drafter import NO_DRAFT, Drafter, NgramIndex, nearest


def test_copies_what_followed_the_match():
    index = NgramIndex([5, 6, 7, 8, 9, 1, 5, 6], ngram_max=2)
    draft = index.draft(3)
    assert draft.tokens == (7, 8, 9)
    assert draft.source == 2
    assert draft.run == 2


def test_no_match_gives_an_empty_draft():
    index = NgramIndex([1, 2, 3, 4])
    assert index.draft(5) == NO_DRAFT


def test_longest_ngram_first():
    # [3] last occurred at 4 (then 9); the 2-gram [2, 3] only at 1 (then 4).
    index = NgramIndex([1, 2, 3, 4, 3, 9, 2, 3], ngram_max=3)
    draft = index.draft(2)
    assert draft.run == 2
    assert draft.tokens == (4, 3)


def test_most_recent_occurrence():
    index = NgramIndex([7, 1, 7, 2, 7, 3, 7], ngram_max=1)
    assert index.draft(1).tokens == (3,)
    assert index.draft(1).source == 5


def test_draft_cut_short_at_the_end_of_the_sequence():
    index = NgramIndex([4, 5, 6, 4, 5], ngram_max=2)
    draft = index.draft(10)
    assert draft.tokens == (6, 4, 5)


def test_index_follows_appended_tokens():
    index = NgramIndex([1, 2, 3], ngram_max=2)
    assert index.draft(4) == NO_DRAFT
    index.extend([8, 2])
    assert index.draft(4).tokens == (3, 8, 2)
    index.append(3)
    assert index.draft(4).tokens == (8, 2, 3)


def test_ngram_min_limits_short_matches():
    index = NgramIndex([1, 9, 2, 9], ngram_max=3, ngram_min=2)
    assert index.draft(3) == NO_DRAFT


def test_zero_length_draft():
    assert NgramIndex([1, 2, 1]).draft(0) == NO_DRAFT


def test_drafter_continues_an_accepted_copy():
    # prompt: A B C D E F ... ; the output has matched "B C" and the model keeps copying.
    drafter = Drafter(NgramIndex([1, 2, 3, 4, 5, 6, 7, 9, 2, 3], ngram_max=2))
    first = drafter.draft(2)
    assert first.tokens == (4, 5) and first.run == 2
    drafter.extend([4, 5, 6])  # two accepted plus a bonus token that also matches the source
    second = drafter.draft(3)
    assert second.source == 6 and second.tokens == (7, 9, 2)
    assert second.run == 5


def test_drafter_drops_a_broken_copy_and_prefers_the_nearest_match():
    # [5] occurs twice; after a copy that ended near the second one, that one is preferred.
    tokens = [5, 1, 1, 1, 8, 8, 8, 5, 2, 8, 8]
    drafter = Drafter(NgramIndex(tokens, ngram_max=2))
    assert drafter.draft(1).source == 7  # [8, 8] last followed at ...
    drafter.extend([4])  # the model disagreed: the copy ends
    assert drafter.copy_next is None and drafter.last_copy_end == 7
    drafter.extend([5])
    assert drafter.draft(1).source == 8  # [5] followed at 1 and at 8; 8 is nearer to 7


def test_a_followed_copy_goes_on_where_the_plain_index_jumps_to_the_latest_match():
    tokens = [1, 2, 3, 4, 5, 9, 3, 7, 1, 2]
    follow, plain = (
        Drafter(NgramIndex(tokens, ngram_max=1), follow_copies=f) for f in (True, False)
    )
    for drafter in (follow, plain):
        assert drafter.draft(3).tokens == (3, 4, 5)  # [2] was followed by 3, 4, 5
        drafter.extend([3])  # the model agreed with the first draft token
    assert follow.draft(2).tokens == (4, 5)  # the copy goes on
    assert plain.draft(2).tokens == (7, 1)  # [3] was last followed by 7


def test_nearest_prefers_the_closer_then_the_later():
    assert nearest([1, 10, 20], 12) == 10
    assert nearest([1, 10, 20], 15) == 20
    assert nearest([4], 100) == 4


def test_a_match_followed_by_different_tokens_before_is_ambiguous():
    # [7] was followed by 1, then 2: which comes next is a guess.
    assert Drafter(NgramIndex([7, 1, 7, 2, 7], ngram_max=1)).draft(1).ambiguous
    # [7, 1] was followed by 3 both times.
    assert not Drafter(NgramIndex([7, 1, 3, 7, 1, 3, 7, 1], ngram_max=2)).draft(1).ambiguous


def test_the_output_s_first_draft_is_the_prediction_s_beginning():
    drafter = Drafter(NgramIndex([1, 2, 1], ngram_max=2), prediction=[4, 5, 6])
    first = drafter.draft(2)
    assert first.tokens == (4, 5) and first.source == 0 and first.predicted and first.run == 1
    assert drafter.index.tokens == [1, 2, 1]  # the prediction is never part of the sequence
    drafter.extend([4, 5, 6])
    assert drafter.draft(2) == NO_DRAFT  # copied to its end, and [6] is nowhere else


def test_a_prediction_offers_drafts_the_sequence_does_not_hold():
    drafter = Drafter(NgramIndex([1, 2, 3], ngram_max=2), prediction=[9, 2, 3, 4, 5, 6])
    drafter.extend([7, 2, 3])  # the output did not begin as predicted, then met it again
    draft = drafter.draft(3)
    assert draft.tokens == (4, 5, 6) and draft.source == 3 and draft.predicted


def test_the_prediction_wins_a_tie_and_a_longer_match_in_the_sequence_wins():
    tie = Drafter(NgramIndex([7, 8, 1, 9], ngram_max=2), prediction=[0, 7, 5])
    tie.extend([7])
    assert tie.draft(1).tokens == (5,) and tie.draft(1).predicted
    longer = Drafter(NgramIndex([6, 7, 8, 1, 9], ngram_max=2), prediction=[0, 7, 5])
    longer.extend([6, 7])
    assert longer.draft(1).tokens == (8,) and not longer.draft(1).predicted


def test_a_copy_from_the_prediction_goes_on_and_resumes_after_a_change():
    # The prediction is the old text 1..8; the output changes 4 into 40, then goes on as before.
    drafter = Drafter(NgramIndex([0, 9], ngram_max=1), prediction=[1, 2, 3, 4, 5, 6, 7, 8])
    assert drafter.draft(4).tokens == (1, 2, 3, 4)
    drafter.extend([1, 2, 3, 40])  # the model disagrees at the fourth token: the copy breaks
    assert drafter.copy_next is None and drafter.draft(2) == NO_DRAFT  # [40] is nowhere
    drafter.extend([5])
    resumed = drafter.draft(3)
    assert resumed.tokens == (6, 7, 8) and resumed.predicted
    assert drafter.last_copy_end is None  # the sequence's own copies are apart


def test_without_following_copies_a_prediction_is_looked_up_each_time():
    drafter = Drafter(NgramIndex([1], ngram_max=1), follow_copies=False, prediction=[1, 2, 3])
    assert drafter.draft(2).tokens == (2, 3) and drafter.draft(0) == NO_DRAFT
    assert drafter.draft(2).tokens == (2, 3)  # no copy state: the same lookup again
