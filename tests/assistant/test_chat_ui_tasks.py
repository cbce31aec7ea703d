"""A chat UI's own background tasks (title, tags, follow-ups, queries, autocomplete, emoji) through the live
/v1/chat/completions: answered by the model without memory, stored as no turn, no memory, no session change, and
behind the user's turn on the model. Open WebUI's requests are built from its task prompts as it fills them."""
from __future__ import annotations

import json
import threading
import time

import httpx
import pytest

from assistant.chat_tasks import chat_task_answer, chat_task_of
from infra.errors import ValidationFailed
from infra.llm import llm_priority
from memory.models import MemoryRecord
from orchestration.messages import messages_extract
from sessions.models import Message, Session
from tenants.models import EndUser

from . import open_webui_tasks as owui
from .conftest import client_for
from .scripted_llm import answer

URL = "/v1/chat/completions"
CHAT_1 = "My sister Priya lives in Lisbon and I am visiting her in March."
ANSWER_1 = "Lovely! March is a fine time for Lisbon."
CHAT_2 = "What should I pack?"
ANSWER_2 = "Light layers and comfortable shoes."


def user(text: str) -> dict:
    return {"role": "user", "content": text}


def assistant(text: str) -> dict:
    return {"role": "assistant", "content": text}


def task_replies(body: dict) -> dict:
    """The scripted model: JSON for a task prompt, a numbered answer for a turn (which comes with tools)."""
    if body.get("tools"):
        text = str(body["messages"][-1]["content"])
        return answer(ANSWER_1 if text == CHAT_1 else ANSWER_2)
    prompt = str(body["messages"][-1]["content"])
    for key, reply in (("title", {"title": "✈️ Lisbon Visit"}), ("follow_ups", {"follow_ups": ["What to see?"]}),
                       ("tags", {"tags": ["Travel"]}), ("queries", {"queries": ["Lisbon in March"]})):
        if f'"{key}"' in prompt:
            return answer(json.dumps(reply))
    return answer("😊")


def stored_texts(tenant) -> list[str]:
    return list(Message.objects.unscoped().filter(tenant=tenant).order_by("created_at", "seq")
                .values_list("content", flat=True))


# --- recognising a task ----------------------------------------------------------------------------------------------

CHAT = [user(CHAT_1), assistant(ANSWER_1)]


@pytest.mark.parametrize("kind", sorted(owui.TEMPLATES))
def test_each_open_webui_task_prompt_is_recognised_by_its_shape(kind):
    [message] = owui.task_request(owui.TEMPLATES[kind], CHAT, prompt="Pack light", kind="General")
    assert chat_task_of(header=None, metadata=None, user_input=message["content"], earlier=[]) == kind


@pytest.mark.parametrize("text", [
    "### Task: book the flight to Lisbon for March.",  # a heading, but no chat inside it
    "Here is our chat so far:\n<chat_history>\nUSER: hi\n</chat_history>\nWhat did I say?",  # a chat, no task heading
    CHAT_1,
])
def test_a_users_own_message_is_a_turn(text):
    assert chat_task_of(header=None, metadata=None, user_input=text, earlier=[]) is None


def test_a_task_prompt_inside_a_conversation_is_the_users_turn():
    """A user who pastes a task prompt into their chat is talking to the assistant: only a lone message is a task."""
    prompt = owui.filled(owui.TITLE, CHAT)
    assert chat_task_of(header=None, metadata=None, user_input=prompt, earlier=[("user", "hi"), ("assistant", "hello")]
                        ) is None


def test_a_client_marks_a_task_or_a_turn_in_a_header_or_in_metadata():
    assert chat_task_of(header="title", metadata=None, user_input="Name this chat.", earlier=[("user", "x")]) == "title"
    assert chat_task_of(header=None, metadata={"continuum_task": "Summary"}, user_input="Sum it up.", earlier=[]) \
        == "summary"
    assert chat_task_of(header=None, metadata={"task": "tags_generation"}, user_input="tags?", earlier=[]) == "tags"
    prompt = owui.filled(owui.TITLE, CHAT)
    assert chat_task_of(header="none", metadata=None, user_input=prompt, earlier=[]) is None  # the client knows
    with pytest.raises(ValidationFailed):
        chat_task_of(header="a title, please", metadata=None, user_input="x", earlier=[])


# --- Open WebUI with its defaults on ---------------------------------------------------------------------------------

@pytest.mark.django_db(transaction=True)
def test_open_webui_with_its_task_defaults_keeps_one_session_holding_only_the_users_turns(server, llm, alice):
    """Measured with Open WebUI's defaults before: task prompts stored as the user's messages, memories drawn from
    them, and the follow-up and tags requests each closed the open session as a new chat (three for one chat)."""
    llm.then = task_replies
    http = httpx.Client(base_url=server, timeout=60, headers={
        "Authorization": f"Bearer {alice.plain_key}", "X-User-Id": "owui-user-1", "X-OpenWebUI-Chat-Id": "chat-1"})

    def chat(messages):
        resp = http.post(URL, json={"model": "continuum", "stream": True, "messages": messages})
        assert resp.status_code == 200, resp.text
        return resp

    def task(template, messages, **kwargs):
        resp = http.post(URL, json={"model": "continuum", "stream": False, "max_completion_tokens": 1000,
                                    "messages": owui.task_request(template, messages, **kwargs)})
        assert resp.status_code == 200, resp.text
        return resp

    chat([user(CHAT_1)])
    history = [user(CHAT_1), assistant(ANSWER_1)]
    title = task(owui.TITLE, history)
    assert json.loads(title.json()["choices"][0]["message"]["content"]) == {"title": "✈️ Lisbon Visit"}
    assert title.json()["continuum"] == {"task": "title", "stored": False}
    assert "X-Session-Id" not in title.headers and title.headers["X-Continuum-Task"] == "title"
    follow_ups = task(owui.FOLLOW_UPS, history)
    assert json.loads(follow_ups.json()["choices"][0]["message"]["content"]) == {"follow_ups": ["What to see?"]}
    task(owui.TAGS, history)
    task(owui.QUERIES, [*history, user(CHAT_2)])
    task(owui.EMOJI, history, prompt=ANSWER_1)
    task(owui.AUTOCOMPLETE, history, prompt="Should I bring", kind="General")
    chat([*history, user(CHAT_2)])
    task(owui.FOLLOW_UPS, [*history, user(CHAT_2), assistant(ANSWER_2)])

    [session] = Session.objects.unscoped().filter(tenant=alice)
    assert session.state == Session.State.OPEN
    assert [(m.role, m.content) for m in Message.objects.unscoped().filter(session=session).order_by("seq")
            if m.role in ("user", "assistant") and not m.tool_calls] == [
        ("user", CHAT_1), ("assistant", ANSWER_1), ("user", CHAT_2), ("assistant", ANSWER_2)]
    assert not any("### Task" in text or "<chat_history>" in text for text in stored_texts(alice))

    # The model read each task as the client sent it: no memory, no tools, a small answer.
    tasks = [r for r in llm.requests if not r.get("tools")]
    assert len(tasks) == 7
    for body in tasks:
        assert len(body["messages"]) == 1 and body["messages"][0]["role"] == "user"
        assert body["max_tokens"] <= 160 and not body.get("stream")
    turns = [r for r in llm.requests if r.get("tools")]
    assert len(turns) == 2 and not any("### Task" in json.dumps(r["messages"]) for r in turns)

    # Memories come from the user's turns only.
    messages_extract(tenant_id=alice.pk, message_ids=list(Message.objects.unscoped().filter(tenant=alice)
                                                          .values_list("pk", flat=True)), allow_llm_failure=True)
    texts = list(MemoryRecord.objects.unscoped().filter(tenant=alice).values_list("text", flat=True))
    assert any("Lisbon" in t for t in texts)
    assert not any("Task" in t or "chat_history" in t or "title" in t.lower() for t in texts), texts


@pytest.mark.django_db(transaction=True)
def test_a_marked_task_is_answered_streamed_and_touches_no_user_or_session(server, llm, alice):
    llm.add(answer("Lisbon trip"))
    http = httpx.Client(base_url=server, timeout=60, headers={"Authorization": f"Bearer {alice.plain_key}"})
    resp = http.post(URL, headers={"X-Continuum-Task": "title"}, json={
        "model": "continuum", "user": "app-user-9", "stream": True, "stream_options": {"include_usage": True},
        "max_tokens": 20, "messages": [{"role": "system", "content": "Name the chat in three words."},
                                       user(CHAT_1), assistant(ANSWER_1), user("Name this chat.")]})
    assert resp.status_code == 200 and resp.headers["X-Continuum-Task"] == "title"
    frames = [json.loads(line[6:]) for line in resp.text.splitlines()
              if line.startswith("data: ") and line != "data: [DONE]"]
    assert "".join(f["choices"][0]["delta"].get("content") or "" for f in frames if f["choices"]) == "Lisbon trip"
    assert [f["continuum"] for f in frames if "continuum" in f] == [{"task": "title", "stored": False}]
    assert frames[-1]["usage"]["total_tokens"] == 18
    # The client's own messages, as sent, and its smaller cap.
    assert [m["role"] for m in llm.requests[0]["messages"]] == ["system", "user", "assistant", "user"]
    assert llm.requests[0]["max_tokens"] == 20
    assert not EndUser.objects.unscoped().filter(tenant=alice).exists()
    assert not Session.objects.unscoped().filter(tenant=alice).exists()


@pytest.mark.django_db(transaction=True)
def test_a_task_in_the_openai_clients_metadata_is_kept_out_and_a_marked_turn_is_a_turn(server, llm, alice):
    llm.add(answer("Travel"), answer("Noted."))
    client = client_for(server, alice)
    tags = client.chat.completions.create(model="continuum", user="app-user-10", messages=[user("Tag this chat.")],
                                          metadata={"continuum_task": "tags"})
    assert tags.choices[0].message.content == "Travel"
    assert not Session.objects.unscoped().filter(tenant=alice).exists()
    prompt = owui.filled(owui.TITLE, CHAT)
    turn = client.chat.completions.with_raw_response.create(model="continuum", user="app-user-10",
                                                             messages=[user(prompt)],
                                                             extra_headers={"X-Continuum-Task": "none"})
    assert turn.headers["X-Session-Id"]
    assert stored_texts(alice)[0] == prompt


# --- a turn first ----------------------------------------------------------------------------------------------------

@pytest.mark.django_db
def test_a_task_waits_for_the_users_turn_on_the_model(llm, alice, settings):
    """On a local model a title request sent with the user's message ran beside the turn and made it run out of
    time: a task waits while a turn holds the model, as background work does."""
    settings.LLM_BACKGROUND_CONCURRENCY, settings.LLM_BACKGROUND_HOLD_SECONDS = 1, 0.1  # the task's hold is its own
    llm.add(answer('{"title": "Lisbon"}'))
    events: list[str] = []
    in_turn, release = threading.Event(), threading.Event()

    def turn():
        with llm_priority("turn", seconds=30):
            events.append("turn starts")
            in_turn.set()
            release.wait(5)
            events.append("turn ends")

    def task():
        chat_task_answer(tenant=alice, kind="title", messages=[user(owui.filled(owui.TITLE, CHAT))])
        events.append("task answered")

    t = threading.Thread(target=turn)
    t.start()
    in_turn.wait(5)
    b = threading.Thread(target=task)
    b.start()
    time.sleep(0.8)  # well past the background hold: a task waits for as long as a turn may run
    assert events == ["turn starts"]
    release.set()
    t.join(5), b.join(5)
    assert events == ["turn starts", "turn ends", "task answered"]
