"""Stats: what an engine does not report stays unknown through a merge and into JSON."""

from pld_cli.core.stats import Stats


def test_unknown_drafts_stay_unknown_when_merged():
    known = Stats(new_tokens=10, passes=4, drafted_tokens=12, accepted_tokens=6, stop="eos")
    unknown = Stats(new_tokens=8, passes=5, accepted_tokens=3, stop="eos", drafts_known=False)
    assert Stats.merged([known, known]).as_dict()["drafted_tokens"] == 24
    merged = Stats.merged([known, unknown])
    assert not merged.drafts_known and merged.as_dict()["drafted_tokens"] is None
    assert (merged.new_tokens, merged.accepted_tokens, merged.passes) == (18, 9, 9)
