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


def sentences_join(text: str, spans: list[tuple[int, int]]) -> str:
    """The text of some of its sentences (spans in order, as sentence_spans gives them), the text's own layout kept:
    between two sentences that follow each other, what lay between them (a blank line, a line break and the next
    line's indentation, which make a list or a code block); where sentences were left out between them, a blank
    line, a line break or a space, as was there."""
    out = ""
    for n, (start, end) in enumerate(spans):
        if n == 0:
            out = text[start:end].lstrip()
            continue
        gap = text[spans[n - 1][1]:start]
        if not gap.strip():
            out += gap + text[start:end]
        elif "\n" in gap:
            out = out.rstrip() + ("\n\n" if re.search(r"\n[ \t]*\n", gap) else "\n") + text[start:end].lstrip("\n")
        else:
            out = out.rstrip() + " " + text[start:end].lstrip()
    return out.strip()
