"""Long messages as passages: bounded, structure-aware chunks, so retrieval can return the part of a message that
answers and a token budget holds several messages instead of one long one.

The bound comes from the embedding model, not from any conversation: all-MiniLM-L6-v2 reads 256 word pieces and
ignores the rest, so an episodic memory longer than that is searchable by its opening alone. A passage stays well
inside the window (word pieces run ~1.2-1.4 per tiktoken token in English prose, more in code), and a message that
fits in one passage is kept whole. Chunks follow the text's own structure (semantic-text-splitter's Markdown
splitter: headings, paragraphs, list items, a fenced code block as one unit while it fits, then sentences, then
words), so a passage is never cut mid-sentence when a boundary exists.

A fenced block longer than the bound (a pasted log, a whole source file) is kept as whole as a memory's text may be
(MEMORY_TEXT_MAX_CHARS, which edits and imports enforce too): one passage, or a few, each a fenced block of whole
lines. Cut at the bound it became a run of memories that each say little (forty lines of one log), plus a chunk
holding only its opening fence, and every one competed with the prose for a question's budget. Kept whole, its
opening is embedded, every word of it is in the keyword index, and under a budget it is shown as its best lines
(memory/excerpts.py). The text around it is split as before.
"""
from __future__ import annotations

import functools
import re

from django.conf import settings
from semantic_text_splitter import MarkdownSplitter

from infra.tokens import count_tokens

from ..actions.records import MEMORY_TEXT_MAX_CHARS


@functools.lru_cache(maxsize=4)
def _splitter(low: int, high: int) -> MarkdownSplitter:
    return MarkdownSplitter.from_callback(count_tokens, (low, high))


_SPEAKER_ROOM = 100  # an episodic memory is "Name: " and the passage: room for the name within the text's bound
# A fenced block (``` or ~~~, CommonMark): its opening fence, everything up to a closing fence of the same kind, or
# the end of the text when it is never closed.
_FENCED = re.compile(r"^(?P<fence>```|~~~)[^\n]*\n.*?(?:^(?P=fence)[ \t]*$|\Z)", re.MULTILINE | re.DOTALL)


def passages_split(text: str) -> list[str]:
    """The text as one passage when it fits the bound, else its chunks in order (none blank), a fenced block longer
    than the bound as one passage of its own."""
    high = settings.MEMORY_PASSAGE_MAX_TOKENS
    if count_tokens(text) <= high:
        return [text]
    out, at = [], 0
    for block in _FENCED.finditer(text):
        if count_tokens(block.group(0)) > high:
            out += _chunks(text[at:block.start()], high) + _block_pieces(block.group(0).strip())
            at = block.end()
    out += _chunks(text[at:], high)
    return out or [text]


def _block_pieces(block: str) -> list[str]:
    """A fenced block as one passage, or as few as the memory text's bound allows: consecutive whole lines, each
    piece fenced as the block is (a line longer than the bound on its own is cut)."""
    limit = MEMORY_TEXT_MAX_CHARS - _SPEAKER_ROOM
    if len(block) <= limit:
        return [block]
    lines = block.split("\n")
    opening, fence = lines[0], lines[0][:3]
    body = lines[1:-1] if len(lines) > 1 and lines[-1].strip() == fence else lines[1:]
    room = limit - len(opening) - len(fence) - 2
    parts = [line[i:i + room] for line in body for i in range(0, max(len(line), 1), room)]
    pieces, current, size = [], [], 0
    for part in parts:
        if current and size + len(part) + 1 > room:
            pieces.append(current)
            current, size = [], 0
        current.append(part)
        size += len(part) + 1
    if current:
        pieces.append(current)
    return [f"{opening}\n" + "\n".join(piece) + f"\n{fence}" for piece in pieces]


def _chunks(text: str, high: int) -> list[str]:
    if not text.strip():
        return []
    if count_tokens(text) <= high:
        return [text.strip()]
    # A range, so chunks are filled towards the bound at the highest structural level that allows it, and the
    # last one is not a stub when the text allows otherwise.
    chunks = [c.strip() for c in _splitter(max(1, high * 3 // 5), high).chunks(text)]
    return [c for c in chunks if c]
