"""Forgetting and deleting, measured where a user and a client look, through the REST API with no model: the stored
messages, the memory list with each memory's history, search, and the context a new session opens with (its bridge
of the last session first). A request to forget takes what it names and keeps what it does not; a deleted memory's
words leave every text derived from them, the session's goal included, and no later bridge brings them back."""
from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone

import pytest
from django.contrib.auth.models import Permission, User
from django.test import Client

from tests.conftest import client_for

pytestmark = pytest.mark.django_db(transaction=True)

T0 = datetime(2025, 3, 3, 9, 0, tzinfo=timezone.utc)
TWO_THINGS = "My favourite colour is green and my favourite food is sushi."
NURSE = "I work as a nurse at St Mary's hospital."


@pytest.fixture(autouse=True)
def _eager(settings):
    # Extraction, bridges and the outbox run inline, as a worker would run them right after each request.
    settings.CELERY_TASK_ALWAYS_EAGER = True


class Caller:
    """One end user of a tenant, spoken for through the REST API: sessions one after another, a day apart."""

    def __init__(self, tenant, name="Ada"):
        self.http = client_for(tenant)
        self.day = 0
        r = self.http.post("/api/v1/users", {"external_id": f"{name}-{id(self)}", "display_name": name},
                           format="json")
        assert r.status_code == 201, r.content
        self.id = r.json()["id"]

    def session(self) -> str:
        self.day += 1
        r = self.http.post("/api/v1/sessions", {"user_id": self.id, "opened_at": self._at(0).isoformat()},
                           format="json")
        assert r.status_code == 201, r.content
        return r.json()["id"]

    def _at(self, minutes: int) -> datetime:
        return T0 + timedelta(days=self.day, minutes=minutes)

    def send(self, session: str, text: str, reply: str = "Noted.") -> None:
        n = len(self.messages(session))
        items = [{"role": "user", "content": text, "created_at": self._at(n + 1).isoformat()},
                 {"role": "assistant", "content": reply, "created_at": self._at(n + 2).isoformat()}]
        r = self.http.post(f"/api/v1/sessions/{session}/messages", {"messages": items}, format="json")
        assert r.status_code == 201, r.content

    def close(self, session: str) -> None:
        assert self.http.post(f"/api/v1/sessions/{session}/close").status_code == 200

    def tell(self, *texts: str) -> str:
        """The texts in one session of their own, closed afterwards; its id."""
        sid = self.session()
        for text in texts:
            self.send(sid, text)
        self.close(sid)
        return sid

    def messages(self, session: str) -> list[str]:
        r = self.http.get(f"/api/v1/sessions/{session}/messages", {"limit": 200})
        assert r.status_code == 200, r.content
        return [m["content"] for m in r.json()["results"]]

    def memories(self, status: str = "active") -> list[dict]:
        r = self.http.get(f"/api/v1/users/{self.id}/memories", {"status": status, "limit": 200})
        assert r.status_code == 200, r.content
        return r.json()["results"]

    def memory(self, memory_id: str) -> dict:
        r = self.http.get(f"/api/v1/users/{self.id}/memories/{memory_id}")
        assert r.status_code == 200, r.content
        return r.json()

    def search(self, q: str) -> list[str]:
        r = self.http.get(f"/api/v1/users/{self.id}/memories/search", {"q": q, "k": 10})
        assert r.status_code == 200, r.content
        return [m["text"] for m in r.json()["results"]]

    def context(self, query: str) -> str:
        """The whole composed context of a new session's first turn, as the client's model would read it."""
        sid = self.session()
        r = self.http.get(f"/api/v1/sessions/{sid}/context", {"input": query})
        assert r.status_code == 200, r.content
        return "\n".join(m["content"] for m in r.json()["messages"][:-1])

    def delete(self, memory_id: str) -> None:
        assert self.http.delete(f"/api/v1/users/{self.id}/memories/{memory_id}").status_code == 204


def _everything_shown(user: Caller, sessions: list[str], query: str) -> str:
    """Every text the API shows of the user: messages, memories of any status but deleted, with their history,
    search results and a new session's context."""
    shown = [c for s in sessions for c in user.messages(s)]
    for m in user.memories("active,superseded,pending_review,expired"):
        shown.append(json.dumps(user.memory(m["id"])))
    shown += user.search(query)
    shown.append(user.context(query))
    return "\n".join(shown)


@pytest.mark.parametrize("same_session", [False, True], ids=["later_session", "same_session"])
def test_asking_to_forget_one_of_two_statements_keeps_the_other_and_the_request(alice, same_session):
    ada = Caller(alice)
    if same_session:
        first = second = ada.tell(TWO_THINGS, "Please forget my favourite colour.")
    else:
        first, second = ada.tell(TWO_THINGS), ada.tell("Please forget my favourite colour.")
    assert ada.messages(first)[0] == "[forgotten] and my favourite food is sushi."
    assert "Please forget my favourite colour." in ada.messages(second)
    active = [m["text"] for m in ada.memories()]
    assert any("sushi" in t for t in active), active
    context = ada.context("What is my favourite food?")
    assert "sushi" in context
    assert "green" not in _everything_shown(ada, [first, second], "what is my favourite colour")


def test_a_forgotten_statement_leaves_the_history_of_the_memory_that_keeps_the_rest(alice):
    ada = Caller(alice)
    ada.tell(TWO_THINGS)
    kept = [m for m in ada.memories() if "sushi" in m["text"]]
    ada.tell("Please forget my favourite colour.")
    for m in kept:
        detail = ada.memory(m["id"])
        assert detail["status"] == "active" and "sushi" in detail["text"], detail
        assert "green" not in json.dumps(detail["history"]), detail["history"]


def test_a_deleted_statement_taken_as_the_goal_does_not_come_back_through_the_bridge(alice):
    ada = Caller(alice)
    sid = ada.session()
    ada.send(sid, NURSE, reply="Got it: you work as a nurse at St Mary's hospital.")
    for m in ada.memories():
        if "nurse" in m["text"]:
            ada.delete(m["id"])
    ada.send(sid, "What should I cook tonight?", reply="How about pasta?")
    ada.close(sid)
    assert ada.messages(sid)[0] == "[forgotten]"
    opening = ada.context("Where do I work?")
    assert "From the previous session" in opening
    for word in ("nurse", "St Mary"):
        assert word not in opening
        assert word not in _everything_shown(ada, [sid], "where do I work")


def test_deleting_what_the_user_said_takes_it_out_of_the_reply_that_repeats_it(alice):
    ada = Caller(alice)
    sid = ada.session()
    ada.send(sid, NURSE, reply="Got it: you work as a nurse at St Mary's hospital. Anything else?")
    said = [m for m in ada.memories() if m["text"].startswith("Ada:") and "nurse" in m["text"]]
    assert said
    for m in said:
        ada.delete(m["id"])
    ada.close(sid)
    assert ada.messages(sid) == ["[forgotten]", "[forgotten] Anything else?"]
    assert "nurse" not in _everything_shown(ada, [sid], "where do I work")


def test_a_deletion_after_the_session_closed_reaches_its_bridge_and_goal(alice):
    ada = Caller(alice)
    sid = ada.tell(NURSE, "What should I cook tonight?")
    for m in ada.memories():
        if "nurse" in m["text"]:
            ada.delete(m["id"])
    assert "nurse" not in _everything_shown(ada, [sid], "where do I work")


def _staff(tenant) -> Client:
    staff = User.objects.create_user(username="reviewer", password="pw", is_staff=True)
    staff.user_permissions.set(Permission.objects.filter(content_type__app_label__in=[
        "tenants", "chat_sessions", "context", "orchestration", "memory"]))
    tenant.staff_users.add(staff)
    client = Client()
    client.force_login(staff)
    return client


@pytest.mark.parametrize("how", ["button", "action"])
def test_an_admin_delete_takes_the_words_out_and_a_restore_does_not_bring_them_back(alice, how):
    ada = Caller(alice)
    sid = ada.session()
    ada.send(sid, NURSE)
    staff = _staff(alice)
    nurse = [m for m in ada.memories() if "nurse" in m["text"]]
    assert nurse
    for m in nurse:
        if how == "button":
            r = staff.post(f"/admin/memory/memoryrecord/{m['id']}/change/", {"text": m["text"], "_delete_memory": "x"})
        else:
            r = staff.post("/admin/memory/memoryrecord/?layer=all",
                           {"action": "delete_memories", "_selected_action": [m["id"]], "index": 0})
        assert r.status_code == 302, r.content
    ada.send(sid, "What should I cook tonight?")
    ada.close(sid)
    assert "nurse" not in _everything_shown(ada, [sid], "where do I work")
    for m in nurse:  # the record is restorable; the words it was derived from stay out
        staff.post(f"/admin/memory/memoryrecord/{m['id']}/change/", {"text": m["text"], "_restore": "x"})
    assert any("nurse" in m["text"] for m in ada.memories())
    assert not any("nurse" in c for c in ada.messages(sid))
    assert "nurse" not in ada.context("What should I cook?").split("<memories>")[0]


def test_a_request_to_forget_touches_no_other_users_words(alice, bob):
    ada, omar, outsider = Caller(alice, "Ada"), Caller(alice, "Omar"), Caller(bob, "Ada")
    theirs = {u: u.tell(TWO_THINGS) for u in (omar, outsider)}
    ada.tell(TWO_THINGS)
    ada.tell("Please forget my favourite colour.")
    for user, sid in theirs.items():
        assert user.messages(sid)[0] == TWO_THINGS
        assert any("green" in m["text"] for m in user.memories())
        assert "green" in user.context("What is my favourite colour?")
