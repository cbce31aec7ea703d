"""The admin playground through Django's test client: who may use it, what a turn shows, and every bad form an
answer of its own (4xx with the form's errors), never a server error."""
from __future__ import annotations

import httpx
import pytest
from django.utils.html import escape

from memory.models import MemoryRecord
from orchestration.models import ContextReceipt
from sessions.models import Message, Session
from tenants.models import EndUser
from tests.assistant.scripted_llm import answer

from .conftest import SISTER, SISTER_FACT, URL

pytestmark = pytest.mark.django_db
# A turn hands its background task over after commit: these tests commit as the page's requests do.
committed = pytest.mark.django_db(transaction=True)


def send(client, tenant, text, external_id="play-1"):
    return client.post(URL, {"tenant": str(tenant.pk), "external_id": external_id, "message": text,
                             "send": "Send"})


def test_an_anonymous_visitor_is_sent_to_the_admin_login(client):
    response = client.get(URL)
    assert response.status_code == 302
    assert response["Location"].startswith("/admin/login/?next=/admin/playground/")


def test_a_user_who_is_not_staff_is_sent_to_the_admin_login(client, django_user_model, alice):
    user = django_user_model.objects.create_user("dave", password="dave-pass-1")
    client.force_login(user)
    response = send(client, alice, SISTER)
    assert response.status_code == 302 and response["Location"].startswith("/admin/login/")
    assert not EndUser.objects.for_tenant(alice).exists()


def test_staff_without_the_permission_to_change_sessions_is_refused(client, django_user_model, alice):
    user = django_user_model.objects.create_user("erin", password="erin-pass-1", is_staff=True)
    alice.staff_users.add(user)
    client.force_login(user)
    assert client.get(URL).status_code == 403
    assert send(client, alice, SISTER).status_code == 403
    assert not EndUser.objects.for_tenant(alice).exists()


def test_the_page_offers_only_the_tenants_a_staff_user_may_see(client, staff, alice, bob):
    client.force_login(staff)
    page = client.get(URL).content.decode()
    assert alice.slug in page and bob.slug not in page


@committed
def test_a_turn_shows_the_answer_the_context_by_section_the_receipt_and_the_changed_memory(
        admin_client, alice, llm, eager):
    llm.add(answer("Lisbon is lovely; say hello to Priya."))
    response = send(admin_client, alice, SISTER)
    assert response.status_code == 200
    page = response.content.decode()
    assert "Lisbon is lovely; say hello to Priya." in page
    turn = response.context["turn"]
    assert [s.name for s in turn.sections] == ["system", "tools", "profile", "bridge", "anchors", "state", "memories",
                                               "context_framing", "recent", "input", "priming"]
    assert turn.shown[0].part == "system prompt" and turn.shown[-1].content == SISTER
    assert llm.requests[0]["messages"][-1]["content"] == SISTER
    receipt = ContextReceipt.objects.for_tenant(alice).get()
    assert receipt.surface == "playground"
    assert f"/admin/orchestration/contextreceipt/{receipt.pk}/change/" in page
    memory = MemoryRecord.objects.for_tenant(alice).get(text=SISTER_FACT)
    assert f"/admin/memory/memoryrecord/{memory.pk}/change/" in page
    assert "Memories changed since the turn began" in page


@committed
def test_the_second_message_runs_in_the_same_session_and_reads_the_first(admin_client, alice, llm, eager):
    llm.add(answer("Noted."), answer("Your sister Priya lives in Lisbon."))
    first = send(admin_client, alice, SISTER).context["session"]
    response = send(admin_client, alice, "Where does my sister live?")
    assert response.status_code == 200 and response.context["session"].pk == first.pk
    assert "Your sister Priya lives in Lisbon." in response.content.decode()
    shown = "\n".join(m["content"] or "" for m in llm.requests[1]["messages"])
    assert SISTER in shown  # the first turn is in the second's context
    assert Message.objects.for_tenant(alice).filter(session=first).count() == 4


@committed
def test_a_refresh_reads_what_the_background_task_wrote_after_the_turn(admin_client, alice, llm, monkeypatch):
    from infra import task_queue
    from orchestration.tasks import messages_extract_task

    queued = []
    monkeypatch.setattr(task_queue, "task_enqueue", lambda name, *args, **kwargs: queued.append((name, args, kwargs)))
    llm.add(answer("Noted."))
    response = send(admin_client, alice, SISTER)
    page = response.content.decode()
    assert response.status_code == 200 and "Not written yet" in page and "wait for extraction" in page
    refresh = response.context["refresh_url"]

    (name, args, kwargs), = queued
    assert name == "orchestration.tasks.messages_extract_task"
    messages_extract_task.apply(args, kwargs)  # the worker's run
    again = admin_client.get(refresh)
    assert again.status_code == 200
    page = again.content.decode()
    receipt = ContextReceipt.objects.for_tenant(alice).get()
    assert f"/admin/orchestration/contextreceipt/{receipt.pk}/change/" in page
    memory = MemoryRecord.objects.for_tenant(alice).get(text=SISTER_FACT)
    assert f"/admin/memory/memoryrecord/{memory.pk}/change/" in page and escape(SISTER_FACT) in page
    assert "created" in page
    assert "Retrieved memories" in page  # the sections, from the receipt


@committed
def test_new_session_closes_the_open_one_and_the_next_message_opens_another(admin_client, alice, llm, eager):
    llm.add(answer("Noted."), answer("Hello again."))
    first = send(admin_client, alice, SISTER).context["session"]
    response = admin_client.post(URL, {"tenant": str(alice.pk), "external_id": "play-1", "close": "New session"})
    assert response.status_code == 200 and "Closed session" in response.content.decode()
    assert Session.objects.for_tenant(alice).get(pk=first.pk).state == Session.State.CLOSED
    second = send(admin_client, alice, "Hello.").context["session"]
    assert second.pk != first.pk and second.state == Session.State.OPEN


def test_closing_without_an_open_session_says_so(admin_client, alice):
    response = admin_client.post(URL, {"tenant": str(alice.pk), "external_id": "nobody", "close": "New session"})
    assert response.status_code == 200 and "has no open session" in response.content.decode()


def test_without_a_model_the_page_says_so_and_shows_the_composed_context(admin_client, alice, settings):
    settings.LLM_BASE_URL = settings.LLM_MODEL = ""
    response = send(admin_client, alice, SISTER)
    assert response.status_code == 200
    page = response.content.decode()
    assert "No model is configured" in page and "A turn needs a model" in page
    turn = response.context["turn"]
    assert not turn.answered and turn.shown[-1].content == SISTER and turn.total_tokens > 0
    assert "Composed context by section" in page and "Retrieved memories" in page
    assert not Message.objects.for_tenant(alice).exists()  # nothing was sent or stored


def test_without_a_model_the_page_writes_the_receipt_it_promises_and_links_it(admin_client, alice, settings):
    """The page said "The receipt keeps each section's token count…" and no receipt was written."""
    settings.LLM_BASE_URL = settings.LLM_MODEL = ""
    response = send(admin_client, alice, SISTER)
    page = response.content.decode()
    receipt = ContextReceipt.objects.for_tenant(alice).get()
    assert receipt.surface == "playground" and receipt.total_tokens == response.context["turn"].total_tokens
    assert "The receipt keeps each section" in page
    assert f'id="receipt-link" href="/admin/orchestration/contextreceipt/{receipt.pk}/change/"' in page
    assert admin_client.get(f"/admin/orchestration/contextreceipt/{receipt.pk}/change/").status_code == 200


def _rows(turn):
    return {s.name: s.tokens for s in turn.sections}


def test_the_two_tables_count_the_system_prompt_alike_and_add_up_to_the_total(admin_client, alice, settings):
    """The sections said 43 tokens for the system prompt and the messages' table 47 (its framing)."""
    settings.LLM_BASE_URL = settings.LLM_MODEL = ""
    turn = send(admin_client, alice, SISTER).context["turn"]
    prompt = next(m for m in turn.shown if m.part == "system prompt")
    assert _rows(turn)["system"] == prompt.tokens
    assert _rows(turn)["input"] == turn.shown[-1].tokens
    assert sum(_rows(turn).values()) == turn.total_tokens == sum(m.tokens for m in turn.shown) + 3


@committed
def test_a_turns_tables_agree_with_the_tool_definitions_counted_once(admin_client, alice, llm, eager):
    llm.add(answer("Noted."))
    response = send(admin_client, alice, SISTER)
    turn = response.context["turn"]
    rows = _rows(turn)
    assert rows["tools"] == turn.tool_tokens > 0
    assert rows["system"] == next(m.tokens for m in turn.shown if m.part == "system prompt")
    assert sum(rows.values()) == turn.total_tokens == sum(m.tokens for m in turn.shown) + turn.tool_tokens + 3
    assert 'class="tool-definitions"' in response.content.decode()


@pytest.mark.parametrize("data, field", [
    ({"message": "   "}, "message"),
    ({"message": ""}, "message"),
    ({"external_id": "  "}, "external_id"),
    ({"tenant": "00000000-0000-0000-0000-000000000000"}, "tenant"),
    ({"tenant": "not-a-uuid"}, "tenant"),
    ({"message": "x" * 40_000}, "message"),
])
def test_a_bad_form_is_a_400_with_the_fields_error(admin_client, alice, data, field):
    body = {"tenant": str(alice.pk), "external_id": "play-1", "message": SISTER, "send": "Send", **data}
    response = admin_client.post(URL, body)
    assert response.status_code == 400
    assert field in response.context["form"].errors
    assert not EndUser.objects.for_tenant(alice).exists()


def test_staff_of_one_tenant_cannot_chat_as_another_tenants_user(client, staff, bob, llm):
    client.force_login(staff)
    response = send(client, bob, SISTER)
    assert response.status_code == 400 and "tenant" in response.context["form"].errors
    assert not EndUser.objects.for_tenant(bob).exists() and not llm.requests


def test_a_refresh_of_another_users_session_is_not_found(admin_client, alice, alice_session):
    response = admin_client.get(URL, {"tenant": str(alice.pk), "external_id": "someone-else",
                                      "session": str(alice_session.pk), "since": "2026-12-05T10:00:00+00:00"})
    assert response.status_code == 200  # someone-else has never chatted: nothing to read, nothing created
    from tenants.services import end_user_create

    end_user_create(tenant=alice, external_id="someone-else")
    response = admin_client.get(URL, {"tenant": str(alice.pk), "external_id": "someone-else",
                                      "session": str(alice_session.pk), "since": "2026-12-05T10:00:00+00:00"})
    assert response.status_code == 404


@pytest.mark.parametrize("query", [{"tenant": "nope", "external_id": "a"}, {"since": "yesterday-ish"},
                                   {"session": "not-a-uuid"}])
def test_a_bad_refresh_is_a_400(admin_client, alice, query):
    response = admin_client.get(URL, {"tenant": str(alice.pk), "external_id": "play-1", **query})
    assert response.status_code == 400


def test_a_model_outage_is_shown_as_the_turns_error_not_a_server_error(admin_client, alice, llm):
    llm.add(httpx.Response(503, json={"error": {"message": "overloaded"}}))
    response = send(admin_client, alice, SISTER)
    assert response.status_code == 503
    assert response.context["error"].code and "turn-error" in response.content.decode()


def test_the_admin_index_links_to_the_playground(admin_client):
    assert 'href="/admin/playground/"' in admin_client.get("/admin/").content.decode()


def test_the_admin_index_link_has_its_cell_to_itself(admin_client):
    """The dashboard keeps a row's later cells on one line and gives the first the rest: beside a sentence in a
    second cell the link was drawn one letter a line."""
    import re

    page = admin_client.get("/admin/").content.decode()
    entry = re.search(r'<div class="module" id="playground-entry">(.*?)</div>\s*</th>', page, re.DOTALL)
    assert entry and "<td" not in entry.group(1)
    assert "Chat as an end user</a>" in entry.group(1) and "the memories it changed" in entry.group(1)


def test_redis_down_is_a_503_page_with_the_reason(admin_client, alice, monkeypatch):
    import redis

    from backoffice import playground

    def down(**kwargs):
        raise redis.exceptions.ConnectionError("Connection refused")

    monkeypatch.setattr(playground, "playground_turn", down)
    response = send(admin_client, alice, SISTER)
    assert response.status_code == 503 and "redis_unavailable" in response.content.decode()
