"""The LLM adapter against a model over HTTP (respx): bounded tokens per kind, validated and repaired structured
outputs, and background calls held back while a user's call is in flight."""
from __future__ import annotations

import json
import threading
import time

import httpx
import pytest
import respx

from infra import llm as llm_module
from infra.llm import StructuredOutputInvalid, llm_priority, structured_completion

BASE_URL = "http://llm.test/v1"
SCHEMA = {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"],
          "additionalProperties": False}


def completion(content: str) -> dict:
    return {"id": "c1", "object": "chat.completion", "created": 0, "model": "m",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}


@pytest.fixture
def model(settings):
    settings.LLM_BASE_URL, settings.LLM_MODEL, settings.LLM_MAX_RETRIES = BASE_URL, "m", 0
    llm_module._client.cache_clear()
    replies: list[str] = []
    sent: list[dict] = []

    def reply(request: httpx.Request) -> httpx.Response:
        sent.append(json.loads(request.content))
        return httpx.Response(200, json=completion(replies.pop(0)))

    with respx.mock(assert_all_called=False) as router:
        router.post(f"{BASE_URL}/chat/completions").mock(side_effect=reply)
        yield replies, sent
    llm_module._client.cache_clear()


def ask(kind: str = "default") -> dict:
    return structured_completion(system="s", user="u", schema_name="q", schema=SCHEMA, kind=kind)


def test_each_call_kind_sends_its_own_max_tokens(model, settings):
    replies, sent = model
    settings.LLM_MAX_TOKENS = {"default": 500, "extraction": 300, "rewrite": 40}
    replies += ['{"query": "a"}'] * 3
    ask("extraction"), ask("rewrite"), ask("bridge")
    assert [b["max_tokens"] for b in sent] == [300, 40, 500]


BOUNDED = {"type": "object", "required": ["items"], "additionalProperties": False,
           "properties": {"items": {"type": "array", "maxItems": 2, "items": {"type": "string", "maxLength": 5}}}}


def test_length_bounds_reach_the_model_only_when_the_setting_says_so(model, settings):
    replies, sent = model
    replies += ['{"items": ["a very long item", "b", "c"]}', '{"items": ["a", "b"]}']
    settings.LLM_SCHEMA_LENGTH_LIMITS = False
    # Left out of the request, a bound is not held against the answer either.
    assert structured_completion(system="s", user="u", schema_name="b", schema=BOUNDED) == {
        "items": ["a very long item", "b", "c"]}
    settings.LLM_SCHEMA_LENGTH_LIMITS = True
    structured_completion(system="s", user="u", schema_name="b", schema=BOUNDED)
    without, with_bounds = (b["response_format"]["json_schema"]["schema"]["properties"]["items"] for b in sent)
    assert "maxItems" not in without and "maxLength" not in without["items"]
    assert with_bounds["maxItems"] == 2 and with_bounds["items"]["maxLength"] == 5


def test_an_answer_past_a_bound_that_was_sent_takes_the_rule_path(model, settings):
    replies, _ = model
    settings.LLM_SCHEMA_LENGTH_LIMITS = True
    replies += ['{"items": ["a", "b", "c"]}'] * 2
    with pytest.raises(StructuredOutputInvalid):
        structured_completion(system="s", user="u", schema_name="b", schema=BOUNDED)


def test_broken_json_gets_one_repair(model):
    replies, _ = model
    replies.append('{"query": "flights to Newark",')  # cut off by max_tokens
    assert ask() == {"query": "flights to Newark"}


def test_an_answer_that_does_not_fit_the_schema_is_refused(model):
    replies, _ = model
    replies += ['{"query": 3}', '{"q": "x"}', "I think the query is flights", ""]
    for _ in range(4):
        with pytest.raises(StructuredOutputInvalid):
            ask()


def test_extraction_falls_back_to_the_rules_when_the_model_answers_off_schema(model):
    from memory.extraction.llm_extract import llm_extract

    replies, sent = model
    for reply in ('{"stated": [{"kind": "fact", "text": "x"}], "implied": []}', "not json"):  # fields missing; not JSON
        replies.append(reply)
        assert llm_extract("I live in Paris.", who="Dana") == []  # nothing from the model, and no error
    assert len(sent) == 2  # one call per message


def test_extraction_keeps_only_memories_that_share_a_word_with_the_message(model):
    from memory.extraction.llm_extract import llm_extract

    replies, _ = model

    def memories(*items):
        return [{"kind": k, "text": t, "subject": "", "value": "", "confidence": 0.9} for k, t in items]

    replies.append(json.dumps({
        "stated": memories(("fact", "Dana is flying from SFO next Tuesday."), ("fact", "Dana lives in Berlin.")),
        "implied": memories(("preference", "Dana prefers quiet rooms."), ("preference", "Dana likes cheap flights."))}))
    found = llm_extract("I need a flight from SFO to NYC next Tuesday, under $400.", who="Dana")
    # "quiet rooms" is the prompt's own example and Berlin a guess: neither has a word of the message.
    assert [c.text for c in found] == ["Dana is flying from SFO next Tuesday.", "Dana likes cheap flights."]


def test_an_extraction_cut_off_inside_what_was_stated_keeps_the_complete_statements(model):
    from memory.extraction.llm_extract import llm_extract

    replies, _ = model
    item = {"kind": "fact", "subject": "", "value": "", "confidence": 0.9}
    complete = json.dumps({"stated": [dict(item, text="Dana's invoices table has a currency column.")]})
    replies.append(complete[:-2] + ', {"kind": "fact", "text": "Dana renamed due_o')  # max_tokens hit mid-item
    found = llm_extract("The invoices table now has a currency column, and I renamed due_on to due_date.", who="Dana")
    assert [c.text for c in found] == ["Dana's invoices table has a currency column."]


def test_an_extraction_cut_off_as_its_implied_list_began_keeps_what_was_stated(model):
    from memory.extraction.llm_extract import llm_extract

    replies, _ = model
    item = {"kind": "fact", "subject": "", "value": "", "confidence": 0.9}
    stated = json.dumps([dict(item, text="Dana went to a counseling workshop last Friday.")])
    replies.append('{"stated": ' + stated + ', "implied": ')  # max_tokens hit right after the key
    found = llm_extract("Last Friday I went to a counseling workshop and it was really enlightening.", who="Dana")
    assert [c.text for c in found] == ["Dana went to a counseling workshop last Friday."]


def test_a_statement_the_model_wrote_as_the_value_is_the_memory(model):
    """A small model put a fragment in `text` and the statement in `value`; a value that does not name the user is
    never taken for the statement."""
    from memory.extraction.llm_extract import llm_extract

    replies, _ = model
    replies.append(json.dumps({"stated": [
        {"kind": "fact", "text": "my husband and kids", "subject": "Dana",
         "value": "Dana's husband and kids keep her motivated", "confidence": 0.9},
        {"kind": "goal", "text": "kids counseling", "subject": "",
         "value": "trans people, mental health, counseling, kids", "confidence": 0.9}]}))
    found = llm_extract("I'm lucky to have my husband and kids; they keep me motivated. Counseling for kids next.",
                        who="Dana")
    assert [(c.text, c.subject, c.value) for c in found][0] == ("Dana's husband and kids keep her motivated", "", "")
    assert found[1].text == "kids counseling"  # left as it was (the pipeline drops it as a fragment)


def test_the_user_is_named_in_what_the_model_extracts(model):
    from memory.extraction.llm_extract import llm_extract

    replies, _ = model
    replies.append(json.dumps({"stated": [
        {"kind": "fact", "text": "The user keeps notes in a markdown file.", "subject": "", "value": "",
         "confidence": 0.9},
        {"kind": "fact", "text": "the user's deploys take four minutes.", "subject": "", "value": "",
         "confidence": 0.9}]}))
    found = llm_extract("I keep notes in a markdown file. Deploys take four minutes.", who="Dana")
    assert [c.text for c in found] == ["Dana keeps notes in a markdown file.", "Dana's deploys take four minutes."]


def test_a_long_message_gets_room_for_more_memories_a_short_one_the_base(model, settings):
    """A fixed answer cap cut a long message's answer inside what it stated; the room grows with the message."""
    from memory.extraction.llm_extract import ITEMS_MAX, ITEMS_MIN, llm_extract

    replies, sent = model
    settings.LLM_SCHEMA_LENGTH_LIMITS = True  # the bounds are sent, so the request shows them
    settings.LLM_MAX_TOKENS = {"default": 500, "extraction": 400}
    replies += ['{"stated": []}'] * 3
    llm_extract("I live in Paris.", who="Dana")
    llm_extract(" ".join(f"The {n}th table holds the invoices of client {n}." for n in range(12)), who="Dana")
    llm_extract("The invoices table holds everything. " * 200, who="Dana")
    rooms = [b["max_tokens"] for b in sent]
    items = [b["response_format"]["json_schema"]["schema"]["properties"]["stated"]["maxItems"] for b in sent]
    assert rooms[0] == 400 and items[0] == ITEMS_MIN
    assert ITEMS_MIN < items[1] < ITEMS_MAX and rooms[1] == 400 * items[1] // ITEMS_MIN
    assert items[2] == ITEMS_MAX and rooms[2] == 400 * ITEMS_MAX // ITEMS_MIN


def test_background_calls_wait_while_a_user_call_is_in_flight(settings):
    settings.LLM_BACKGROUND_CONCURRENCY, settings.LLM_BACKGROUND_HOLD_SECONDS = 1, 10
    events: list[str] = []
    in_turn, release = threading.Event(), threading.Event()

    def turn():
        with llm_priority("turn"):
            events.append("turn starts")
            in_turn.set()
            release.wait(5)
            events.append("turn ends")

    def extraction():
        with llm_priority("extraction"):
            events.append("extraction runs")

    t = threading.Thread(target=turn)
    t.start()
    in_turn.wait(5)
    b = threading.Thread(target=extraction)
    b.start()
    time.sleep(0.8)
    assert events == ["turn starts"]  # held back
    release.set()
    t.join(5), b.join(5)
    assert events == ["turn starts", "turn ends", "extraction runs"]


def test_background_calls_share_a_bounded_number_of_slots(settings):
    settings.LLM_BACKGROUND_CONCURRENCY, settings.LLM_BACKGROUND_HOLD_SECONDS = 1, 10
    active, peak, lock = [0], [0], threading.Lock()

    def background():
        with llm_priority("bridge"):
            with lock:
                active[0] += 1
                peak[0] = max(peak[0], active[0])
            time.sleep(0.3)
            with lock:
                active[0] -= 1

    threads = [threading.Thread(target=background) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert peak[0] == 1


def test_without_a_background_limit_nothing_waits(settings):
    settings.LLM_BACKGROUND_CONCURRENCY = 0
    with llm_priority("turn"):
        started = time.monotonic()
        with llm_priority("extraction"):
            pass
    assert time.monotonic() - started < 0.1


LISTED = {"type": "object", "required": ["memories"], "additionalProperties": False,
          "properties": {"memories": {"type": "array", "items": {
              "type": "object", "required": ["text", "confidence"], "additionalProperties": False,
              "properties": {"text": {"type": "string"}, "confidence": {"type": "number"}}}}}}


def test_an_answer_cut_inside_its_last_item_keeps_the_complete_items(model):
    replies, _ = model
    replies.append('{"memories": [{"text": "Ada likes tea.", "confidence": 0.9}, {"text": "Ada lives in Oslo.", '
                   '"confidence": 0.8}, {"text": "Ada wo')  # cut off by max_tokens
    answer = structured_completion(system="s", user="u", schema_name="m", schema=LISTED)
    assert [m["text"] for m in answer["memories"]] == ["Ada likes tea.", "Ada lives in Oslo."]


def test_a_broken_item_that_is_not_the_last_still_fails_the_answer(model):
    replies, _ = model
    replies.append('{"memories": [{"text": "Ada likes tea."}, {"text": "Ada lives in Oslo.", "confidence": 0.8}]')
    with pytest.raises(StructuredOutputInvalid):
        structured_completion(system="s", user="u", schema_name="m", schema=LISTED)
