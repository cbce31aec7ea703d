"""Session and message endpoints: open, get, list, close (idempotent), append (atomic batches), list messages."""
import pytest

pytestmark = pytest.mark.django_db(transaction=True)


def _open(client, user_id, **extra):
    return client.post("/api/v1/sessions", {"user_id": str(user_id), **extra}, format="json")


def test_open_get_list_close(alice_client, alice_user):
    r = _open(alice_client, alice_user.id, title="trip")
    assert r.status_code == 201, r.content
    sid = r.json()["id"]
    assert alice_client.get(f"/api/v1/sessions/{sid}").json()["state"] == "open"
    listed = alice_client.get(f"/api/v1/users/{alice_user.id}/sessions").json()["results"]
    assert [s["id"] for s in listed] == [sid]
    closed = alice_client.post(f"/api/v1/sessions/{sid}/close")
    assert closed.status_code == 200 and closed.json()["state"] == "closed"


def test_close_twice_returns_same_result(alice_client, alice_session):
    first = alice_client.post(f"/api/v1/sessions/{alice_session.id}/close")
    second = alice_client.post(f"/api/v1/sessions/{alice_session.id}/close")
    assert first.status_code == second.status_code == 200
    assert first.json() == second.json()


def test_new_session_links_previous(alice_client, alice_user):
    first = _open(alice_client, alice_user.id).json()["id"]
    second = _open(alice_client, alice_user.id).json()
    assert second["previous_id"] == first
    # the default policy closes the user's open session before opening another
    assert alice_client.get(f"/api/v1/sessions/{first}").json()["state"] == "closed"


def test_return_open_policy_returns_existing(alice, alice_client, alice_user):
    alice.open_policy = "return_open"
    alice.save()
    first = _open(alice_client, alice_user.id)
    again = _open(alice_client, alice_user.id)
    assert first.status_code == 201 and again.status_code == 200
    assert first.json()["id"] == again.json()["id"]


def test_append_one_and_batch_then_list(alice_client, alice_session):
    url = f"/api/v1/sessions/{alice_session.id}/messages"
    r = alice_client.post(url, {"role": "user", "content": "hello"}, format="json")
    assert r.status_code == 201, r.content
    batch = {"messages": [
        {"role": "assistant", "content": "hi", "external_id": "D1:2"},
        {"role": "user", "content": "I prefer aisle seats", "external_id": "D1:3",
         "created_at": "2023-05-08T13:56:00Z"},
    ]}
    r = alice_client.post(url, batch, format="json")
    assert r.status_code == 201, r.content
    listed = alice_client.get(url).json()["results"]
    assert [m["seq"] for m in listed] == [1, 2, 3]
    assert listed[2]["created_at"].startswith("2023-05-08T13:56")
    assert listed[2]["external_id"] == "D1:3"
    assert listed[0]["token_count"] > 0


def test_message_list_cursor_pagination(alice_client, alice_session):
    url = f"/api/v1/sessions/{alice_session.id}/messages"
    alice_client.post(url, {"messages": [{"role": "user", "content": f"m{i}"} for i in range(7)]}, format="json")
    page = alice_client.get(url, {"limit": 3}).json()
    seen = [m["content"] for m in page["results"]]
    while page["next"]:
        page = alice_client.get(page["next"]).json()
        seen += [m["content"] for m in page["results"]]
    assert seen == [f"m{i}" for i in range(7)]


def test_bad_item_rejects_whole_batch(alice_client, alice_session):
    url = f"/api/v1/sessions/{alice_session.id}/messages"
    r = alice_client.post(url, {"messages": [{"role": "user", "content": "ok"}, {"role": "wizard", "content": "x"}]},
                          format="json")
    assert r.status_code == 400
    assert alice_client.get(url).json()["results"] == []


def test_duplicate_external_id_rejects_whole_batch(alice_client, alice_session):
    url = f"/api/v1/sessions/{alice_session.id}/messages"
    r = alice_client.post(url, {"role": "user", "content": "a", "external_id": "x1"}, format="json")
    assert r.status_code == 201
    r = alice_client.post(url, {"messages": [{"role": "user", "content": "b", "external_id": "x2"},
                                             {"role": "user", "content": "c", "external_id": "x1"}]}, format="json")
    assert r.status_code == 409
    assert r.json()["error"]["code"] == "duplicate_external_id"
    assert [m["content"] for m in alice_client.get(url).json()["results"]] == ["a"]
    r = alice_client.post(url, {"messages": [{"role": "user", "content": "d", "external_id": "y"},
                                             {"role": "user", "content": "e", "external_id": "y"}]}, format="json")
    assert r.status_code == 409


def test_append_to_closed_session_is_409(alice_client, alice_session):
    alice_client.post(f"/api/v1/sessions/{alice_session.id}/close")
    r = alice_client.post(f"/api/v1/sessions/{alice_session.id}/messages", {"role": "user", "content": "x"},
                          format="json")
    assert r.status_code == 409
    assert r.json()["error"]["code"] == "session_closed"


@pytest.mark.parametrize("body", [
    [], "text", {"role": "user"}, {"role": "user", "content": 5}, {"role": "user", "content": None},
    {"messages": []}, {"messages": "x"}, {"messages": [{}]},
    {"role": "user", "content": "x", "created_at": "yesterday"},
    {"role": "user", "content": "x" * 40_000},
    {"role": "user", "content": "x", "tool_calls": "nope"},
])
def test_invalid_message_bodies_are_400(alice_client, alice_session, body):
    r = alice_client.post(f"/api/v1/sessions/{alice_session.id}/messages", body, format="json")
    assert r.status_code == 400, r.content
    assert r.json()["error"]["code"]


def test_oversized_body_is_413(alice_client, alice_session, settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 10_000
    body = {"messages": [{"role": "user", "content": "y" * 5000} for _ in range(5)]}
    r = alice_client.post(f"/api/v1/sessions/{alice_session.id}/messages", body, format="json")
    assert r.status_code == 413
    assert r.json()["error"]["code"] == "payload_too_large"


@pytest.mark.parametrize("body", [{}, {"user_id": "not-a-uuid"}, {"user_id": 12},
                                  {"user_id": "00000000-0000-0000-0000-000000000000"}])
def test_open_validation(alice_client, body):
    r = alice_client.post("/api/v1/sessions", body, format="json")
    assert r.status_code in (400, 404)
    assert "error" in r.json()


def test_invalid_cursor_and_state_are_400(alice_client, alice_user, alice_session):
    assert alice_client.get(f"/api/v1/sessions/{alice_session.id}/messages", {"cursor": "garbage"}).status_code == 400
    assert alice_client.get(f"/api/v1/users/{alice_user.id}/sessions", {"state": "weird"}).status_code == 400
    assert alice_client.get(f"/api/v1/sessions/{alice_session.id}/messages", {"limit": "x"}).status_code == 400


def test_outsider_gets_404_everywhere(alice_user, alice_session, bob_client):
    sid = alice_session.id
    assert bob_client.get(f"/api/v1/sessions/{sid}").status_code == 404
    assert bob_client.post(f"/api/v1/sessions/{sid}/close").status_code == 404
    assert bob_client.get(f"/api/v1/sessions/{sid}/messages").status_code == 404
    assert bob_client.post(f"/api/v1/sessions/{sid}/messages", {"role": "user", "content": "x"},
                           format="json").status_code == 404
    assert bob_client.get(f"/api/v1/users/{alice_user.id}/sessions").status_code == 404
    assert _open(bob_client, alice_user.id).status_code == 404


def test_outsider_close_leaves_session_open(alice_client, alice_session, bob_client):
    bob_client.post(f"/api/v1/sessions/{alice_session.id}/close")
    assert alice_client.get(f"/api/v1/sessions/{alice_session.id}").json()["state"] == "open"


@pytest.mark.parametrize("path", ["/api/v1/sessions/x", "/api/v1/sessions/x/messages", "/api/v1/users/x/sessions"])
def test_auth_required(db, path):
    from rest_framework.test import APIClient

    assert APIClient().get(path).status_code == 401


def test_null_character_in_tool_calls_is_400(alice_client, alice_session):
    body = {"role": "assistant", "content": "x", "tool_calls": [{"id": "c\x00"}]}
    r = alice_client.post(f"/api/v1/sessions/{alice_session.id}/messages", body, format="json")
    assert r.status_code == 400, r.content


def test_secrets_are_redacted_before_the_message_is_stored(alice_client, alice_session):
    from sessions.models import Message

    url = f"/api/v1/sessions/{alice_session.id}/messages"
    card, key = "4539 1488 0343 6467", "sk-proj-a1B2c3D4e5F6g7H8i9J0kLmNoPqR"
    r = alice_client.post(url, {"role": "user", "content": f"my card is {card} and my key is {key}, ok?"},
                          format="json")
    assert r.status_code == 201
    stored = Message.objects.unscoped().get(session=alice_session).content
    assert card not in stored and key not in stored
    assert "[redacted]" in stored and stored.endswith("ok?")


@pytest.mark.parametrize("content", ["", " ", "\n\t  \u3000"])
@pytest.mark.parametrize("role", ["user", "system", "assistant", "tool"])
def test_empty_or_whitespace_content_is_400_with_a_reason(alice_client, alice_session, role, content):
    url = f"/api/v1/sessions/{alice_session.id}/messages"
    r = alice_client.post(url, {"role": role, "content": content}, format="json")
    assert r.status_code == 400, r.content
    error = r.json()["error"]
    assert error["code"] == "invalid"
    assert "empty" in error["details"]["content"][0]
    assert alice_client.get(url).json()["results"] == []


def test_one_blank_message_rejects_the_whole_batch_and_names_it(alice_client, alice_session):
    url = f"/api/v1/sessions/{alice_session.id}/messages"
    r = alice_client.post(url, {"messages": [{"role": "user", "content": "I live in Porto."},
                                             {"role": "user", "content": "   "}]}, format="json")
    assert r.status_code == 400, r.content
    details = r.json()["error"]["details"]["messages"]
    assert details[0] == {} and "empty" in details[1]["content"][0]
    assert alice_client.get(url).json()["results"] == []


def test_tool_calls_and_tool_results_may_have_empty_content(alice_client, alice_session):
    url = f"/api/v1/sessions/{alice_session.id}/messages"
    call = {"id": "call_1", "type": "function", "function": {"name": "lookup", "arguments": "{}"}}
    r = alice_client.post(url, {"messages": [
        {"role": "user", "content": "Look it up."},
        {"role": "assistant", "content": "", "tool_calls": [call]},
        {"role": "tool", "content": "", "tool_call_id": "call_1"},
        {"role": "assistant", "content": "Nothing found."},
    ]}, format="json")
    assert r.status_code == 201, r.content
    assert [m["role"] for m in alice_client.get(url).json()["results"]] == ["user", "assistant", "tool", "assistant"]


def test_recording_a_message_takes_one_transaction_without_savepoints(alice, alice_session):
    """A turn records twice (the input, then the loop's messages): each is BEGIN, the counter update that locks the
    session and returns it, the insert, COMMIT; a savepoint around the insert was two more round trips each time,
    and a locked read before the update one more."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from orchestration.messages import messages_append
    from sessions.services import NewMessage

    with CaptureQueriesContext(connection) as queries:
        rows = messages_append(tenant=alice, session_id=alice_session.pk, enqueue_extraction=False,
                               items=[NewMessage(role="user", content="I prefer aisle seats.")])
    statements = [q["sql"].split()[0].upper() for q in queries.captured_queries]
    assert rows and "SAVEPOINT" not in statements and "RELEASE" not in statements, statements
    # (what follows COMMIT is the fan-out after commit: the buffer's reads)
    assert statements[:statements.index("COMMIT") + 1] == ["BEGIN", "UPDATE", "INSERT", "COMMIT"], statements
    assert [m.seq for m in rows] == [alice_session.message_seq + 1]
    alice_session.refresh_from_db()
    assert alice_session.message_seq == rows[-1].seq
