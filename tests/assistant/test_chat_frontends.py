"""What a chat frontend does beyond one request, through the official openai client against the live server: it
resends the conversation, retries, regenerates, edits, starts new chats and goes back to old ones, and may send an
Idempotency-Key. Nothing is stored twice, a new chat is a session of its own, and an unknown model is a 404."""
from __future__ import annotations

import httpx
import openai
import pytest

from memory.models import MemoryRecord, MemoryStatus
from orchestration.messages import messages_extract
from sessions.models import Message, Session
from tenants.models import EndUser

from .conftest import client_for
from .scripted_llm import answer

pytestmark = pytest.mark.django_db(transaction=True)

URL = "/v1/chat/completions"


def turns_of(session_id) -> list[tuple[str, str]]:
    return [(m.role, m.content) for m in Message.objects.unscoped().filter(session_id=session_id).order_by("seq")
            if m.role in ("user", "assistant") and not m.tool_calls]


def sessions_of(tenant, external_id: str) -> list[Session]:
    return list(Session.objects.unscoped().filter(tenant=tenant, user__external_id=external_id).order_by("opened_at"))


def numbered(llm):
    llm.then = lambda body: answer(f"answer {len(llm.requests)}")


def user(text: str) -> dict:
    return {"role": "user", "content": text}


def assistant(text: str) -> dict:
    return {"role": "assistant", "content": text}


# --- retries and regenerate --------------------------------------------------------------------------------------

def test_the_same_request_twice_keeps_one_turn_whose_answer_is_the_latest(server, llm, alice):
    numbered(llm)
    client = client_for(server, alice)
    ask = lambda messages: client.chat.completions.create(model="continuum", user="ui-1", messages=messages)  # noqa: E731
    ask([user("Plan a weekend in Porto.")])
    second = ask([user("Plan a weekend in Porto.")])  # a retry, or the UI's "regenerate"
    assert second.choices[0].message.content == "answer 2"
    [session] = sessions_of(alice, "ui-1")
    assert turns_of(session.pk) == [("user", "Plan a weekend in Porto."), ("assistant", "answer 2")]
    # The model was asked afresh, without the answer it replaces.
    assert "answer 1" not in str(llm.requests[1]["messages"])
    # The conversation goes on from the answer the client kept: nothing earlier is stored again.
    history = [user("Plan a weekend in Porto."), assistant("answer 2"), user("With a day trip.")]
    ask(history)
    ask(history)  # regenerate the second answer
    assert turns_of(session.pk) == [("user", "Plan a weekend in Porto."), ("assistant", "answer 2"),
                                    ("user", "With a day trip."), ("assistant", "answer 4")]
    assert len(sessions_of(alice, "ui-1")) == 1


def test_resent_turns_match_up_to_whitespace(server, llm, alice):
    llm.add(answer("Sure.\n\nHere is  the plan:   go early."), answer("ok"))
    client = client_for(server, alice)
    client.chat.completions.create(model="continuum", user="ui-2", messages=[user("  Plan my Monday. ")])
    # The UI shows the answer re-flowed and trims the user's text before sending them back.
    client.chat.completions.create(model="continuum", user="ui-2", messages=[
        user("Plan my Monday."), assistant("Sure. Here is the plan: go early."), user("Thanks!")])
    [session] = sessions_of(alice, "ui-2")
    assert [role for role, _ in turns_of(session.pk)] == ["user", "assistant", "user", "assistant"]
    assert turns_of(session.pk)[2:] == [("user", "Thanks!"), ("assistant", "ok")]


def test_a_regenerate_takes_back_the_memories_drawn_from_the_answer_it_replaces(server, llm, alice):
    llm.add(answer("The Ribeira district has the best river views in Porto."), answer("Try the Foz seaside."))
    client = client_for(server, alice)
    client.chat.completions.create(model="continuum", user="ui-3", messages=[user("Where should I stay in Porto?")])
    [session] = sessions_of(alice, "ui-3")
    first_answer = Message.objects.unscoped().get(session=session, role="assistant")
    messages_extract(tenant_id=alice.pk, message_ids=[m.pk for m in Message.objects.unscoped().filter(session=session)],
                     allow_llm_failure=True)  # the scripted model answers no extraction calls: rules only
    drawn = MemoryRecord.objects.unscoped().filter(source_message=first_answer)
    assert drawn.exists()  # what the assistant said is kept as an episode (the tenant's default)
    drawn_ids = list(drawn.values_list("pk", flat=True))
    client.chat.completions.create(model="continuum", user="ui-3", messages=[user("Where should I stay in Porto?")])
    assert turns_of(session.pk) == [("user", "Where should I stay in Porto?"), ("assistant", "Try the Foz seaside.")]
    assert set(MemoryRecord.objects.unscoped().filter(pk__in=drawn_ids).values_list("status", flat=True)) == {
        MemoryStatus.DELETED}


def test_the_openai_clients_own_retry_stores_the_turn_once(server, llm, alice):
    llm.add(httpx.Response(503, json={"error": {"message": "overloaded"}}), answer("Booked."))
    client = client_for(server, alice).with_options(max_retries=2)
    history = [user("I fly from Lisbon."), assistant("Noted."), user("Book the 9am flight.")]
    completion = client.chat.completions.create(model="continuum", user="ui-4", messages=history)
    assert completion.choices[0].message.content == "Booked."
    [session] = sessions_of(alice, "ui-4")
    assert turns_of(session.pk) == [("user", "I fly from Lisbon."), ("assistant", "Noted."),
                                    ("user", "Book the 9am flight."), ("assistant", "Booked.")]


def test_a_client_that_sends_only_its_newest_message_to_a_named_session_says_the_same_thing_twice(server, llm, alice):
    numbered(llm)
    client = client_for(server, alice)
    raw = client.chat.completions.with_raw_response.create(model="continuum", user="ui-5",
                                                           messages=[user("Write the intro.")])
    session_id = raw.headers["X-Session-Id"]
    for _ in range(2):
        client.chat.completions.create(model="continuum", user="ui-5", messages=[user("continue")],
                                       extra_headers={"X-Session-Id": session_id})
    assert turns_of(session_id) == [("user", "Write the intro."), ("assistant", "answer 1"), ("user", "continue"),
                                    ("assistant", "answer 2"), ("user", "continue"), ("assistant", "answer 3")]


# --- a new chat is a new session -----------------------------------------------------------------------------------

def test_a_new_chat_opens_a_session_of_its_own_and_an_old_chat_comes_back_without_being_read_twice(server, llm,
                                                                                                    alice):
    numbered(llm)
    client = client_for(server, alice)
    ask = lambda messages: client.chat.completions.with_raw_response.create(  # noqa: E731
        model="continuum", user="ui-6", messages=messages).headers["X-Session-Id"]
    chat_a = [user("My cat Miso is sick."), assistant("answer 1"), user("Which vet is open on Sunday?")]
    first = ask(chat_a[:1])
    assert ask(chat_a) == first
    # "New chat": its first message does not continue the open session.
    second = ask([user("Draft an email to my landlord.")])
    assert second != first
    old, new = Session.objects.unscoped().get(pk=first), Session.objects.unscoped().get(pk=second)
    assert (old.state, old.close_reason) == ("closed", "new_chat")
    assert new.previous_id == old.pk  # it starts from the old session's bridge
    # The model did not see the other chat word for word.
    assert not any("Miso" in str(m.get("content")) for m in llm.requests[-1]["messages"])
    assert turns_of(second) == [("user", "Draft an email to my landlord."), ("assistant", "answer 3")]
    # Back to the first chat: a session of its own again, whose earlier turns are there for the model but are not
    # read for memories a second time.
    third = ask([*chat_a, assistant("answer 2"), user("And on Monday?")])
    assert third not in (first, second)
    rows = list(Message.objects.unscoped().filter(session_id=third).order_by("seq"))
    assert [(m.content, m.extracted_at is None) for m in rows] == [
        ("My cat Miso is sick.", False), ("answer 1", False), ("Which vet is open on Sunday?", False),
        ("answer 2", False), ("And on Monday?", True), ("answer 4", True)]
    assert any("Miso" in str(m.get("content")) for m in llm.requests[-1]["messages"])


def test_an_edited_message_branches_the_chat_in_its_session(server, llm, alice):
    numbered(llm)
    client = client_for(server, alice)
    history = [user("Suggest a name for my bakery."), assistant("answer 1"), user("Something French.")]
    client.chat.completions.create(model="continuum", user="ui-7", messages=history[:1])
    client.chat.completions.create(model="continuum", user="ui-7", messages=history)
    client.chat.completions.create(model="continuum", user="ui-7", messages=[
        *history, assistant("answer 2"), user("Shorter, please.")])
    # The user edits their second message: the conversation up to it is the session's, the edit a new turn.
    client.chat.completions.create(model="continuum", user="ui-7", messages=[*history[:2], user("Something Italian.")])
    [session] = sessions_of(alice, "ui-7")
    assert [text for _, text in turns_of(session.pk)][-2:] == ["Something Italian.", "answer 4"]
    assert [text for _, text in turns_of(session.pk)].count("Suggest a name for my bakery.") == 1


def test_the_tenant_setting_keeps_every_request_in_the_open_session(server, llm, alice):
    alice.chat_sessions = alice.ChatSessions.OPEN_SESSION
    alice.save(update_fields=["chat_sessions"])
    numbered(llm)
    client = client_for(server, alice)
    client.chat.completions.create(model="continuum", user="ui-8", messages=[user("First question.")])
    client.chat.completions.create(model="continuum", user="ui-8", messages=[user("Unrelated second one.")])
    [session] = sessions_of(alice, "ui-8")
    assert len(turns_of(session.pk)) == 4


# --- Idempotency-Key ---------------------------------------------------------------------------------------------

def test_an_idempotency_key_returns_the_first_response_and_runs_the_turn_once(server, llm, alice):
    numbered(llm)
    client = client_for(server, alice)
    key = {"Idempotency-Key": "order-7f3a"}
    first = client.chat.completions.with_raw_response.create(model="continuum", user="ui-9", extra_headers=key,
                                                             messages=[user("Order the usual.")])
    again = client.chat.completions.with_raw_response.create(model="continuum", user="ui-9", extra_headers=key,
                                                             messages=[user("Order the usual.")])
    assert again.headers["Idempotent-Replayed"] == "true"
    assert again.parse().id == first.parse().id and again.parse().choices[0].message.content == "answer 1"
    assert again.headers["X-Session-Id"] == first.headers["X-Session-Id"]
    assert len(llm.requests) == 1
    assert turns_of(first.headers["X-Session-Id"]) == [("user", "Order the usual."), ("assistant", "answer 1")]
    with pytest.raises(openai.UnprocessableEntityError) as exc:
        client.chat.completions.create(model="continuum", user="ui-9", extra_headers=key,
                                       messages=[user("Order something else.")])
    assert exc.value.body["code"] == "idempotency_key_reused"
    # Another user's key of the same name is theirs alone.
    other = client.chat.completions.create(model="continuum", user="ui-9b", extra_headers=key,
                                           messages=[user("Order the usual.")])
    assert other.choices[0].message.content == "answer 2"


def test_a_streamed_response_is_replayed_as_it_was_streamed(server, llm, alice):
    numbered(llm)
    client = client_for(server, alice)
    key = {"Idempotency-Key": "stream-1"}

    def streamed() -> str:
        chunks = list(client.chat.completions.create(model="continuum", user="ui-10", stream=True,
                                                     extra_headers=key, messages=[user("Tell me a fact.")]))
        return "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)

    assert streamed() == streamed() == "answer 1"
    assert len(llm.requests) == 1


def test_a_failed_turn_frees_its_idempotency_key(server, llm, alice):
    llm.add(httpx.Response(503, json={"error": {"message": "overloaded"}}), answer("Done."))
    client = client_for(server, alice)
    key = {"Idempotency-Key": "retry-me"}
    with pytest.raises(openai.APIStatusError):
        client.chat.completions.create(model="continuum", user="ui-11", extra_headers=key, messages=[user("Go.")])
    done = client.chat.completions.create(model="continuum", user="ui-11", extra_headers=key, messages=[user("Go.")])
    assert done.choices[0].message.content == "Done."


def test_a_malformed_idempotency_key_is_a_400_before_anything_is_stored(server, llm, alice):
    response = httpx.post(f"{server}{URL}", headers={"Authorization": f"Bearer {alice.plain_key}",
                                                     "Idempotency-Key": "x" * 300},
                          json={"model": "continuum", "user": "ui-12", "messages": [user("hi")]})
    assert response.status_code == 400 and response.json()["error"]["code"] == "invalid_idempotency_key"
    assert not EndUser.objects.unscoped().filter(external_id="ui-12").exists()


# --- models --------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("path, body", [
    ("/v1/chat/completions", {"messages": [user("hi")]}),
    ("/v1/responses", {"input": "hi"}),
])
def test_an_unknown_model_is_a_404_model_not_found_and_nothing_is_created(server, llm, alice, path, body):
    response = httpx.post(f"{server}{path}", headers={"Authorization": f"Bearer {alice.plain_key}"},
                          json={"model": "gpt-nope", "user": "ui-13", **body})
    assert response.status_code == 404
    assert response.json()["error"] | {"message": None} == {
        "message": None, "type": "invalid_request_error", "code": "model_not_found", "param": "model"}
    assert "gpt-nope" in response.json()["error"]["message"]
    assert not EndUser.objects.unscoped().filter(external_id="ui-13").exists()
    assert llm.requests == []


def test_model_aliases_are_listed_and_answered(server, llm, alice, settings):
    settings.ASSISTANT_MODEL_ALIASES = ["gpt-4o-mini"]
    llm.add(answer("Hello."))
    client = client_for(server, alice)
    assert [m.id for m in client.models.list().data] == ["continuum", "gpt-4o-mini"]
    completion = client.chat.completions.create(model="gpt-4o-mini", user="ui-14", messages=[user("hi")])
    assert completion.model == "gpt-4o-mini" and completion.choices[0].message.content == "Hello."
