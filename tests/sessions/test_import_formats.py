"""Reading conversation exports as a stream: both formats, their ids and times, and a clear reason for a bad file."""
from __future__ import annotations

import io
import json
from datetime import datetime, timezone
from pathlib import Path

import pytest

from infra.errors import ValidationFailed
from sessions.import_formats import export_sessions, export_summary
from tests.orchestration.exports import LOCOMO_SAMPLE, OPENAI_EXPORT

# A conversation in the LoCoMo dataset's full shape (qa, observations, summaries, image keys), shipped here.
QUICK_CONVERSATION = Path(__file__).resolve().parents[2] / "bench" / "data" / "quick-conversation.json"


def read(fmt, data, **kwargs):
    raw = data if isinstance(data, bytes) else json.dumps(data).encode()
    return list(export_sessions(fmt=fmt, stream=io.BytesIO(raw), **kwargs))


def refusal(fmt, data, **kwargs) -> ValidationFailed:
    with pytest.raises(ValidationFailed) as caught:
        read(fmt, data, **kwargs)
    return caught.value


def test_locomo_sessions_carry_the_dataset_ids_and_dates_and_the_chosen_speaker():
    sessions = read("locomo", [LOCOMO_SAMPLE], speaker="speaker_b")
    assert [(s.external_id, len(s.messages)) for s in sessions] == [("mini-1:1", 3), ("mini-1:2", 2)]
    first = sessions[0].messages
    assert [(m.external_id, m.role, m.name) for m in first] == [
        ("D1:1", "assistant", "Caroline"), ("D1:2", "user", ""), ("D1:3", "assistant", "Caroline")]
    assert sessions[1].messages[0].created_at == datetime(2023, 6, 27, 10, 37, tzinfo=timezone.utc)


def test_locomo_accepts_one_sample_or_a_bare_conversation_and_a_speaker_by_name():
    assert read("locomo", LOCOMO_SAMPLE) == read("locomo", [LOCOMO_SAMPLE])
    bare = read("locomo", LOCOMO_SAMPLE["conversation"], speaker="Melanie")
    assert bare[0].external_id == "conversation-1:1"
    assert [m.role for m in bare[0].messages] == ["assistant", "user", "assistant"]


def test_a_file_in_the_datasets_own_shape_reads_every_turn():
    sample = json.loads(QUICK_CONVERSATION.read_text())[0]
    data = [dict(sample, sample_id=f"{sample['sample_id']}-{n}") for n in range(3)]
    summary = export_summary(fmt="locomo", stream=io.BytesIO(json.dumps(data).encode()))
    turns = sum(len(v) for s in data for k, v in s["conversation"].items()
                if k.startswith("session_") and not k.endswith("date_time"))
    assert turns == 72
    assert (summary.messages + summary.ignored, summary.sessions) == (turns, 9)


def test_openai_conversations_as_lists_objects_or_under_a_key():
    sessions = read("openai", OPENAI_EXPORT)
    assert [s.external_id for s in sessions] == ["conversation-1", "chat-42"]
    assert sessions[1].ignored == 1
    assert read("openai", {"conversations": OPENAI_EXPORT}) == sessions
    single = read("openai", OPENAI_EXPORT[1])
    assert [m.external_id for m in single[0].messages] == ["m1", "m2", "m4"]


def test_openai_timestamps_in_seconds_milliseconds_or_iso_and_tool_turns():
    conversation = [
        {"role": "user", "content": "book it", "create_time": 1700000000},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "type": "function",
                                                               "function": {"name": "book", "arguments": "{}"}}],
         "timestamp": 1700000001500},
        {"role": "tool", "content": "", "tool_call_id": "c1", "created_at": "2023-11-14T22:13:25"},
    ]
    messages = read("openai", [conversation])[0].messages
    assert [m.created_at.timestamp() for m in messages] == [1700000000, 1700000001.5, 1700000005]
    assert messages[1].tool_calls[0]["id"] == "c1" and messages[2].tool_call_id == "c1"


@pytest.mark.parametrize("fmt, data, code, words", [
    ("csv", [], "unknown_format", "Unknown import format"),
    ("openai", b"[{\"role\": ", "malformed_json", "not valid JSON"),
    ("openai", b"", "malformed_json", "empty"),
    ("openai", b"\"just a string\"", "malformed_json", "array or object"),
    ("openai", [[{"role": "robot", "content": "hi"}]], "invalid_export", "unknown role"),
    ("openai", [{"title": "no messages"}], "invalid_export", "neither a list of messages"),
    ("openai", [[{"id": "x", "role": "user", "content": "a"}, {"id": "x", "role": "user", "content": "b"}]],
     "invalid_export", "appears twice"),
    ("openai", [[{"role": "user", "content": "hi", "created_at": "yesterday"}]], "invalid_export", "ISO 8601"),
    ("openai", [{"id": "c", "messages": []}, {"id": "c", "messages": []}], "invalid_export", "appears twice"),
    ("openai", [[{"role": "user", "content": "a\u0000b"}]], "invalid_export", "NUL"),
    ("openai", [[{"role": "assistant", "content": "", "tool_calls": [{"id": "\u0000"}]}]], "invalid_export", "NUL"),
    ("openai", [{"id": "c\u0000", "messages": []}], "invalid_export", "NUL"),
    ("locomo", [{"sample_id": "s", "conversation": {"speaker_a": "A", "speaker_b": "B",
                                                    "session_1": [{"speaker": "A", "text": "hi"}]}}],
     "invalid_export", "session_1_date_time is missing"),
    ("locomo", [{"sample_id": "s", "conversation": {"speaker_a": "A", "speaker_b": "B",
                                                    "session_1_date_time": "someday",
                                                    "session_1": [{"speaker": "A", "text": "hi"}]}}],
     "invalid_export", "not a date"),
    ("locomo", [{"sample_id": "s", "conversation": {"speaker_a": "A"}}], "invalid_export", "no session_N"),
    ("locomo", [LOCOMO_SAMPLE, LOCOMO_SAMPLE], "invalid_export", "appears twice"),
])
def test_a_bad_export_is_refused_with_its_reason(fmt, data, code, words):
    error = refusal(fmt, data)
    assert error.code == code and error.status == 400
    assert words in error.message


def test_an_unknown_speaker_is_refused_with_the_names_there_are():
    error = refusal("locomo", [LOCOMO_SAMPLE], speaker="Bob")
    assert error.code == "invalid_export" and error.details == {"speakers": ["Caroline", "Melanie"]}


def test_a_message_over_the_size_limit_is_refused(settings):
    settings.CONTINUUM_MAX_MESSAGE_CHARS = 10
    error = refusal("openai", [[{"role": "user", "content": "x" * 11}]])
    assert error.code == "message_too_long" and "Conversation 1 message 1" in error.message


def test_ids_do_not_depend_on_the_day_of_the_import():
    one = read("openai", OPENAI_EXPORT, default_time=datetime(2025, 1, 1, tzinfo=timezone.utc))
    two = read("openai", OPENAI_EXPORT, default_time=datetime(2026, 6, 1, tzinfo=timezone.utc))
    assert [[m.external_id for m in s.messages] for s in one] == [[m.external_id for m in s.messages] for s in two]
