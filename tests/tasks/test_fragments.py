from pld_cli.core.decode import Pass
from pld_cli.tasks.fragments import FragmentDecoder

TEXT = "Zoë's café — naïve 東京 résumé:\n    return x  # ok ✓\n" * 3


def test_fragments_add_up_to_the_decoded_text(tokenizer):
    ids = tokenizer(TEXT, add_special_tokens=False)["input_ids"]
    decoder, fragments = FragmentDecoder(tokenizer), []
    for start in range(0, len(ids), 3):  # passes of 3 tokens: 2 copied, then the model's own
        chunk = tuple(ids[start : start + 3])
        fragments += decoder.feed(Pass(chunk[:2], min(2, len(chunk)), chunk, 0, True, 0.0))
    assert "".join(fragment.text for fragment in fragments) == tokenizer.decode(ids)
    assert {fragment.copied for fragment in fragments} == {True, False}
