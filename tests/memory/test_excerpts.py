"""A long memory is shown as the sentences that answer the query, in order, with a marker where text was cut."""
from __future__ import annotations

from infra.tokens import count_tokens
from memory.excerpts import CUT, excerpt, key_weights, query_keys


def test_a_long_memory_is_shown_as_its_answering_sentences_with_cut_markers():
    text = "Ada: " + " ".join(f"Sentence {i} is about the weather and nothing else." for i in range(30)) \
        + " The staging server listens on port 8443. " + " ".join(f"Closing line {i} about lunch." for i in range(10))
    weights = key_weights(query_keys("Which port does the staging server listen on?"), [text, "Ada: the weather"])
    shown = excerpt(text, weights=weights, limit=40, prefix="Ada: ")
    assert shown.startswith("Ada: ") and CUT in shown and shown.endswith(CUT)
    assert "The staging server listens on port 8443." in shown and count_tokens(shown) <= 40
    assert excerpt("Ada: short.", weights=weights, limit=40, prefix="Ada: ") == "Ada: short."
    # A larger limit shows everything a smaller one shows.
    wider = excerpt(text, weights=weights, limit=120, prefix="Ada: ")
    assert all(part.strip() in wider for part in shown.removeprefix("Ada: ").split(CUT) if part.strip())
