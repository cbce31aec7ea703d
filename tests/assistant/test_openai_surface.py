"""/v1/chat/completions and /v1/models: the official openai client against a live ASGI server (uvicorn), streaming
and not, plus the protocol's validation, errors and ownership."""
from __future__ import annotations

import json
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import openai
import pytest

from sessions.models import Message, Session
from tenants.models import EndUser

from .conftest import client_for
from .scripted_llm import answer, call, tool_step

pytestmark = pytest.mark.django_db(transaction=True)

URL = "/v1/chat/completions"


def session_messages(session_id) -> list[tuple[str, str]]:
    return [(m.role, m.content) for m in Message.objects.unscoped().filter(session_id=session_id).order_by("seq")
            if m.role in ("user", "assistant") and not m.tool_calls]


def open_session_id(tenant, external_id: str):
    return Session.objects.unscoped().get(tenant=tenant, user__external_id=external_id, state="open").id


# --- the official client against the live server -------------------------------------------------------------------

def test_non_streaming_completion_with_the_openai_client(server, llm, alice):
    llm.add(answer("Hi Ada! Where are you flying?"))
    client = client_for(server, alice)
    raw = client.chat.completions.with_raw_response.create(
        model="continuum", user="ada-1",
        messages=[{"role": "system", "content": "Answer briefly."}, {"role": "user", "content": "Hello there"}])
    completion = raw.parse()
    assert completion.object == "chat.completion" and completion.id.startswith("chatcmpl-")
    assert completion.model == "continuum"
    assert completion.choices[0].message.content == "Hi Ada! Where are you flying?"
    assert completion.choices[0].finish_reason == "stop"
    assert completion.usage.total_tokens == completion.usage.prompt_tokens + completion.usage.completion_tokens > 0
    user = EndUser.objects.unscoped().get(tenant=alice, external_id="ada-1")  # created on first use
    session_id = raw.headers["X-Session-Id"]
    assert str(open_session_id(alice, "ada-1")) == session_id
    assert session_messages(session_id) == [("user", "Hello there"), ("assistant", "Hi Ada! Where are you flying?")]
    assert "Answer briefly." in llm.requests[0]["messages"][0]["content"]  # the client's system prompt rides along
    extension = completion.model_extra["continuum"]
    assert extension["session_id"] == session_id and extension["stop_reason"] == "answer"
    assert user.sessions.count() == 1


def test_streaming_completion_with_the_openai_client(server, llm, alice):
    llm.add(tool_step(call("set_goal", {"goal": "Fly to Newark"})),
            answer("Streaming answers arrive in pieces. Each sentence is checked before it goes."))
    client = client_for(server, alice)
    stream = client.chat.completions.create(model="continuum", stream=True, extra_headers={"X-User-Id": "ada-2"},
                                            messages=[{"role": "user", "content": "Plan a Newark trip"}])
    chunks = list(stream)
    assert {c.id for c in chunks} == {chunks[0].id} and chunks[0].id.startswith("chatcmpl-")
    assert all(c.object == "chat.completion.chunk" for c in chunks)
    assert chunks[0].choices[0].delta.role == "assistant"
    assert "".join(c.choices[0].delta.content or "" for c in chunks) == ("Streaming answers arrive in pieces. "
                                                                         "Each sentence is checked before it goes.")
    # Streamed a sentence at a time (each is grounded before it is sent), not as one block.
    assert len([c for c in chunks if c.choices[0].delta.content]) > 1
    assert [c.choices[0].finish_reason for c in chunks][-1] == "stop"
    assert all(r.get("stream") for r in llm.requests)
    session_id = open_session_id(alice, "ada-2")
    assert session_messages(session_id)[-1] == ("assistant", "Streaming answers arrive in pieces. Each sentence is "
                                                             "checked before it goes.")


def test_stream_is_server_sent_events_ending_with_done(server, llm, alice):
    llm.add(answer("Done soon."))
    with httpx.Client(timeout=30) as http:
        resp = http.post(f"{server}{URL}", headers={"Authorization": f"Bearer {alice.plain_key}"},
                         json={"model": "continuum", "stream": True, "user": "ada-3",
                               "messages": [{"role": "user", "content": "hi"}]})
    assert resp.status_code == 200 and resp.headers["content-type"].startswith("text/event-stream")
    events = [e for e in resp.text.split("\n\n") if e.startswith("data: ")]
    assert events[-1] == "data: [DONE]"
    bodies = [json.loads(e[len("data: "):]) for e in events[:-1]]
    assert len({b["id"] for b in bodies}) == 1
    assert bodies[-1]["choices"][0]["finish_reason"] == "stop"
    assert bodies[-1]["continuum"]["session_id"] == resp.headers["X-Session-Id"]


def test_client_disconnect_stops_generation(server, llm, alice):
    text = " ".join(f"word{i}." for i in range(60))  # sentences: an answer streams a sentence at a time
    llm.chunk_delay = 0.25
    llm.add(answer(text))
    with httpx.Client(timeout=30) as http:
        with http.stream("POST", f"{server}{URL}", headers={"Authorization": f"Bearer {alice.plain_key}"},
                         json={"model": "continuum", "stream": True, "user": "ada-4",
                               "messages": [{"role": "user", "content": "Tell me a long story"}]}) as resp:
            lines = resp.iter_lines()
            content_seen = 0
            for line in lines:
                if line.startswith("data: ") and '"content": "word' in line:
                    content_seen += 1
                    if content_seen == 1:
                        break
    # The client is gone: the turn stops reading the model and records what it had.
    session_id = None
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        session_id = (Session.objects.unscoped().filter(tenant=alice, user__external_id="ada-4")
                      .values_list("id", flat=True).first())
        if session_id and Message.objects.unscoped().filter(session_id=session_id, role="assistant").exists():
            break
        time.sleep(0.1)
    recorded = Message.objects.unscoped().get(session_id=session_id, role="assistant").content
    assert recorded and len(recorded) < len(text)
    assert llm.chunks_sent < 8  # 8 chunks make the whole answer; generation stopped part-way


def test_a_burst_of_turns_queues_for_the_turn_threads_and_every_one_is_answered(server, llm, alice, settings):
    settings.ASSISTANT_TURN_THREADS = 2
    burst = 5
    lock, everyone_in = threading.Lock(), threading.Event()
    seen = {"active": 0, "peak": 0, "threads": set()}

    def held_answer(body):
        with lock:
            seen["active"] += 1
            seen["peak"] = max(seen["peak"], seen["active"])
            seen["threads"].add(threading.current_thread().name)
            if seen["active"] == burst:
                everyone_in.set()
        everyone_in.wait(0.5)  # with a thread per request, every turn of the burst is in here at once
        with lock:
            seen["active"] -= 1
        return answer("Noted.")

    llm.then = held_answer

    def ask(n):
        with httpx.Client(timeout=60) as http:
            return http.post(f"{server}{URL}", headers={"Authorization": f"Bearer {alice.plain_key}"},
                             json={"model": "continuum", "user": f"burst-{n}",
                                   "messages": [{"role": "user", "content": f"Hello from {n}"}]})

    with ThreadPoolExecutor(burst) as clients:
        replies = list(clients.map(ask, range(burst)))
    assert [r.status_code for r in replies] == [200] * burst  # queued, none dropped
    assert [r.json()["choices"][0]["message"]["content"] for r in replies] == ["Noted."] * burst
    assert seen["peak"] == 2
    assert len(seen["threads"]) == 2 and all(name.startswith("chat-turn") for name in seen["threads"])


def test_a_queued_turn_whose_client_left_records_nothing(server, llm, alice, settings, monkeypatch):
    from api.openai import views as openai_views

    settings.ASSISTANT_TURN_THREADS = 1
    release = threading.Event()
    cancels = []
    start_turn = openai_views._start_turn
    monkeypatch.setattr(openai_views, "_start_turn", lambda **kw: cancels.append(start_turn(**kw)) or cancels[-1])

    def first(body):
        release.wait(10)  # holds the only turn thread
        return answer("First.")

    llm.add(first)
    headers = {"Authorization": f"Bearer {alice.plain_key}"}
    with ThreadPoolExecutor(1) as background, httpx.Client(timeout=30) as http:
        held = background.submit(http.post, f"{server}{URL}", headers=headers, json={
            "model": "continuum", "user": "holder", "messages": [{"role": "user", "content": "Hold on"}]})
        deadline = time.monotonic() + 10
        while not llm.requests and time.monotonic() < deadline:
            time.sleep(0.05)  # the holder's turn has the thread
        with http.stream("POST", f"{server}{URL}", headers=headers, json={
                "model": "continuum", "stream": True, "user": "leaver",
                "messages": [{"role": "user", "content": "Never mind"}]}) as resp:
            next(resp.iter_lines())  # the stream has begun; its turn waits for the thread
        deadline = time.monotonic() + 10
        while not (len(cancels) == 2 and cancels[1].is_set()) and time.monotonic() < deadline:
            time.sleep(0.05)  # until the server has seen the client go
        assert cancels[1].is_set()
        release.set()
        assert held.result().status_code == 200
    openai_views._turn_threads(1).submit(lambda: None).result(timeout=30)  # the one thread is done with the queue
    assert Message.objects.unscoped().filter(session__user__external_id="holder").count() == 2
    assert not Message.objects.unscoped().filter(session__user__external_id="leaver").exists()
    assert len(llm.requests) == 1


def test_session_resolution_reuses_the_open_session_then_bridges_to_a_new_one(server, llm, alice):
    from orchestration.sessions import session_close

    # A client that sends only its newest message: the tenant's setting keeps every request in the open session.
    alice.chat_sessions = alice.ChatSessions.OPEN_SESSION
    alice.save(update_fields=["chat_sessions"])
    llm.then = answer("ok")
    client = client_for(server, alice)

    def ask(text, **headers):
        return client.chat.completions.with_raw_response.create(
            model="continuum", user="ada-5", messages=[{"role": "user", "content": text}], extra_headers=headers)

    first = ask("one").headers["X-Session-Id"]
    assert ask("two").headers["X-Session-Id"] == first
    assert ask("three", **{"X-Session-Id": first}).headers["X-Session-Id"] == first
    session_close(tenant=alice, session_id=first)
    fresh = ask("four").headers["X-Session-Id"]
    assert fresh != first
    assert str(Session.objects.unscoped().get(pk=fresh).previous_id) == first
    with pytest.raises(openai.ConflictError) as exc:
        ask("five", **{"X-Session-Id": first})
    assert exc.value.body["code"] == "session_closed"


def test_earlier_turns_are_imported_once(server, llm, alice):
    llm.then = lambda body: answer(f"answer {len(llm.requests)}")
    client = client_for(server, alice)
    history = [{"role": "user", "content": "I live in Oakland."},
               {"role": "assistant", "content": "Nice, the East Bay."},
               {"role": "user", "content": "Find me a flight."}]
    first = client.chat.completions.create(model="continuum", user="ada-6", messages=history)
    session_id = open_session_id(alice, "ada-6")
    assert session_messages(session_id) == [("user", "I live in Oakland."), ("assistant", "Nice, the East Bay."),
                                            ("user", "Find me a flight."), ("assistant", "answer 1")]
    history += [{"role": "assistant", "content": first.choices[0].message.content},
                {"role": "user", "content": "Under $400 please."}]
    client.chat.completions.create(model="continuum", user="ada-6", messages=history)
    assert session_messages(session_id)[4:] == [("user", "Under $400 please."), ("assistant", "answer 2")]
    # The model saw the imported turns in the composed context.
    assert any(m["content"] == "I live in Oakland." for m in llm.requests[0]["messages"])


def test_repeated_short_replies_are_turns_of_their_own_and_a_resend_imports_nothing_twice(server, llm, alice):
    from orchestration.sessions import session_close

    llm.then = lambda body: answer(f"answer {len(llm.requests)}")
    client = client_for(server, alice)
    # A conversation begun elsewhere: "yes" twice and "thanks" are three turns the user really sent.
    history = [{"role": "user", "content": "Book me a table for two."},
               {"role": "assistant", "content": "At 8 pm?"},
               {"role": "user", "content": "yes"},
               {"role": "assistant", "content": "On the terrace?"},
               {"role": "user", "content": "yes"},
               {"role": "assistant", "content": "Booked."},
               {"role": "user", "content": "thanks"},
               {"role": "user", "content": "Also a taxi."}]
    first = client.chat.completions.create(model="continuum", user="ada-9", messages=history)
    session_id = open_session_id(alice, "ada-9")
    expected = [(m["role"], m["content"]) for m in history] + [("assistant", "answer 1")]
    assert session_messages(session_id) == expected
    # The client resends the whole conversation, then says "yes" and "thanks" again: stored again, once each.
    history += [{"role": "assistant", "content": first.choices[0].message.content}, {"role": "user", "content": "yes"}]
    second = client.chat.completions.create(model="continuum", user="ada-9", messages=history)
    history += [{"role": "assistant", "content": second.choices[0].message.content},
                {"role": "user", "content": "thanks"}]
    client.chat.completions.create(model="continuum", user="ada-9", messages=history)
    expected += [("user", "yes"), ("assistant", "answer 2"), ("user", "thanks"), ("assistant", "answer 3")]
    assert session_messages(session_id) == expected
    # A client that keeps only its newest turns lines up with the session's last ones: nothing is imported.
    client.chat.completions.create(model="continuum", user="ada-9",
                                   messages=history[-4:] + [{"role": "assistant", "content": "answer 3"},
                                                            {"role": "user", "content": "bye"}])
    assert session_messages(session_id) == expected + [("user", "bye"), ("assistant", "answer 4")]
    # The user's next session holds its own conversation: a "thanks" said in an earlier session is stored here too.
    session_close(tenant=alice, session_id=session_id)
    client.chat.completions.create(model="continuum", user="ada-9", messages=[
        {"role": "user", "content": "thanks"}, {"role": "assistant", "content": "Any time."},
        {"role": "user", "content": "One more question."}])
    fresh = open_session_id(alice, "ada-9")
    assert session_messages(fresh) == [("user", "thanks"), ("assistant", "Any time."),
                                       ("user", "One more question."), ("assistant", "answer 5")]


def test_a_retried_input_is_stored_once_with_its_history(server, llm, alice):
    llm.add(httpx.Response(503, json={"error": {"message": "overloaded"}}))
    llm.then = answer("fine")
    client = client_for(server, alice)
    history = [{"role": "user", "content": "I live in Oakland."}, {"role": "assistant", "content": "Nice."},
               {"role": "user", "content": "Find me a flight."}]
    with pytest.raises(openai.InternalServerError):
        client.chat.completions.create(model="continuum", user="ada-10", messages=history)
    client.chat.completions.create(model="continuum", user="ada-10", messages=history)
    assert session_messages(open_session_id(alice, "ada-10")) == [
        ("user", "I live in Oakland."), ("assistant", "Nice."), ("user", "Find me a flight."), ("assistant", "fine")]


def test_models_lists_the_alias(server, alice):
    models = client_for(server, alice).models.list()
    assert [m.id for m in models.data] == ["continuum"]


# --- ownership --------------------------------------------------------------------------------------------------------

def test_another_users_session_is_not_found(server, llm, alice, alice_session):
    client = client_for(server, alice)
    with pytest.raises(openai.NotFoundError) as exc:
        client.chat.completions.create(model="continuum", user="not-the-owner", extra_headers={
            "X-Session-Id": str(alice_session.id)}, messages=[{"role": "user", "content": "hi"}])
    assert exc.value.body["code"] == "not_found"
    assert llm.requests == [] and not Message.objects.unscoped().filter(session=alice_session).exists()


def test_another_tenants_session_is_not_found(server, llm, bob, alice_session, alice_user):
    client = client_for(server, bob)
    with pytest.raises(openai.NotFoundError):
        # Bob names a user with Alice's user's external id: still his own (new) user, never Alice's session.
        client.chat.completions.create(model="continuum", user=alice_user.external_id, extra_headers={
            "X-Session-Id": str(alice_session.id)}, messages=[{"role": "user", "content": "hi"}])
    assert llm.requests == [] and not Message.objects.unscoped().filter(session=alice_session).exists()


# --- validation and errors (Django's test client; all refused before any model call) --------------------------------

def post(client, tenant, body, **headers):
    data = body if isinstance(body, str | bytes) else json.dumps(body)
    auth = {"HTTP_AUTHORIZATION": f"Bearer {tenant.plain_key}"} if tenant is not None else {}
    return client.post(URL, data=data, content_type="application/json", **auth, **headers)


def assert_openai_error(resp, status, code, *, param=None, kind=None):
    assert resp.status_code == status, resp.content
    error = resp.json()["error"]
    assert set(error) == {"message", "type", "code", "param"}
    assert error["code"] == code and error["message"]
    if param is not None:
        assert error["param"] == param
    if kind is not None:
        assert error["type"] == kind


GOOD = {"model": "continuum", "user": "u1", "messages": [{"role": "user", "content": "hi"}]}


@pytest.mark.parametrize("body, code, param", [
    ("{not json", "malformed_body", None),
    ([1, 2], "malformed_body", None),
    ({**GOOD, "model": ""}, "invalid_request", "model"),
    ({**GOOD, "messages": []}, "invalid_request", "messages"),
    ({**GOOD, "messages": "hi"}, "invalid_request", "messages"),
    ({**GOOD, "messages": [{"role": "wizard", "content": "hi"}]}, "invalid_request", "messages"),
    ({**GOOD, "messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]},
     "invalid_request", "messages"),
    ({**GOOD, "messages": [{"role": "user", "content": "  "}]}, "invalid_request", "messages"),
    ({**GOOD, "messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}]},
     "unsupported_content", "messages"),
    ({**GOOD, "messages": [{"role": "user", "content": 5}]}, "invalid_request", "messages"),
    ({**GOOD, "stream": "yes"}, "invalid_request", "stream"),
    ({**GOOD, "temperature": 9}, "invalid_request", "temperature"),
    ({**GOOD, "max_tokens": 0}, "invalid_request", "max_tokens"),
    ({**GOOD, "n": 3}, "invalid_request", "n"),
    ({**GOOD, "user": 42}, "invalid_request", "user"),
    ({k: v for k, v in GOOD.items() if k != "user"}, "user_required", "user"),
])
def test_invalid_requests_get_openai_style_400s(llm, client, alice, body, code, param):
    assert_openai_error(post(client, alice, body), 400, code, param=param, kind="invalid_request_error")
    assert llm.requests == []


def test_user_field_and_header_must_agree(llm, client, alice):
    assert_openai_error(post(client, alice, GOOD, HTTP_X_USER_ID="someone-else"), 400, "invalid_request", param="user")
    assert post(client, alice, {**GOOD, "messages": []}, HTTP_X_USER_ID="u1").status_code == 400


@pytest.mark.parametrize("auth", [None, "Bearer nope", "Bearer abc.def", "Basic xyz"])
def test_bad_or_missing_keys_are_401(client, alice, auth):
    headers = {"HTTP_AUTHORIZATION": auth} if auth else {}
    resp = client.post(URL, data=json.dumps(GOOD), content_type="application/json", **headers)
    assert_openai_error(resp, 401, "invalid_api_key", kind="authentication_error")
    assert client.get("/v1/models", **headers).status_code == 401


def test_revoked_key_is_401(client, alice):
    from tenants.services import apikey_revoke

    apikey_revoke(tenant=alice, prefix=alice.plain_key.split(".")[0])
    assert_openai_error(post(client, alice, GOOD), 401, "invalid_api_key")


@pytest.mark.parametrize("body, headers, status, code", [
    ({k: v for k, v in GOOD.items() if k != "user"}, {}, 400, "user_required"),
    (GOOD, {"HTTP_X_USER_ID": "someone-else"}, 400, "invalid_request"),
    (GOOD, {"HTTP_X_SESSION_ID": "' OR 1=1"}, 400, "invalid_session_id"),
    (GOOD, {"HTTP_X_SESSION_ID": "8f2c8d39-2a6c-4f0e-9d55-0b8e0c1c7a11"}, 404, "not_found"),
    ({**GOOD, "stream_options": "x"}, {}, 400, "invalid_request"),
    ({**GOOD, "stream": True, "stream_options": {"include_usage": "yes"}}, {}, 400, "invalid_request"),
    ({**GOOD, "tools": [{"type": "function", "function": {"name": "a b"}}]}, {}, 400, "invalid_request"),
])
def test_without_an_llm_bad_requests_get_their_4xx_first(client, alice, body, headers, status, code):
    assert_openai_error(post(client, alice, body, **headers), status, code)
    assert not EndUser.objects.unscoped().filter(tenant=alice).exists()  # nothing created


def test_without_an_llm_every_surface_says_so_in_the_same_words(client, alice, alice_client, alice_session):
    from assistant.turns import turn_run
    from infra.errors import LLMNotConfigured
    from infra.llm import llm_required

    with pytest.raises(LLMNotConfigured) as raised:
        llm_required()
    with pytest.raises(LLMNotConfigured) as in_turn:
        turn_run(tenant=alice, session=alice_session, user_input="hi")
    rest = alice_client.post(f"/api/v1/sessions/{alice_session.id}/turns", {"input": "hi"}, format="json")
    surface = post(client, alice, GOOD)
    assert rest.status_code == surface.status_code == 503
    assert {raised.value.message, in_turn.value.message, rest.json()["error"]["message"],
            surface.json()["error"]["message"]} == {raised.value.message}
    assert "LLM_BASE_URL" in raised.value.message


def test_without_an_llm_another_users_or_a_closed_session_is_refused_first(client, alice, alice_session, alice_user):
    from orchestration.sessions import session_close

    sid = {"HTTP_X_SESSION_ID": str(alice_session.id)}
    assert_openai_error(post(client, alice, GOOD, **sid), 404, "not_found")
    owner = {**GOOD, "user": alice_user.external_id}
    assert_openai_error(post(client, alice, owner, **sid), 503, "llm_not_configured")
    session_close(tenant=alice, session_id=alice_session.id)
    assert_openai_error(post(client, alice, owner, **sid), 409, "session_closed")


def test_stream_options_must_be_an_object_with_a_model_too(llm, client, alice):
    assert_openai_error(post(client, alice, {**GOOD, "stream": True, "stream_options": "x"}), 400, "invalid_request",
                        param="stream_options")
    assert llm.requests == []


def test_without_an_llm_the_surface_answers_503(client, alice):
    assert_openai_error(post(client, alice, GOOD), 503, "llm_not_configured", kind="server_error")
    assert not EndUser.objects.unscoped().filter(tenant=alice, external_id="u1").exists()  # nothing created or recorded


def test_wrong_methods_and_oversized_bodies(llm, client, alice, settings):
    resp = client.get(URL, HTTP_AUTHORIZATION=f"Bearer {alice.plain_key}")
    assert_openai_error(resp, 405, "method_not_allowed")
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1000
    big = {**GOOD, "messages": [{"role": "user", "content": "x" * 2000}]}
    assert_openai_error(post(client, alice, big), 413, "payload_too_large")
    assert llm.requests == []


def test_models_needs_a_key_and_lists_the_alias(client, alice):
    resp = client.get("/v1/models", HTTP_AUTHORIZATION=f"Bearer {alice.plain_key}")
    assert resp.status_code == 200
    assert resp.json()["object"] == "list" and [m["id"] for m in resp.json()["data"]] == ["continuum"]


def test_a_model_failure_mid_stream_is_an_error_event_then_done(server, llm, alice):
    llm.add(httpx.Response(503, json={"error": {"message": "overloaded"}}))
    with httpx.Client(timeout=30) as http:
        resp = http.post(f"{server}{URL}", headers={"Authorization": f"Bearer {alice.plain_key}"},
                         json={"model": "continuum", "stream": True, "user": "ada-7",
                               "messages": [{"role": "user", "content": "hi"}]})
    events = [e for e in resp.text.split("\n\n") if e.startswith("data: ")]
    assert events[-1] == "data: [DONE]"
    error = json.loads(events[-2][len("data: "):])["error"]
    assert error["code"] == "llm_unavailable" and error["type"] == "server_error"


def test_a_model_failure_without_streaming_is_an_openai_error(server, llm, alice):
    llm.add(httpx.Response(503, json={"error": {"message": "overloaded"}}))
    with pytest.raises(openai.InternalServerError) as exc:
        client_for(server, alice).chat.completions.create(model="continuum", user="ada-8",
                                                          messages=[{"role": "user", "content": "hi"}])
    assert exc.value.status_code == 503 and exc.value.body["code"] == "llm_unavailable"
