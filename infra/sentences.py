"""Sentence boundaries: one splitter for everything that reads text a sentence at a time."""
from __future__ import annotations

import re

# A sentence ends at ".", "!", "?" or "…" followed by whitespace, or at a line break; but a trailing-off ellipsis
# followed by a lower-case word ("tech stuff, work stuff... but the worst was self-doubt") goes on with the same
# sentence: cut there, its point would be left in the next fragment.
_BOUNDARY = re.compile(r"(?<=[.!?…])(?<!\.\.\.)(?<!…)\s+|(?:(?<=\.\.\.)|(?<=…))\s+(?![a-z])|\n+")


def sentence_spans(text: str) -> list[tuple[int, int]]:
    """(start, end) of each non-blank sentence in the text, so a caller can map other spans onto sentences."""
    spans, start = [], 0
    text = text or ""
    for m in _BOUNDARY.finditer(text):
        if text[start:m.start()].strip():
            spans.append((start, m.start()))
        start = m.end()
    if text[start:].strip():
        spans.append((start, len(text)))
    return spans


def sentences(text: str) -> list[str]:
    """The non-blank sentences of the text, stripped."""
    return [text[start:end].strip() for start, end in sentence_spans(text)]
