"""Secrets and payment data reach no store, writer by writer: each writer is handed text that holds a card number (with
spaces and with dashes), an IBAN, an API key and a password, the way its own input would carry them (a message, a
model's summary, a tool call's arguments, a log call), and what it stored is searched for them."""
from __future__ import annotations

import io
import logging

import pytest

from infra.secrets import REDACTED, SecretsLogFilter

pytestmark = pytest.mark.django_db(transaction=True)

SECRETS = ["4111 1111 1111 1111", "5500-0000-0000-0004", "DE89 3704 0044 0532 0130 00",
           "sk-proj-abcdefghijklmnopqrstuvwx", "hunter2"]
SAID = ("Pay with card 4111 1111 1111 1111 or 5500-0000-0000-0004, wire to DE89 3704 0044 0532 0130 00, "
        "the key is sk-proj-abcdefghijklmnopqrstuvwx and my password is hunter2.")


def assert_clean(*texts):
    joined = "\n".join(str(t) for t in texts)
    for secret in SECRETS:
        assert secret not in joined, secret
        assert secret.replace(" ", "").replace("-", "") not in joined.replace(" ", "").replace("-", ""), secret


def test_card_numbers_with_spaces_or_dashes_are_redacted_even_of_two_digits():
    from infra.secrets import secrets_redact

    out = secrets_redact(SAID)
    assert_clean(out.text)
    assert out.text.count(REDACTED) == 5
    assert secrets_redact("Call 555 0100 tomorrow, order 12345678.").text == "Call 555 0100 tomorrow, order 12345678."


def test_message_store(alice, alice_client, alice_session):
    from sessions.models import Message

    r = alice_client.post(f"/api/v1/sessions/{alice_session.pk}/messages", {"role": "user", "content": SAID},
                          format="json")
    assert r.status_code == 201
    assert_clean(*Message.objects.unscoped().filter(tenant=alice).values_list("content", flat=True))


def test_memory_writers_extraction_and_remember(alice, alice_user, alice_session):
    from memory.actions import memory_remember
    from memory.models import MemoryRecord
    from tests.memory.memory_support import record_turns

    record_turns(alice, alice_user, [("user", SAID)])
    memory_remember(tenant=alice, user=alice_user, kind="fact", text=SAID, actor_type="end_user")
    rows = MemoryRecord.objects.unscoped().filter(tenant=alice)
    assert rows.exists()
    assert_clean(*[(r.text, r.value, r.metadata) for r in rows])


def test_session_notes(alice, alice_user, alice_session):
    from memory.actions import NoteLine, session_note_write
    from memory.models import MemoryRecord

    session_note_write(tenant=alice, user=alice_user, session_id=alice_session.pk, method="extractive",
                       lines=[NoteLine(text=f"Decided: {SAID}", label="decision", sources=())])
    assert_clean(*MemoryRecord.objects.unscoped().filter(tenant=alice).values_list("text", flat=True))


def test_bridge_from_a_model_summary(alice, alice_session, monkeypatch):
    from context import bridge
    from context.models import BridgeSummary
    from orchestration.sessions import session_close

    session_close(tenant=alice, session_id=alice_session.pk)
    monkeypatch.setattr(bridge, "_compose", lambda session: (f"Goal: {SAID}", {"goal": SAID, "open": [SAID]}, "llm"))
    alice_session.refresh_from_db()
    written = bridge.bridge_write(session=alice_session)
    stored = BridgeSummary.objects.unscoped().get(pk=written.pk)
    assert_clean(stored.text, stored.goal, stored.details)


def test_anchor_from_a_model_summary(alice, alice_user, alice_session, monkeypatch, settings):
    from context import anchors
    from context.models import SummaryAnchor
    from orchestration.messages import messages_append
    from sessions.services import NewMessage

    settings.CONTINUUM_ANCHOR_EVERY_TURNS, settings.CONTINUUM_ANCHOR_KEEP_TURNS = 2, 2
    messages_append(tenant=alice, session_id=alice_session.pk, enqueue_extraction=False,
                    items=[NewMessage(role=r, content=f"turn {i}") for i in range(8) for r in ("user", "assistant")])
    monkeypatch.setattr(anchors, "_summarize", lambda plan, use_llm: (f"turns: {SAID}", "llm"))
    anchors.anchors_fold(tenant_id=alice.pk, user_id=alice_user.pk, session_id=alice_session.pk, use_llm=False)
    texts = list(SummaryAnchor.objects.unscoped().filter(tenant=alice).values_list("text", flat=True))
    assert texts
    assert_clean(*texts)


def test_buffer_goal_and_notes_from_tool_calls(alice, alice_user, alice_session):
    from context.buffer import buffer_get, buffer_set_goal, buffer_update_notes
    from infra.redis_client import get_redis

    ids = {"tenant_id": alice.pk, "user_id": alice_user.pk, "session_id": alice_session.pk}
    buffer_set_goal(**ids, goal=SAID)
    buffer_update_notes(**ids, key_findings=[SAID])
    buf = buffer_get(**ids)
    assert_clean(buf.goal, buf.notes)
    assert_clean(*[get_redis().get(k) for k in get_redis().scan_iter("*") if get_redis().type(k) == b"string"])


def test_log_lines():
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.addFilter(SecretsLogFilter())
    log = logging.getLogger("continuum.test.secrets")
    log.addHandler(handler)
    try:
        log.warning("user said %s", SAID)
        log.warning(SAID)
    finally:
        log.removeHandler(handler)
    assert stream.getvalue().count("user said") == 1
    assert_clean(stream.getvalue())


def test_the_services_log_handlers_carry_the_filter(settings):
    assert "secrets" in settings.LOGGING["handlers"]["console"]["filters"]
