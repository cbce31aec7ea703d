"""Scripts written without spaces between words (Chinese, Japanese, Thai, Lao, Khmer, Burmese): a run of them is one
"word" to a whitespace tokenizer, so counting and keyword search read such a run as its characters and their pairs."""
from __future__ import annotations

import re

# Han, Hiragana, Katakana (and their extensions, half-width forms), Thai, Lao, Myanmar, Khmer.
_UNSPACED_CHARS = ("\u3040-\u30ff\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uff66-\uff9f"
                   "\u0e00-\u0e7f\u0e80-\u0eff\u1000-\u109f\u1780-\u17ff")
UNSPACED_CHAR = re.compile(f"[{_UNSPACED_CHARS}]")
_RUN = re.compile(f"[{_UNSPACED_CHARS}]+")


def has_unspaced(text: str) -> bool:
    return bool(UNSPACED_CHAR.search(text or ""))


def unspaced_terms(text: str) -> str:
    """The text with each run of an unspaced script written out as its single characters and overlapping pairs,
    space-separated, the way CJK search engines index it (a two-character word such as 東京 is then a term of its
    own); text in other scripts is returned unchanged."""
    if not has_unspaced(text):
        return text

    def spread(m: re.Match) -> str:
        run = m.group(0)
        pairs = [run[i:i + 2] for i in range(len(run) - 1)]
        return " " + " ".join([*run, *pairs]) + " "

    return _RUN.sub(spread, text)
