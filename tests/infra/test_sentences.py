"""One sentence splitter: ends at . ! ? or … before whitespace, or at a line break; spans map back onto the text."""
from infra.sentences import sentence_spans, sentences


def test_sentences_end_at_punctuation_before_whitespace_and_at_line_breaks():
    text = "I fly Monday. Is 9.30 ok?\nMaybe… Or not!  Bye"
    assert sentences(text) == ["I fly Monday.", "Is 9.30 ok?", "Maybe…", "Or not!", "Bye"]


def test_blank_text_has_no_sentences():
    assert sentences("") == sentences(None) == sentences(" \n\n  ") == []


def test_spans_cover_exactly_the_sentences():
    text = "First one.  Second one!\n\n  Third"
    spans = sentence_spans(text)
    assert [text[a:b].strip() for a, b in spans] == sentences(text) == ["First one.", "Second one!", "Third"]
    assert all(0 <= a < b <= len(text) for a, b in spans)


def test_an_ellipsis_before_a_lower_case_word_goes_on_with_the_sentence():
    text = "I faced all kinds of hurdles - tech stuff, workplace stuff... but the worst was self-doubt. It passed."
    assert sentences(text) == ["I faced all kinds of hurdles - tech stuff, workplace stuff... but the worst was "
                               "self-doubt.", "It passed."]
    assert sentences("Well… maybe. Hmm... Then we go.") == ["Well… maybe.", "Hmm...", "Then we go."]
    assert sentences("Wait…\nno.") == ["Wait…", "no."]  # a line break still ends it
