"""The product-shaped development set with long pastes: the same questions on longer messages, and nothing else."""
from __future__ import annotations

import re

from bench import product_set


def _turns(data):
    for sample in data:
        for key, turns in sample["conversation"].items():
            if key.startswith("session_") and isinstance(turns, list):
                yield from turns


def test_pastes_lengthen_turns_and_keep_the_questions_and_every_original_word():
    base = product_set.generate()
    long = product_set.pastes_add(base)
    assert [s["qa"] for s in long] == [s["qa"] for s in base]
    assert [s["observation"] for s in long] == [s["observation"] for s in base]
    pasted = 0
    for before, after in zip(_turns(base), _turns(long), strict=True):
        assert before["dia_id"] == after["dia_id"]
        # Every paragraph of the turn is still there, in order: the paste only adds.
        paragraphs = before["text"].split("\n\n")
        at = 0
        for paragraph in paragraphs:
            found = after["text"].find(paragraph, at)
            assert found >= 0
            at = found + len(paragraph)
        pasted += after["text"] != before["text"]
    share = pasted / sum(1 for _ in _turns(base))
    assert 0.25 < share < 0.45
    def p90(data):
        words = sorted(len(t["text"].split()) for t in _turns(data))
        return words[int(0.9 * len(words))]

    assert p90(long) > 2 * p90(base)


def test_pastes_are_seeded_and_carry_no_dates():
    base = product_set.generate()
    assert product_set.pastes_add(base) == product_set.pastes_add(base)
    added = []
    for before, after in zip(_turns(base), _turns(product_set.pastes_add(base))):
        if after["text"] != before["text"]:
            added.append(after["text"])
    months = "|".join(["January", "February", "March", "April", "May", "June", "July", "August", "September",
                       "October", "November", "December"])
    base_dates = sum(len(re.findall(rf"\b(?:{months})\b|\b\d{{4}}-\d\d-\d\d\b", t["text"])) for t in _turns(base))
    long_dates = sum(len(re.findall(rf"\b(?:{months})\b|\b\d{{4}}-\d\d-\d\d\b", t["text"]))
                     for t in _turns(product_set.pastes_add(base)))
    assert added and long_dates == base_dates


def test_the_gold_is_observations_in_the_third_person_of_user_turns_each_fact_once():
    """The extraction bench's gold: what the user's turns state, written as LoCoMo writes observations (third person,
    naming the user or the project), each filler fact only where the conversation first says it."""
    first_person = re.compile(r"\b(?:I|my|me|we|our)\b")
    for sample in product_set.generate():
        user = sample["conversation"]["speaker_a"]
        turns = {t["dia_id"]: t for t in _turns([sample])}
        seen = set()
        for session in sample["observation"].values():
            assert set(session) <= {user}
            for text, dia in session.get(user, []):
                assert turns[dia]["speaker"] == user
                assert not first_person.search(text), text
                assert "{" not in text, text
                assert text not in seen, text  # stated again later: not gold again
                seen.add(text)
        planted = sum(len(v) for s in sample["observation"].values() for v in s.values())
        assert planted >= 30


def test_filler_gold_points_at_sentences_that_state_something():
    for index, gold in product_set.FILLER_GOLD.items():
        said = product_set.USER_FILLER[index]
        # the observation and the sentence share their content words (a wrong index would not)
        words = lambda t: {w.lower() for w in re.findall(r"[A-Za-z]{4,}", t)} - {"that", "with", "they", "their"}  # noqa: E731
        assert words(gold) & words(said), (index, gold, said)


def test_split_sessions_hold_one_exchange_each_on_the_day_of_the_session_they_came_from():
    from bench.locomo import sessions_of

    base = product_set.generate()
    split = product_set.sessions_split(base)
    assert [s["qa"] for s in split] == [s["qa"] for s in base]
    assert [t for t in _turns(split)] == [t for t in _turns(base)]  # every turn, in order, unchanged
    for before, after in zip(base, split, strict=True):
        old, new = sessions_of(before["conversation"]), sessions_of(after["conversation"])
        assert len(new) > 3 * len(old)
        assert all(len(turns) <= 2 and turns[0]["speaker"] != "Assistant" for _, _, turns in new)
        day_of = {t["dia_id"]: when.date() for _, when, turns in old for t in turns}
        assert {t["dia_id"]: when.date() for _, when, turns in new for t in turns} == day_of
        times = [when for _, when, _ in new]
        assert times == sorted(times)
        # The extraction gold follows its turns into their new sessions.
        gold = {(f, d) for facts in before["observation"].values() for fs in facts.values() for f, d in fs}
        moved = {(f, d) for facts in after["observation"].values() for fs in facts.values() for f, d in fs}
        assert gold == moved
        number = {t["dia_id"]: n for n, _, turns in new for t in turns}
        assert all(number[d] == int(key.split("_")[1]) for key, facts in after["observation"].items()
                   for fs in facts.values() for _, d in fs)
