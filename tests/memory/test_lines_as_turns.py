"""A line the rules quote from a turn is a key to that turn: the composed context shows what was said, with its
speaker, not the line cut out of it. Through the REST API in memory-service mode (no model)."""
from __future__ import annotations

import pytest

from tests.memory.test_latest_statement import memories_shown
from tests.memory.test_user_last_word import Service

pytestmark = pytest.mark.django_db(transaction=True)

SAID = ("After the long week I finally went climbing again. I love bouldering at the old gasworks hall with my "
        "brother, it clears my head.")


@pytest.fixture(autouse=True)
def _eager(settings):
    settings.CELERY_TASK_ALWAYS_EAGER = True


def _typed_lines(ada: Service) -> list[dict]:
    return [m for m in ada.memories() if m["kind"] in ("preference", "fact", "procedure")]


def test_a_quoted_line_is_shown_as_the_turn_it_was_said_in(alice):
    ada = Service(alice)
    ada.tell(SAID, "Our team standup is at 9:30 in the small meeting room.")
    assert _typed_lines(ada), "the rules wrote no typed line: the case tests nothing"
    shown = memories_shown(ada.context("What does Ada love doing with her brother?"))
    assert "Ada: After the long week I finally went climbing again." in shown or "Ada: I love bouldering" in shown, \
        shown
    assert "[preference]" not in shown and "[fact]" not in shown, shown


def test_switched_off_the_line_is_shown_as_itself(alice, settings):
    settings.MEMORY_LINES_AS_TURNS = False
    ada = Service(alice)
    ada.tell(SAID)
    shown = memories_shown(ada.context("What does Ada love doing with her brother?"))
    assert "[preference]" in shown, shown
