"""How the memory block orders what it shows: sessions oldest first, or the best match's session first."""
from __future__ import annotations

from datetime import datetime, timezone
from types import SimpleNamespace

from django.test import override_settings

from memory.rendering import memories_block


def said(text: str, day: int, session: int, hour: int = 12):
    return SimpleNamespace(text=text, kind="event", source_type="user_stated", dates=[], neighbours=[],
                           created_at=datetime(2023, 5, day, hour, tzinfo=timezone.utc), session_number=session)


# Best first, as retrieval hands them over: the best match was said last.
RANKED = [said("Ada: The wedding moved to the 9th of June.", 20, 3),
          said("Ada: We booked the venue for the wedding.", 2, 1),
          said("Ada: My sister is a florist.", 10, 2),
          said("Ada: The florist will do the wedding flowers.", 20, 3, hour=10)]


def headings(block: str) -> list[str]:
    return [line for line in block.splitlines() if not line.startswith("- ")]


def test_sessions_come_oldest_first_by_default():
    block = memories_block(RANKED)
    assert headings(block) == ["2 May 2023, session 1:", "10 May 2023, session 2:", "20 May 2023, session 3:"]


@override_settings(MEMORY_BLOCK_ORDER="relevance")
def test_by_relevance_the_best_matchs_session_comes_first_and_a_session_keeps_the_order_said():
    lines = memories_block(RANKED).splitlines()
    assert headings("\n".join(lines)) == ["20 May 2023, session 3:", "2 May 2023, session 1:",
                                          "10 May 2023, session 2:"]
    # Within its session, each memory where it was said: the earlier one first, whatever its rank.
    assert lines[1:3] == ["- Ada: The florist will do the wedding flowers.",
                          "- Ada: The wedding moved to the 9th of June."]
