"""Idle sessions are closed by the beat job, per tenant timeout, bounded per run and idempotent."""
from __future__ import annotations

from datetime import timedelta

import pytest

from infra import clock
from orchestration.messages import messages_append
from orchestration.sessions import session_open, sessions_close_idle
from sessions.models import Session
from sessions.services import NewMessage

pytestmark = pytest.mark.django_db(transaction=True)


def quiet_for(session, minutes: int):
    Session.objects.unscoped().filter(pk=session.pk).update(last_activity_at=clock.now() - timedelta(minutes=minutes))


def users(tenant, n):
    from tenants.services import end_user_create

    return [end_user_create(tenant=tenant, external_id=f"u{i}") for i in range(n)]


def test_idle_sessions_close_by_their_tenants_timeout(make_tenant, bridge_calls):
    brisk, patient = make_tenant("Brisk", idle_timeout_minutes=30), make_tenant("Patient", idle_timeout_minutes=120)
    a, b = (session_open(tenant=brisk, user=u)[0] for u in users(brisk, 2))
    c = session_open(tenant=patient, user=users(patient, 1)[0])[0]
    quiet_for(a, 31)
    quiet_for(b, 10)
    quiet_for(c, 60)
    assert sessions_close_idle() == {"closed": 1, "more": False}
    states = {s.pk: (s.state, s.close_reason) for s in Session.objects.unscoped().all()}
    assert states[a.pk] == ("closed", "idle") and states[b.pk][0] == "open" and states[c.pk][0] == "open"
    assert bridge_calls == [str(a.pk)]
    assert sessions_close_idle() == {"closed": 0, "more": False}  # a second run changes nothing
    assert bridge_calls == [str(a.pk)]


def test_idle_close_is_bounded_per_run(alice, bridge_calls):
    sessions = [session_open(tenant=alice, user=u)[0] for u in users(alice, 3)]
    for s in sessions:
        quiet_for(s, 45)
    assert sessions_close_idle(limit=2) == {"closed": 2, "more": True}
    assert sessions_close_idle(limit=2) == {"closed": 1, "more": False}
    assert Session.objects.unscoped().filter(state="closed").count() == 3 and len(bridge_calls) == 3


def test_a_message_keeps_a_session_open(alice, alice_session, bridge_calls):
    quiet_for(alice_session, 45)
    messages_append(tenant=alice, session_id=alice_session.pk, items=[NewMessage(role="user", content="still here")],
                    enqueue_extraction=False)
    assert sessions_close_idle() == {"closed": 0, "more": False}
    assert Session.objects.unscoped().get(pk=alice_session.pk).state == "open"


def test_the_beat_task_is_registered_under_its_name(alice, alice_session, bridge_calls):
    from config.celery import app
    from orchestration.tasks import sessions_close_idle_task

    assert "orchestration.tasks.sessions_close_idle_task" in app.tasks
    quiet_for(alice_session, 45)
    assert sessions_close_idle_task.apply().get() == 1
    assert Session.objects.unscoped().get(pk=alice_session.pk).close_reason == "idle"
