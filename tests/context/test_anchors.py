"""Summary anchors: folding every N turns or past a token threshold, extractive and abstractive."""
from __future__ import annotations

import json

import httpx
import pytest
import respx

from context.anchors import anchor_plan, anchors_fold, extractive_summary, sentence_score
from context.buffer import buffer_get
from context.models import SummaryAnchor
from context.tasks import anchor_fold_task
from infra.redis_client import Keys, get_redis
from orchestration.messages import messages_append
from sessions.services import NewMessage

pytestmark = pytest.mark.django_db(transaction=True)

USER_TURNS = [
    "Hi!",
    "I need a flight from SFO to New York next Tuesday.",
    "I prefer aisle seats and I never fly United.",
    "ok",
    "My budget is $400 at most.",
    "Thanks",
    "Let's go with the Delta option at 7am.",
    "Can you also find a hotel near Times Square?",
    "cool",
    "I'd rather stay somewhere quiet.",
    "sure",
    "What about breakfast, is it included?",
    "Great, thanks!",
    "One more thing.",
]


def ids(session) -> dict:
    return {"tenant_id": str(session.tenant_id), "user_id": str(session.user_id), "session_id": str(session.pk)}


def converse(tenant, session, user_turns, reply="Noted."):
    for text in user_turns:
        messages_append(tenant=tenant, session_id=session.pk, enqueue_extraction=False,
                        items=[NewMessage(role="user", content=text), NewMessage(role="assistant", content=reply)])


def test_sentence_scores_prefer_goals_preferences_decisions_numbers_questions():
    informative = ["I need a flight to Boston.", "I prefer window seats.", "Let's book the 9am one.",
                   "It has to be under $300.", "Is breakfast included?"]
    chatter = ["ok", "Thanks!", "great", "hello"]
    assert all(sentence_score(s) >= 2 for s in informative)
    assert all(sentence_score(s) == 0 for s in chatter)


def test_extractive_summary_keeps_informative_sentences_in_order_within_budget():
    text = extractive_summary(USER_TURNS, max_tokens=60)
    assert "I need a flight from SFO to New York next Tuesday." in text
    assert "Hi!" not in text and "Thanks" not in text and "cool" not in text
    assert text.index("SFO") < text.index("$400") < text.index("Delta")
    from infra.tokens import count_tokens

    assert count_tokens(text) <= 60
    assert count_tokens(extractive_summary(USER_TURNS, max_tokens=15)) <= 15


def test_every_n_turns_the_oldest_fold_into_a_persisted_anchor(alice, alice_session, settings):
    settings.CONTINUUM_ANCHOR_EVERY_TURNS = 12
    settings.CONTINUUM_ANCHOR_KEEP_TURNS = 2
    converse(alice, alice_session, USER_TURNS[:13])
    assert not SummaryAnchor.objects.unscoped().filter(session=alice_session).exists()  # 13 - 2 < 12
    converse(alice, alice_session, USER_TURNS[13:])
    anchor = SummaryAnchor.objects.unscoped().get(session=alice_session)
    assert (anchor.first_seq, anchor.last_seq, anchor.first_turn, anchor.last_turn) == (1, 24, 1, 12)
    assert anchor.method == "extractive"
    assert "SFO" in anchor.text and "aisle" in anchor.text and "$400" in anchor.text
    b = buffer_get(**ids(alice_session))
    assert [a["first_seq"] for a in b.anchors] == [1]
    assert [m["seq"] for m in b.recent] == [25, 26, 27, 28]  # the two kept turns stay verbatim
    assert b.turns == 14 and b.anchored_seq == 24


def test_past_the_token_threshold_turns_fold_early_but_never_the_newest(alice, alice_session, settings):
    settings.CONTINUUM_ANCHOR_EVERY_TURNS = 50
    settings.CONTINUUM_ANCHOR_TOKEN_THRESHOLD = 300
    long = "I need to compare these numbers: " + " ".join(str(i) for i in range(120))
    converse(alice, alice_session, [long, long, long])
    anchors = list(SummaryAnchor.objects.unscoped().filter(session=alice_session).order_by("first_seq"))
    assert anchors, "a fold past the threshold was expected"
    b = buffer_get(**ids(alice_session))
    assert b.recent and b.recent[-1]["seq"] == 6
    assert anchors[-1].last_seq < 5  # the newest turn (seq 5, 6) is never folded


def test_fold_plan_is_none_when_nothing_is_due(alice, alice_session):
    converse(alice, alice_session, ["I need a car."])
    assert anchor_plan(tenant_id=alice_session.tenant_id, session_id=alice_session.pk) is None
    assert anchors_fold(**ids(alice_session)) == []


def test_anchors_survive_a_lost_buffer(alice, alice_session, settings):
    from context.buffer import buffer_delete

    settings.CONTINUUM_ANCHOR_EVERY_TURNS = 3
    settings.CONTINUUM_ANCHOR_KEEP_TURNS = 1
    converse(alice, alice_session, USER_TURNS[:8])
    before = buffer_get(**ids(alice_session))
    buffer_delete(**ids(alice_session))
    after = buffer_get(**ids(alice_session))
    assert after.anchors == before.anchors and after.recent == before.recent and after.turns == before.turns == 8


@respx.mock
def test_abstractive_anchor_with_an_llm(alice, alice_session, settings):
    settings.LLM_BASE_URL = "http://llm.test/v1"
    settings.LLM_MODEL = "test-model"
    answer = {"summary": "User flies SFO to NYC Tuesday, aisle, no United, under $400.",
              "decisions": ["Delta 7am"], "open_questions": ["hotel near Times Square?"]}
    route = respx.post("http://llm.test/v1/chat/completions").mock(return_value=httpx.Response(200, json={
        "id": "x", "object": "chat.completion", "created": 0, "model": "test-model",
        "choices": [{"index": 0, "finish_reason": "stop",
                     "message": {"role": "assistant", "content": json.dumps(answer)}}]}))
    settings.CONTINUUM_ANCHOR_EVERY_TURNS = 12
    settings.CONTINUUM_ANCHOR_KEEP_TURNS = 2
    # With an LLM the append only queues the fold (the broker is real but no worker runs here) ...
    converse(alice, alice_session, USER_TURNS)
    assert not SummaryAnchor.objects.unscoped().filter(session=alice_session).exists()
    queued = Keys.anchor_queued_flag(alice.pk, alice_session.user_id, alice_session.pk)
    assert get_redis().exists(queued)  # queued once, not once per append
    # ... and the task folds abstractively (run here in-process; JSON round trip of its argument).
    args = json.loads(json.dumps([str(alice_session.tenant_id), str(alice_session.pk)]))
    assert anchor_fold_task.apply(args=args).get() == 1
    made = list(SummaryAnchor.objects.unscoped().filter(session=alice_session))
    assert len(made) == 1 and made[0].method == "abstractive"
    assert made[0].text.startswith("User flies SFO to NYC") and "Delta 7am" in made[0].text
    assert not get_redis().exists(queued)
    assert buffer_get(**ids(alice_session)).anchors[0]["method"] == "abstractive"
    body = json.loads(route.calls[0].request.content)
    assert body["response_format"]["type"] == "json_schema"
    assert "SFO" in body["messages"][1]["content"]


@respx.mock
def test_a_failing_llm_falls_back_to_extractive(alice, alice_session, settings):
    settings.LLM_BASE_URL = "http://llm.test/v1"
    settings.LLM_MODEL = "test-model"
    settings.LLM_MAX_RETRIES = 0
    respx.post("http://llm.test/v1/chat/completions").mock(return_value=httpx.Response(500, json={"error": "x"}))
    settings.CONTINUUM_ANCHOR_EVERY_TURNS = 12
    settings.CONTINUUM_ANCHOR_KEEP_TURNS = 2
    converse(alice, alice_session, USER_TURNS)
    made = anchors_fold(**ids(alice_session))
    assert made and made[0].method == "extractive" and "SFO" in made[0].text


@respx.mock
def test_an_abstractive_anchor_keeps_only_what_the_folded_turns_support(alice, alice_session, settings):
    settings.LLM_BASE_URL, settings.LLM_MODEL = "http://llm.test/v1", "test-model"
    answer = {"summary": "User flies SFO to New York next Tuesday. The assistant booked a Marriott suite with a spa.",
              "decisions": [], "open_questions": []}
    respx.post("http://llm.test/v1/chat/completions").mock(return_value=httpx.Response(200, json={
        "id": "x", "object": "chat.completion", "created": 0, "model": "test-model",
        "choices": [{"index": 0, "finish_reason": "stop",
                     "message": {"role": "assistant", "content": json.dumps(answer)}}]}))
    settings.CONTINUUM_ANCHOR_EVERY_TURNS = 12
    settings.CONTINUUM_ANCHOR_KEEP_TURNS = 2
    converse(alice, alice_session, USER_TURNS)
    made = anchors_fold(**ids(alice_session), use_llm=True)
    assert made and made[0].method == "abstractive"
    assert made[0].text == "User flies SFO to New York next Tuesday."
