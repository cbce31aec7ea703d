"""The MCP tools and resource through the SDK's own client over real HTTP: search with provenance, remember, forget,
sessions with bridges, a session's composed context, the active facts; and ownership (another tenant's or another
user's ids are not found, exactly like missing ones)."""
from __future__ import annotations

import json
import uuid

import pytest

from context.models import BridgeSummary
from mcp_server.server import ACTIVE_FACTS_URI
from memory.actions import memory_create, memory_delete
from memory.models import MemoryEvent, MemoryRecord
from orchestration.messages import messages_append, source_of
from orchestration.sessions import session_close, session_finish, session_open
from sessions.services import NewMessage
from tenants.services import end_user_create

from .mcp_client import call, client_run, error_text, mcp_run, structured

pytestmark = pytest.mark.django_db(transaction=True)

TOOLS = {"search_memories", "remember", "forget", "list_sessions", "session_context"}
MISSING_MEMORY = "not_found: Memory not found."
MISSING_SESSION = "not_found: Session not found."


@pytest.fixture
def ada(alice):
    return end_user_create(tenant=alice, external_id="ada-1", display_name="Ada")


@pytest.fixture
def background(monkeypatch):
    """Nobody consumes the broker here: record what closing a session enqueues; the tests run it themselves."""
    from orchestration import tasks

    sent = []
    monkeypatch.setattr(tasks.session_finish_task, "delay", lambda *args: sent.append(("finish", args)))
    monkeypatch.setattr(tasks.message_extract_task, "delay", lambda *args: sent.append(("extract", args)))
    return sent


def chat(tenant, user, turns):
    """A session of the user holding these (user, assistant) turns."""
    session, _ = session_open(tenant=tenant, user=user)
    items = [NewMessage(role=role, content=text) for pair in turns for role, text in zip(("user", "assistant"), pair)]
    messages = messages_append(tenant=tenant, session_id=session.pk, items=items, enqueue_extraction=False)
    return session, messages


def closed_with_bridge(tenant, user):
    session, messages = chat(tenant, user, [
        ("I need a flight from SFO to NYC next Tuesday under $400.", "I found a Delta flight at $350, 7am."),
        ("I prefer aisle seats. Let's go with the Delta flight.", "Booked seat 14C.")])
    session_close(tenant=tenant, session_id=session.pk)
    bridge = session_finish(tenant_id=tenant.pk, session_id=session.pk)
    assert bridge is not None and bridge.text
    return session, messages, bridge


def test_initialize_lists_the_tools_and_the_active_facts_resource(mcp_url, alice, ada):
    async def script(session):
        return session.initialize_result, await session.list_tools(), await session.list_resources()

    init, tools, resources = mcp_run(mcp_url, script, key=alice.plain_key)
    assert init.server_info.name == "continuum"
    assert init.capabilities.tools is not None and init.capabilities.resources is not None
    assert {t.name for t in tools.tools} == TOOLS
    schemas = {t.name: t.input_schema for t in tools.tools}
    assert schemas["search_memories"]["required"] == ["query"]
    assert schemas["forget"]["required"] == ["memory_id"]
    assert set(schemas["remember"]["properties"]["kind"]["enum"]) == {"preference", "fact", "goal", "event",
                                                                     "procedure"}
    assert [str(r.uri) for r in resources.resources] == [ACTIVE_FACTS_URI]


def test_search_returns_a_remembered_fact_with_its_provenance(mcp_url, alice, ada):
    session, messages = chat(alice, ada, [("I prefer aisle seats on long flights.", "Noted.")])
    said = messages[0]
    record = memory_create(tenant=alice, user=ada, kind="preference", text="Ada prefers aisle seats.",
                           source=source_of(said), session_id=session.pk)
    memory_create(tenant=alice, user=ada, kind="fact", text="Ada's home airport is SFO.")

    body = structured(call(mcp_url, "search_memories", {"query": "which seat do I like?", "k": 5},
                           key=alice.plain_key))
    assert body["query"] == "which seat do I like?"
    first = body["results"][0]
    assert first["memory_id"] == str(record.pk) and first["text"] == "Ada prefers aisle seats."
    assert first["source_type"] == "user_stated"
    assert first["session_id"] == str(session.pk) and first["source_message_id"] == str(said.pk)
    assert first["provenance"].startswith("you said on ")
    assert {"score", "kind", "confidence", "created_at", "token_count", "neighbours"} <= set(first)
    assert len(structured(call(mcp_url, "search_memories", {"query": "airport", "k": 1},
                               key=alice.plain_key))["results"]) == 1


def test_remember_then_search_finds_it_stored_as_inferred(mcp_url, alice, ada):
    stored = structured(call(mcp_url, "remember", {"text": "Ada is vegetarian.", "kind": "preference"},
                             key=alice.plain_key))
    assert stored["stored"] is True and stored["outcome"] == "created"
    record = MemoryRecord.objects.for_tenant(alice).get(pk=stored["memory_id"])
    assert (record.user_id, record.text, record.kind) == (ada.pk, "Ada is vegetarian.", "preference")
    # The client's model said it, not the user.
    assert record.source_type == stored["source_type"] == "inferred" and record.status == "active"
    event = MemoryEvent.objects.for_tenant(alice).get(memory_uuid=record.pk)
    assert (event.action, event.actor_id) == ("created", "mcp")

    results = structured(call(mcp_url, "search_memories", {"query": "what does Ada eat?"},
                              key=alice.plain_key))["results"]
    assert results[0]["memory_id"] == str(record.pk) and results[0]["provenance"].startswith("inferred ")

    again = structured(call(mcp_url, "remember", {"text": "Ada is vegetarian.", "kind": "preference"},
                            key=alice.plain_key))
    assert again["outcome"] == "reinforced" and again["memory_id"] == str(record.pk)
    assert MemoryRecord.objects.for_tenant(alice).filter(user=ada).count() == 1


def test_remember_with_a_session_keeps_it_as_provenance(mcp_url, alice, ada):
    session, _ = chat(alice, ada, [("Book me something in Lisbon.", "Looking.")])
    stored = structured(call(mcp_url, "remember", {"text": "Ada is planning a trip to Lisbon.", "kind": "goal",
                                                   "session_id": str(session.pk)}, key=alice.plain_key))
    assert MemoryRecord.objects.for_tenant(alice).get(pk=stored["memory_id"]).session_id == session.pk


def test_remember_never_stores_a_secret(mcp_url, alice, ada):
    body = structured(call(mcp_url, "remember", {"text": "sk-proj-abcdefghijklmnopqrstuvwxyz0123456789ABCD"},
                           key=alice.plain_key))
    assert body["stored"] is False and body["outcome"] == "secret"
    assert not MemoryRecord.objects.for_tenant(alice).exists()


def test_forget_removes_the_memory(mcp_url, alice, ada):
    record = memory_create(tenant=alice, user=ada, kind="preference", text="Ada prefers window seats.")
    assert structured(call(mcp_url, "search_memories", {"query": "window seats"},
                           key=alice.plain_key))["results"][0]["memory_id"] == str(record.pk)

    assert structured(call(mcp_url, "forget", {"memory_id": str(record.pk)}, key=alice.plain_key)) == {
        "forgotten": True, "memory_id": str(record.pk)}
    record.refresh_from_db()
    assert record.status == "deleted"
    event = MemoryEvent.objects.for_tenant(alice).filter(memory_uuid=record.pk, action="deleted").get()
    assert (event.actor_type, event.actor_id) == ("end_user", "ada-1 (via mcp)")
    assert structured(call(mcp_url, "search_memories", {"query": "window seats"}, key=alice.plain_key))[
        "results"] == []


def test_list_sessions_gives_each_session_with_its_bridge(mcp_url, alice, ada, background):
    closed, _, bridge = closed_with_bridge(alice, ada)
    current, _ = session_open(tenant=alice, user=ada)

    rows = structured(call(mcp_url, "list_sessions", key=alice.plain_key))["sessions"]
    assert [r["id"] for r in rows] == [str(current.pk), str(closed.pk)]  # newest first
    assert rows[0]["state"] == "open" and rows[0]["bridge"] is None
    assert rows[1]["state"] == "closed" and rows[1]["message_count"] == 4
    assert rows[1]["bridge"]["text"] == bridge.text == BridgeSummary.objects.for_tenant(alice).get(
        session=closed).text
    assert rows[1]["bridge"]["method"] == "extractive"

    only_closed = structured(call(mcp_url, "list_sessions", {"state": "closed"}, key=alice.plain_key))["sessions"]
    assert [r["id"] for r in only_closed] == [str(closed.pk)]


def test_session_context_starts_a_returning_user_with_the_bridge_and_memories(mcp_url, alice, ada, background):
    closed, _, bridge = closed_with_bridge(alice, ada)
    airport = memory_create(tenant=alice, user=ada, kind="fact", text="Ada's home airport is SFO.")
    current, _ = session_open(tenant=alice, user=ada)

    ctx = structured(call(mcp_url, "session_context", {"session_id": str(current.pk),
                                                        "input": "Find me a flight home from my airport",
                                                        "budget": 2000}, key=alice.plain_key))
    assert ctx["session_id"] == str(current.pk) and ctx["first_turn"] is True
    assert ctx["total_tokens"] <= ctx["budget"] == 2000
    assert [b["session_id"] for b in ctx["bridges"]] == [str(closed.pk)]
    assert bridge.text in ctx["messages"][0]["content"]  # the system message carries the bridge
    # A stated fact is in the standing profile, shown once (retrieval does not repeat it)
    assert str(airport.pk) in [m["memory_id"] for m in ctx["memories"] + ctx["profile"]]
    assert airport.text in ctx["messages"][0]["content"]
    assert ctx["messages"][-1] == {"role": "user", "content": "Find me a flight home from my airport"}
    assert ctx["breakdown"]["bridge"] > 0 and ctx["memory_status"] == "ok"


def test_the_active_facts_resource_holds_the_users_active_memories(mcp_url, alice, bob, ada):
    session, messages = chat(alice, ada, [("I prefer aisle seats.", "Noted.")])
    seats = memory_create(tenant=alice, user=ada, kind="preference", text="Ada prefers aisle seats.",
                          source=source_of(messages[0]), session_id=session.pk)
    airport = memory_create(tenant=alice, user=ada, kind="fact", text="Ada's home airport is SFO.")
    gone = memory_create(tenant=alice, user=ada, kind="fact", text="Ada lives in Oakland.")
    memory_delete(tenant=alice, memory_id=gone.pk, actor_type="end_user")
    grace = end_user_create(tenant=alice, external_id="grace-2")
    memory_create(tenant=alice, user=grace, kind="fact", text="Grace lives in Boston.")
    memory_create(tenant=bob, user=end_user_create(tenant=bob, external_id="ada-1"), kind="fact",
                  text="Bob's Ada lives in Paris.")

    async def script(session):
        return await session.read_resource(ACTIVE_FACTS_URI)

    result = mcp_run(mcp_url, script, key=alice.plain_key)
    assert result.contents[0].mime_type == "application/json"
    facts = json.loads(result.contents[0].text)
    assert [f["id"] for f in facts] == [str(airport.pk), str(seats.pk)]  # newest first
    assert {f["status"] for f in facts} == {"active"}
    assert facts[1]["provenance"]["source_type"] == "user_stated"
    assert facts[1]["provenance"]["source_message_id"] == str(messages[0].pk)
    assert facts[1]["provenance"]["session_id"] == str(session.pk)


@pytest.mark.parametrize("tool, arguments", [
    ("search_memories", {"query": "seats", "k": 0}), ("search_memories", {"query": "seats", "k": 51}),
    ("search_memories", {"query": "   "}), ("search_memories", {}), ("search_memories", {"query": "x" * 2001}),
    ("remember", {"text": "Ada likes tea.", "kind": "opinion"}), ("remember", {"text": ""}),
    ("list_sessions", {"limit": 0}), ("list_sessions", {"state": "archived"}),
    ("session_context", {"session_id": "x", "budget": 10}), ("forget", {}),
])
def test_bad_arguments_are_tool_errors(mcp_url, alice, ada, tool, arguments):
    result = call(mcp_url, tool, arguments, key=alice.plain_key)
    assert result.is_error and result.content[0].text


# --- ownership --------------------------------------------------------------------------------------------------

@pytest.fixture
def outsiders(alice, bob, background):
    """What others hold: Bob's tenant has its own "ada-1" (the same external id), Alice's tenant another user."""
    bobs_ada = end_user_create(tenant=bob, external_id="ada-1")
    grace = end_user_create(tenant=alice, external_id="grace-2")
    out = {}
    for name, tenant, user in (("bob", bob, bobs_ada), ("grace", alice, grace)):
        session, _, _ = closed_with_bridge(tenant, user)
        memory = memory_create(tenant=tenant, user=user, kind="preference", text=f"{name} prefers aisle seats.",
                               session_id=session.pk)
        out[name] = {"session": session, "memory": memory}
    return out


def test_another_tenants_or_users_memory_ids_are_not_found_like_missing_ones(mcp_url, alice, ada, outsiders):
    ids = [str(o["memory"].pk) for o in outsiders.values()] + [str(uuid.uuid4()), "not-a-uuid"]
    for memory_id in ids:
        assert MISSING_MEMORY in error_text(call(mcp_url, "forget", {"memory_id": memory_id}, key=alice.plain_key))
    for o in outsiders.values():
        o["memory"].refresh_from_db()
        assert o["memory"].status == "active"
        assert not MemoryEvent.objects.unscoped().filter(memory_uuid=o["memory"].pk, action="deleted").exists()


def test_another_tenants_or_users_session_ids_are_not_found_like_missing_ones(mcp_url, alice, ada, outsiders):
    ids = [str(o["session"].pk) for o in outsiders.values()] + [str(uuid.uuid4()), "not-a-uuid"]
    for session_id in ids:
        result = call(mcp_url, "session_context", {"session_id": session_id, "input": "aisle"},
                      key=alice.plain_key)
        assert MISSING_SESSION in error_text(result)
        assert "aisle" not in error_text(result)
        result = call(mcp_url, "remember", {"text": "Ada likes tea.", "session_id": session_id},
                      key=alice.plain_key)
        assert MISSING_SESSION in error_text(result)
    assert not MemoryRecord.objects.for_tenant(alice).filter(user=ada).exists()


def test_search_sessions_and_facts_never_show_another_tenants_or_users_data(mcp_url, alice, bob, ada, outsiders):
    async def script(session):
        found = await session.call_tool("search_memories", {"query": "who prefers aisle seats?"})
        sessions = await session.call_tool("list_sessions", {})
        facts = await session.read_resource(ACTIVE_FACTS_URI)
        return structured(found), structured(sessions), json.loads(facts.contents[0].text)

    found, sessions, facts = mcp_run(mcp_url, script, key=alice.plain_key)
    assert found["results"] == [] and sessions["sessions"] == [] and facts == []

    # Bob's key and the same external id reach Bob's own user only.
    found, sessions, facts = mcp_run(mcp_url, script, key=bob.plain_key)
    bobs = {str(pk) for pk in MemoryRecord.objects.for_tenant(bob).filter(user__external_id="ada-1")
            .values_list("pk", flat=True)}
    # Bob's preference first; the rest, if any, are his session's note lines.
    assert found["results"][0]["memory_id"] == str(outsiders["bob"]["memory"].pk)
    assert {r["memory_id"] for r in found["results"]} <= bobs
    assert [s["id"] for s in sessions["sessions"]] == [str(outsiders["bob"]["session"].pk)]
    assert str(outsiders["bob"]["memory"].pk) in {f["id"] for f in facts} and {f["id"] for f in facts} <= bobs


def test_a_client_on_the_2026_protocol_gets_the_same_tools_and_data(mcp_url, alice, ada):
    record = memory_create(tenant=alice, user=ada, kind="preference", text="Ada prefers aisle seats.")

    async def script(client):
        tools = await client.list_tools()
        found = await client.call_tool("search_memories", {"query": "aisle seats"})
        facts = await client.read_resource(ACTIVE_FACTS_URI)
        return client.protocol_version, tools, found, facts

    version, tools, found, facts = client_run(mcp_url, script, key=alice.plain_key)
    assert version == "2026-07-28"
    assert {t.name for t in tools.tools} == TOOLS
    assert [r["memory_id"] for r in structured(found)["results"]] == [str(record.pk)]
    assert [f["id"] for f in json.loads(facts.contents[0].text)] == [str(record.pk)]


def test_search_as_of_a_past_date_returns_what_held_then(mcp_url, alice, ada):
    from datetime import datetime, timezone

    from memory.actions import memory_remember

    session, _ = session_open(tenant=alice, user=ada)
    said = messages_append(tenant=alice, session_id=session.pk, enqueue_extraction=False, items=[
        NewMessage(role="user", content="I live in Lisbon.", created_at=datetime(2024, 3, 1, tzinfo=timezone.utc)),
        NewMessage(role="user", content="I live in Porto now.", created_at=datetime(2024, 6, 1, tzinfo=timezone.utc))])
    for message, city in zip(said, ("Lisbon", "Porto")):
        memory_remember(tenant=alice, user=ada, kind="fact", text=f"Ada lives in {city}.", subject="home city",
                        value=city, source=source_of(message))
    then = structured(call(mcp_url, "search_memories", {"query": "where does Ada live", "as_of": "2024-04-15"},
                           key=alice.plain_key))
    assert [r["text"] for r in then["results"]] == ["Ada lives in Lisbon."]
    now = structured(call(mcp_url, "search_memories", {"query": "where does Ada live"}, key=alice.plain_key))
    assert [r["text"] for r in now["results"]] == ["Ada lives in Porto."]
    assert "invalid_as_of" in error_text(call(mcp_url, "search_memories", {"query": "where", "as_of": "soon"},
                                              key=alice.plain_key))
