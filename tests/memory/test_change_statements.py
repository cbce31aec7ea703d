"""Which earlier statement a statement of change replaces (memory/extraction/updates.py): one that states what holds
on a subject the change names, with the value it moved from or another value where it names its new one, whatever the
words of the change and however long the earlier statement; never a report of what happened, another subject, or a
change only planned or asked about."""
from __future__ import annotations

import pytest

from infra.embedder import get_embedder
from memory.extraction.updates import change_sentences, replaces

LONG = ("Ada: Our staging server runs on Hetzner in Falkenstein. It has 64 GB of RAM and two NVMe disks in a mirror. "
        "It also hosts the nightly backups, the metrics stack and the internal wiki, and Jonas looks after it on "
        "Fridays when the weekly patch window opens at 16:00.")


def _alike(a: str, b: str) -> float:
    va, vb = get_embedder().embed([a, b])
    return sum(x * y for x, y in zip(va, vb))


def _replaces(old: str, new: str) -> bool:
    return any(replaces(change, old, who="Ada", alike=_alike) for change in change_sentences(new))


@pytest.mark.parametrize(("old", "new"), [
    ("Ada: Our team standup is at 10:15 now.", "Ada: Update: the standup moved again, it is at 11:00 now."),
    ("Ada: Our service runs on MySQL with about 40 tables.",
     "Ada: Heads up: last week we migrated the service from MySQL to PostgreSQL, so answer for PostgreSQL from now "
     "on."),
    ("Ada: We deploy the web app with Jenkins on a VM in the office.",
     "Ada: We switched to GitHub Actions for deploying the web app."),
    ("Ada: The weekly sync with the design team is on Tuesdays at 15:00.",
     "Ada: From now on we meet the design team on Thursdays at 11:00 for our weekly sync."),
    ("Ada: The invoices are sent from Xero at the end of each month.",
     "Ada: Update: invoices now go out from QuickBooks at the end of each month."),
    (LONG, "Ada: Heads up: we moved the staging server from Hetzner to AWS in Frankfurt last week."),
    ("Ada asked the assistant: Always answer in French.", "Ada: From now on answer in German."),
])
def test_a_change_replaces_the_statement_of_what_it_changes(old, new):
    assert _replaces(old, new)


@pytest.mark.parametrize(("old", "new"), [
    # What happened stays true: a later state does not undo it.
    ("Ada: I saw a band play in Boston last summer.", "Ada: I'm now in a band with Jake and we play on Fridays."),
    ("Ada: I went camping with my kids at Lake Tahoe.", "Ada: We're now planning a camping trip to Yosemite in June."),
    # Another subject: no word in common, or a word and two values in common by chance.
    ("Ada: Our team standup is at 9:30 in the small meeting room.", "Ada: We moved the retro to Friday at 16:00 now."),
    ("Ada: They're doing great. Our one-year-old is so cute, his name is Kyle!",
     "Ada: He was part of our family for 10 years and it's so hard to think he's not here wagging that tail anymore."),
    ("Ada loves spending time with the friends Ada has.",
     "Ada: Hey John, great news - I'm now friends with one of my fellow volunteers!"),
    # Planned, supposed or asked: nothing changed yet.
    ("Ada: Our service runs on MySQL.", "Ada: We might switch from MySQL to PostgreSQL next year."),
    ("Ada: Our service runs on MySQL.", "Ada: Should we move from MySQL to PostgreSQL?"),
    # No word of change: a second value may be a second thing (two trips, two teams).
    ("Ada: Our team standup is at 9:30.", "Ada: The design review is at 14:00."),
])
def test_a_change_leaves_other_statements_alone(old, new):
    assert not _replaces(old, new)
