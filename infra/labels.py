"""Cutting a text to a label's length at a word edge, with an ellipsis: a title or a list cell never ends mid-word."""
from __future__ import annotations

ELLIPSIS = "…"


def label_cut(text: str, limit: int) -> str:
    """`text` on one line, at most `limit` characters: whole when it fits, else up to the last word that fits and an
    ellipsis (a first word longer than the limit is cut inside it, as nothing else would show)."""
    text = " ".join(str(text or "").split())
    if len(text) <= limit:
        return text
    room = max(1, limit - len(ELLIPSIS))
    head = text[:room + 1]  # one more: a space just past the room means the last word there is whole
    cut = head.rsplit(" ", 1)[0] if " " in head else head[:room]
    cut = cut[:room].rstrip(" ,;:.-—–")
    return (cut or text[:room]) + ELLIPSIS
