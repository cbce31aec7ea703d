"""The injection guard and the secrets filter measured on corpora they were not written from (tests/proof/
outside_corpora.py names each source and its licence). Each test prints its rates and fails when they regress past
the stated margin from the rates measured when the floor was set; a better guard raises the floor.
"""
from __future__ import annotations

from collections import Counter

from infra.secrets import secrets_redact
from memory.extraction.injection import contains_instruction

from .outside_corpora import chat_turns, faker_lookalikes, faker_secrets, injection_attempts, length_matched, rate

# Rates measured on these corpora, and how far a change may move them before the proof fails.
INJECTION_DETECTION, INJECTION_MARGIN = 14 / 36, 0.05
INJECTION_FALSE_POSITIVES, INJECTION_FP_MARGIN = 0 / 39, 0.03  # length-matched chat turns + the bench's controls
CHAT_FALSE_POSITIVES, CHAT_FP_MARGIN = 1 / 1901, 0.005  # every distinct ChatterBot turn
SECRET_DETECTION, SECRET_MARGIN = 156 / 160, 0.03
SECRET_FALSE_POSITIVES, SECRET_FP_MARGIN = 0 / 240, 0.02


def _by_family(samples, flagged) -> str:
    total, hits = Counter(s.family for s in samples), Counter(s.family for s, f in zip(samples, flagged) if f)
    return ", ".join(f"{family} {hits[family]}/{n}" for family, n in sorted(total.items()))


def test_injection_guard_on_outside_attacks_and_benign_turns_of_the_same_length():
    attacks, controls = injection_attempts()
    assert len(attacks) >= 30, "the corpora shrank: the floor below no longer means what it says"
    detected = [contains_instruction(a.text) for a in attacks]
    benign = length_matched(chat_turns(), [len(a.text) for a in attacks]) + [c.text for c in controls]
    false_alarms = [t for t in benign if contains_instruction(t)]
    detection, fp = rate(sum(detected), len(attacks)), rate(len(false_alarms), len(benign))
    print(f"\ninjection guard, outside corpus: detection {sum(detected)}/{len(attacks)} = {detection:.1%} "
          f"(by family: {_by_family(attacks, detected)}); false positives {len(false_alarms)}/{len(benign)} = "
          f"{fp:.1%} on length-matched chat turns and the bench's controls")
    for text in false_alarms:
        print("   false alarm:", text[:120])
    assert detection >= INJECTION_DETECTION - INJECTION_MARGIN
    assert fp <= INJECTION_FALSE_POSITIVES + INJECTION_FP_MARGIN


def test_injection_guard_false_positives_on_every_chat_turn():
    turns = chat_turns()
    assert len(turns) >= 1000, "the corpus shrank: the floor below no longer means what it says"
    flagged = [t for t in turns if contains_instruction(t)]
    fp = rate(len(flagged), len(turns))
    print(f"\ninjection guard, ChatterBot corpus: {len(flagged)}/{len(turns)} ordinary turns flagged = {fp:.2%}")
    assert fp <= CHAT_FALSE_POSITIVES + CHAT_FP_MARGIN, flagged[:5]


def test_secrets_filter_on_faker_secrets_and_lookalikes():
    secrets, lookalikes = faker_secrets(), faker_lookalikes()
    found = [secrets_redact(s.text).found for s in secrets]
    flagged = [secrets_redact(s.text).found for s in lookalikes]
    detection, fp = rate(sum(found), len(secrets)), rate(sum(flagged), len(lookalikes))
    print(f"\nsecrets filter, Faker corpus: detection {sum(found)}/{len(secrets)} = {detection:.1%} "
          f"(by kind: {_by_family(secrets, found)}); false positives {sum(flagged)}/{len(lookalikes)} = {fp:.1%} "
          f"(by kind: {_by_family(lookalikes, flagged)})")
    # A secret the filter saw is gone from the text, not only counted.
    for sample, hit in zip(secrets, found):
        if hit:
            assert "[redacted]" in secrets_redact(sample.text).text
    assert detection >= SECRET_DETECTION - SECRET_MARGIN
    assert fp <= SECRET_FALSE_POSITIVES + SECRET_FP_MARGIN
