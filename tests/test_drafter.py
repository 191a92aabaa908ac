from pld_cli.drafter import NO_DRAFT, NgramIndex


def test_copies_what_followed_the_match():
    index = NgramIndex([5, 6, 7, 8, 9, 1, 5, 6], ngram_max=2)
    draft = index.draft(3)
    assert draft.tokens == (7, 8, 9)
    assert draft.source == 2
    assert draft.ngram == 2


def test_no_match_gives_an_empty_draft():
    index = NgramIndex([1, 2, 3, 4])
    assert index.draft(5) == NO_DRAFT


def test_longest_ngram_first():
    # The 1-gram [3] last occurred at 4 (followed by 9); the 2-gram [2, 3] only at 1 (followed by 4).
    index = NgramIndex([1, 2, 3, 4, 3, 9, 2, 3], ngram_max=3)
    draft = index.draft(2)
    assert draft.ngram == 2
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
