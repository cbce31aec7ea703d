"""How the benches score a context and an answer against a question's gold answer: words, F1, gold content, pairs.

Words are normalised as SQuAD's evaluation does (lower case, punctuation and articles dropped; LoCoMo's own evaluation
also drops "and"). A content word is a normalised word that is not a stopword; a content word is found in a text when
the text holds it or an inflection of it (`word_finder`).

- token F1 and exact match: an answer against the gold answer;
- unsupported words: an answer's content words found in none of its sources (the contexts and the question);
- gold content share: the share of the gold answer's content words that a context holds. For a long gold answer (an
  ordering, a summary) a reader of a few words cannot match, it says whether the context gave the reader what the
  answer needs;
- paired figures: per question, one context's score against another's (wins, losses, ties, the mean difference and a
  seeded bootstrap interval of it).
"""
from __future__ import annotations

import random
import re
import statistics
import string
from collections import Counter

# Words that carry no claim: an answer made only of these states nothing the contexts could lack.
STOPWORDS = frozenset("""
i me my myself we our ours ourselves you your yours yourself yourselves he him his himself she her hers herself it its
itself they them their theirs themselves what which who whom whose this that these those am is are was were be been
being have has had having do does did doing but if or because as until while of at by for with about against between
into through during before after above below to from up down in out on off over under again further then once here
there when where why how all any both each few more most other some such no nor not only own same so than too very s t
can will just don should now would could might must shall may also yes ok okay mentioned stated specified say says
said unknown unclear context information given provided answer none nothing since though although within
without among across along around upon via per yet still even ever etc
""".split())
_PUNCTUATION = frozenset(string.punctuation)


def normalize(text: str) -> list[str]:
    text = str(text).lower()
    text = "".join(ch for ch in text if ch not in _PUNCTUATION)
    text = re.sub(r"\b(a|an|the|and)\b", " ", text)
    return text.split()


def token_f1(prediction: str, gold: str) -> float:
    p, g = normalize(prediction), normalize(gold)
    common = sum((Counter(p) & Counter(g)).values())
    if not p or not g or not common:
        return float(p == g)
    precision, recall = common / len(p), common / len(g)
    return 2 * precision * recall / (precision + recall)


def exact_match(prediction: str, gold: str) -> float:
    return float(normalize(prediction) == normalize(gold))


def content_words(text: str) -> list[str]:
    """The text's normalised words that are not stopwords, each once, in order."""
    return [w for w in dict.fromkeys(normalize(text)) if w not in STOPWORDS]


def word_finder(sources: list[str]):
    """A test of whether a word is in any of the sources. A word of letters is found when a source's word starts with
    its first max(5, length - 3) letters, so an inflection is the same word ("prioritizes" for "prioritize",
    "clients" for "client"); a number must be there as it is."""
    known = {w for text in sources for w in normalize(text)}
    stems = {w[:n] for w in known if w.isalpha() for n in range(5, len(w) + 1)}

    def found(w: str) -> bool:
        return w in known or (w.isalpha() and len(w) >= 5 and w[:max(5, len(w) - 3)] in stems)

    return found


def unsupported_words(answer: str, sources: list[str]) -> list[str]:
    """The answer's content words found in none of the sources (`word_finder`)."""
    found = word_finder(sources)
    return [w for w in content_words(answer) if not found(w)]


def gold_content_share(gold: str, context: str) -> float | None:
    """The share of the gold answer's content words that the context holds (an inflection counts as the word);
    None when the gold answer has no content words (nothing to hold)."""
    words = content_words(gold)
    if not words:
        return None
    found = word_finder([context])
    return sum(map(found, words)) / len(words)


def mean_of(values) -> float | None:
    """The mean of the values that are not None; None when there are none."""
    xs = [v for v in values if v is not None]
    return statistics.mean(xs) if xs else None


def paired(ours: list[float], theirs: list[float], *, resamples: int = 2000, seed: int = 7) -> dict:
    """Per question, our score against theirs (same questions, same order): wins, losses and ties, the mean
    difference (ours - theirs) and its 95% bootstrap interval (questions resampled with replacement, `resamples`
    times, seeded; the 2.5th and 97.5th percentiles of the resampled means)."""
    if len(ours) != len(theirs):
        raise ValueError("paired scores need the same questions on both sides")
    diffs = [a - b for a, b in zip(ours, theirs)]
    if not diffs:
        return {"questions": 0, "wins": 0, "losses": 0, "ties": 0, "mean_difference": None, "ci95": None}
    rng, n = random.Random(seed), len(diffs)
    means = sorted(sum(rng.choices(diffs, k=n)) / n for _ in range(resamples))

    def at(q: float) -> float:
        return means[min(len(means) - 1, max(0, round(q * (len(means) - 1))))]

    return {"questions": n, "wins": sum(d > 1e-9 for d in diffs), "losses": sum(d < -1e-9 for d in diffs),
            "ties": sum(abs(d) <= 1e-9 for d in diffs), "mean_difference": statistics.mean(diffs),
            "ci95": [at(0.025), at(0.975)]}
