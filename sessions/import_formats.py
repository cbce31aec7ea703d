"""Conversation exports read as a stream: LoCoMo-style dated sessions and OpenAI-style message lists, each turned
into sessions of messages with external ids and timestamps.

ijson reads the file one conversation at a time, so memory holds one conversation however large the file. The ids
are derived from the file alone (a conversation's own id, or its place in the file, and each message's id or
place), so importing the same file twice names every message the same way and the second import finds them stored.
"""
from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import BinaryIO

import ijson
from django.conf import settings

from infra.errors import ValidationFailed

LOCOMO, OPENAI = "locomo", "openai"
FORMATS = (LOCOMO, OPENAI)
# LoCoMo dates sessions, not turns: turns are spaced this far apart from the session's start.
LOCOMO_TURN_SECONDS = 30
# A session's external id is the conversation's id with a suffix (its session number, a continuation part).
CONVERSATION_ID_MAX = 200
_SESSION_KEY = re.compile(r"^session_(\d+)$")
_ROLES = {"user": "user", "assistant": "assistant", "system": "system", "developer": "system", "tool": "tool",
          "function": "tool"}


@dataclass(frozen=True)
class ImportedMessage:
    role: str
    content: str
    external_id: str
    created_at: datetime
    name: str = ""
    tool_calls: list = field(default_factory=list)
    tool_call_id: str = ""


@dataclass(frozen=True)
class ImportedSession:
    external_id: str
    title: str
    messages: list[ImportedMessage]
    ignored: int = 0  # blank messages left out (nothing to store, extract or show)


@dataclass
class ExportSummary:
    sessions: int = 0
    messages: int = 0
    ignored: int = 0


def _invalid(message: str, **details) -> ValidationFailed:
    return ValidationFailed(message, code="invalid_export", details=details)


def format_check(fmt: str | None) -> str:
    if fmt not in FORMATS:
        raise ValidationFailed(f"Unknown import format {fmt!r}: use one of {', '.join(FORMATS)}.",
                               code="unknown_format", details={"formats": list(FORMATS)})
    return fmt


def export_sessions(*, fmt: str, stream: BinaryIO, speaker: str = "", default_time: datetime | None = None
                    ) -> Iterator[ImportedSession]:
    """The export's sessions in file order. Raises ValidationFailed (unknown_format, malformed_json, invalid_export,
    message_too_long) where the file stops making sense; what came before it was already yielded."""
    format_check(fmt)
    start = default_time or datetime(1970, 1, 1, tzinfo=timezone.utc)
    try:
        top = _top_level(stream)
        if fmt == LOCOMO:
            yield from _locomo(stream, top, speaker=speaker)
        else:
            yield from _openai(stream, top, default_time=start)
    except ijson.JSONError as exc:
        raise ValidationFailed(f"The file is not valid JSON: {exc}.", code="malformed_json") from None


def export_summary(*, fmt: str, stream: BinaryIO, speaker: str = "", default_time: datetime | None = None,
                   on_message: Callable[[ImportedMessage], None] | None = None) -> ExportSummary:
    """Read the whole export once (validating it) and count what an import would write; on_message sees each
    message that would be written (undated ones at default_time, as the import would date them)."""
    summary = ExportSummary()
    for session in export_sessions(fmt=fmt, stream=stream, speaker=speaker, default_time=default_time):
        summary.sessions += 1
        summary.messages += len(session.messages)
        summary.ignored += session.ignored
        if on_message is not None:
            for message in session.messages:
                on_message(message)
    return summary


def _top_level(stream: BinaryIO) -> str:
    """'[' or '{': what the file is at its top; the stream is left at its start."""
    head = stream.read(4096)
    stream.seek(0)
    text = head.lstrip(b"\xef\xbb\xbf \t\r\n")
    if not text:
        raise ValidationFailed("The file is empty.", code="malformed_json")
    first = text[:1].decode("latin-1")
    if first not in "[{":
        raise ValidationFailed("An export is a JSON array or object.", code="malformed_json")
    return first


def _top_keys(stream: BinaryIO) -> set[str]:
    """The keys of a top-level object, read as a stream without building any value."""
    keys = set()
    for prefix, event, value in ijson.parse(stream):
        if prefix == "" and event == "map_key":
            keys.add(value)
    stream.seek(0)
    return keys


def _text(value, what: str) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise _invalid(f"{what} must be a string.")
    if "\x00" in value:  # PostgreSQL cannot store it in text
        raise _invalid(f"{what} contains a NUL character.")
    if len(value) > settings.CONTINUUM_MAX_MESSAGE_CHARS:
        raise ValidationFailed(f"{what} is longer than {settings.CONTINUUM_MAX_MESSAGE_CHARS} characters.",
                               code="message_too_long", details={"limit": settings.CONTINUUM_MAX_MESSAGE_CHARS})
    return value


def _ext_id(value, what: str, *, max_length: int = 255) -> str:
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise _invalid(f"{what} must be a string or an integer.")
    text = str(value).strip()
    if not text or len(text) > max_length or "\x00" in text:
        raise _invalid(f"{what} must be 1 to {max_length} characters, none of them NUL.")
    return text


# --- LoCoMo --------------------------------------------------------------------------------------------------------

def locomo_date(raw, what: str) -> datetime:
    """'1:56 pm on 8 May, 2023' (LoCoMo's own) or ISO 8601; naive times are UTC."""
    if not isinstance(raw, str) or not raw.strip():
        raise _invalid(f"{what} is missing.")
    text = raw.strip()
    for parse in (lambda t: datetime.strptime(t, "%I:%M %p on %d %B, %Y"), datetime.fromisoformat):
        try:
            value = parse(text)
        except ValueError:
            continue
        return value if value.tzinfo else value.replace(tzinfo=timezone.utc)
    raise _invalid(f"{what} is not a date ('1:56 pm on 8 May, 2023' or ISO 8601): {text[:60]!r}.")


def _locomo(stream: BinaryIO, top: str, *, speaker: str) -> Iterator[ImportedSession]:
    if top == "[":
        samples = enumerate(ijson.items(stream, "item", use_float=True), start=1)
    else:
        samples = enumerate(ijson.items(stream, "", use_float=True), start=1)
    seen: set[str] = set()
    for number, sample in samples:
        if not isinstance(sample, dict):
            raise _invalid(f"Conversation {number} is not an object.")
        conversation = sample.get("conversation", sample)
        if not isinstance(conversation, dict):
            raise _invalid(f"Conversation {number}: 'conversation' is not an object.")
        sample_id = _ext_id(sample.get("sample_id", f"conversation-{number}"), f"Conversation {number}'s sample_id",
                            max_length=CONVERSATION_ID_MAX)
        if sample_id in seen:
            raise _invalid(f"Conversation {number}: sample_id {sample_id!r} appears twice in the file.")
        seen.add(sample_id)
        yield from _locomo_sessions(conversation, sample_id, number, speaker=speaker)


def _locomo_speaker(conversation: dict, number: int, speaker: str) -> str:
    names = {k: conversation.get(k) for k in ("speaker_a", "speaker_b")}
    if not speaker or speaker in names:
        name = names[speaker or "speaker_a"]
        if not isinstance(name, str) or not name:
            raise _invalid(f"Conversation {number} names no {speaker or 'speaker_a'}.")
        return name
    if speaker not in names.values():
        raise _invalid(f"Conversation {number} has no speaker {speaker!r}.",
                       speakers=[n for n in names.values() if isinstance(n, str)])
    return speaker


def _locomo_sessions(conversation: dict, sample_id: str, number: int, *, speaker: str) -> Iterator[ImportedSession]:
    user_name = _locomo_speaker(conversation, number, speaker)
    numbers = sorted(int(m.group(1)) for k in conversation if (m := _SESSION_KEY.match(k)))
    if not numbers:
        raise _invalid(f"Conversation {number} ({sample_id}) has no session_N lists.")
    for n in numbers:
        turns = conversation[f"session_{n}"]
        where = f"{sample_id} session_{n}"
        if not isinstance(turns, list):
            raise _invalid(f"{where} is not a list of turns.")
        if not turns:
            continue
        started = locomo_date(conversation.get(f"session_{n}_date_time"), f"{where}_date_time")
        messages, ignored, ids = [], 0, set()
        for i, turn in enumerate(turns):
            if not isinstance(turn, dict):
                raise _invalid(f"{where} turn {i + 1} is not an object.")
            who = turn.get("speaker")
            if not isinstance(who, str) or not who:
                raise _invalid(f"{where} turn {i + 1} has no speaker.")
            text = _text(turn.get("text"), f"{where} turn {i + 1}'s text")
            if turn.get("blip_caption"):
                # What a chat client would send for a shared image: its caption.
                text = f"{text} [shares an image: {_text(turn['blip_caption'], 'blip_caption')}]".strip()
            ext = _ext_id(turn.get("dia_id", f"{sample_id}:{n}:{i + 1}"), f"{where} turn {i + 1}'s dia_id")
            if ext in ids:
                raise _invalid(f"{where}: dia_id {ext!r} appears twice.")
            ids.add(ext)
            if not text.strip():
                ignored += 1
                continue
            own = who == user_name
            messages.append(ImportedMessage(role="user" if own else "assistant", content=text, external_id=ext,
                                            created_at=started + timedelta(seconds=LOCOMO_TURN_SECONDS * i),
                                            name="" if own else who.replace("\x00", "")[:128]))
        if messages:
            yield ImportedSession(external_id=f"{sample_id}:{n}", title=f"{sample_id} session {n}",
                                  messages=messages, ignored=ignored)


# --- OpenAI-style ---------------------------------------------------------------------------------------------------

def _timestamp(value, what: str) -> datetime | None:
    """ISO 8601, or seconds (milliseconds past 1e12) since the epoch; naive times are UTC."""
    if value is None or value == "":
        return None
    if isinstance(value, bool):
        raise _invalid(f"{what} is not a timestamp.")
    if isinstance(value, (int, float)):
        seconds = value / 1000 if value > 1e12 else value
        try:
            return datetime.fromtimestamp(seconds, tz=timezone.utc)
        except (OverflowError, OSError, ValueError):
            raise _invalid(f"{what} is out of range.") from None
    if isinstance(value, str):
        try:
            parsed = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
        except ValueError:
            raise _invalid(f"{what} is not an ISO 8601 timestamp: {value[:40]!r}.") from None
        return parsed if parsed.tzinfo else parsed.replace(tzinfo=timezone.utc)
    raise _invalid(f"{what} is not a timestamp.")


def _has_nul(value) -> bool:
    if isinstance(value, str):
        return "\x00" in value
    if isinstance(value, dict):
        return any(_has_nul(k) or _has_nul(v) for k, v in value.items())
    if isinstance(value, list):
        return any(_has_nul(v) for v in value)
    return False


def _first(d: dict, *keys):
    for key in keys:
        if d.get(key) not in (None, ""):
            return d[key]
    return None


def _content(value, what: str) -> str:
    """A string, or OpenAI's content parts (their text parts joined)."""
    if isinstance(value, list):
        parts = []
        for part in value:
            if isinstance(part, str):
                parts.append(part)
            elif isinstance(part, dict) and isinstance(part.get("text"), str):
                parts.append(part["text"])
        value = "\n".join(parts)
    return _text(value, what)


def _openai(stream: BinaryIO, top: str, *, default_time: datetime) -> Iterator[ImportedSession]:
    if top == "[":
        conversations = ijson.items(stream, "item", use_float=True)
    elif "conversations" in _top_keys(stream):
        conversations = ijson.items(stream, "conversations.item", use_float=True)
    else:
        conversations = ijson.items(stream, "", use_float=True)  # one conversation object
    seen: set[str] = set()
    for number, conversation in enumerate(conversations, start=1):
        session = _openai_session(conversation, number, default_time=default_time)
        if session.external_id in seen:
            raise _invalid(f"Conversation {number}: id {session.external_id!r} appears twice in the file.")
        seen.add(session.external_id)
        if session.messages:
            yield session


def _openai_session(conversation, number: int, *, default_time: datetime) -> ImportedSession:
    if isinstance(conversation, list):
        meta, items = {}, conversation
    elif isinstance(conversation, dict) and isinstance(conversation.get("messages"), list):
        meta, items = conversation, conversation["messages"]
    else:
        raise _invalid(f"Conversation {number} is neither a list of messages nor an object with 'messages'.")
    where = f"Conversation {number}"
    conv_id = _ext_id(_first(meta, "id", "conversation_id") or f"conversation-{number}", f"{where}'s id",
                      max_length=CONVERSATION_ID_MAX)
    title = meta["title"].replace("\x00", "") if isinstance(meta.get("title"), str) else ""
    # Without timestamps, messages follow each other by a second from the conversation's time (or the job's).
    at = _timestamp(_first(meta, "created_at", "create_time", "timestamp"), f"{where}'s created_at") or default_time
    messages, ignored, ids = [], 0, set()
    for i, item in enumerate(items):
        what = f"{where} message {i + 1}"
        if not isinstance(item, dict):
            raise _invalid(f"{what} is not an object.")
        role = _ROLES.get(item.get("role")) if isinstance(item.get("role"), str) else None
        if role is None:
            raise _invalid(f"{what} has an unknown role {item.get('role')!r}.", roles=sorted(_ROLES))
        content = _content(item.get("content"), f"{what}'s content")
        stamp = _timestamp(_first(item, "created_at", "create_time", "timestamp"), f"{what}'s timestamp")
        at = stamp or (at + timedelta(seconds=1) if i else at)
        ext = _ext_id(item["id"], f"{what}'s id") if item.get("id") not in (None, "") else f"{conv_id}:{i + 1}"
        if ext in ids:
            raise _invalid(f"{what}: id {ext!r} appears twice in the conversation.")
        ids.add(ext)
        tool_calls = item.get("tool_calls") if isinstance(item.get("tool_calls"), list) else []
        if _has_nul(tool_calls):  # nor can jsonb
            raise _invalid(f"{what}'s tool_calls contain a NUL character.")
        tool_call_id = item["tool_call_id"].replace("\x00", "") if isinstance(item.get("tool_call_id"), str) else ""
        # The rule the messages API applies: blank text is kept only where the turn means something without it.
        if not content.strip() and not (role == "assistant" and tool_calls) and not (role == "tool" and tool_call_id):
            ignored += 1
            continue
        name = item["name"].replace("\x00", "") if isinstance(item.get("name"), str) else ""
        messages.append(ImportedMessage(role=role, content=content, external_id=ext, created_at=at, name=name[:128],
                                        tool_calls=[c for c in tool_calls if isinstance(c, dict)][:64],
                                        tool_call_id=tool_call_id[:128]))
    return ImportedSession(external_id=conv_id, title=title[:255] or f"conversation {number}", messages=messages,
                           ignored=ignored)
