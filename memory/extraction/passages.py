"""Long messages as passages: bounded, structure-aware chunks, so retrieval can return the part of a message that
answers and a token budget holds several messages instead of one long one.

The bound comes from the embedding model, not from any conversation: all-MiniLM-L6-v2 reads 256 word pieces and
ignores the rest, so an episodic memory longer than that is searchable by its opening alone. A passage stays well
inside the window (word pieces run ~1.2-1.4 per tiktoken token in English prose, more in code), and a message that
fits in one passage is kept whole. Chunks follow the text's own structure (semantic-text-splitter's Markdown
splitter: headings, paragraphs, list items, a fenced code block as one unit while it fits, then sentences, then
words), so a passage is never cut mid-sentence when a boundary exists.
"""
from __future__ import annotations

import functools

from django.conf import settings
from semantic_text_splitter import MarkdownSplitter

from infra.tokens import count_tokens


@functools.lru_cache(maxsize=4)
def _splitter(low: int, high: int) -> MarkdownSplitter:
    return MarkdownSplitter.from_callback(count_tokens, (low, high))


def passages_split(text: str) -> list[str]:
    """The text as one passage when it fits the bound, else its chunks in order (none blank)."""
    high = settings.MEMORY_PASSAGE_MAX_TOKENS
    if count_tokens(text) <= high:
        return [text]
    # A range, so chunks are filled towards the bound at the highest structural level that allows it, and the
    # last one is not a stub when the text allows otherwise.
    chunks = [c.strip() for c in _splitter(max(1, high * 3 // 5), high).chunks(text)]
    return [c for c in chunks if c] or [text]
