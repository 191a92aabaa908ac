import pytest

from pld_cli.core.decode import Pass
from pld_cli.errors import PldError
from pld_cli.tasks.pipeline import SpanDecoder, check_fits

TEXT = "Zoë's café — naïve 東京 résumé:\n    return x  # ok ✓\n" * 3


def test_spans_add_up_to_the_decoded_text(default_model):
    tokenizer = default_model.tokenizer
    ids = tokenizer(TEXT, add_special_tokens=False)["input_ids"]
    decoder, spans = SpanDecoder(tokenizer), []
    for start in range(0, len(ids), 3):  # passes of 3 tokens: 2 copied, then the model's own
        chunk = tuple(ids[start : start + 3])
        spans += decoder.feed(Pass(chunk[:2], min(2, len(chunk)), chunk, 0, True, 0.0))
    assert "".join(span.text for span in spans) == tokenizer.decode(ids)
    assert {span.copied for span in spans} == {True, False}


def test_input_that_does_not_fit_names_the_counts():
    with pytest.raises(PldError, match=r"900 prompt tokens \+ 200 new tokens .* 1000 tokens"):
        check_fits(900, 200, 1000)
    check_fits(800, 200, 1000)
