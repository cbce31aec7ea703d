"""A session's transcript as a reviewer reads it: each message with the tool calls it made (and the tool messages
that answered them), and the memories drawn from it. It crosses sessions and memory, so it lives here."""
from __future__ import annotations

import json
from dataclasses import dataclass, field

from memory.models import MemoryRecord
from memory.overview import memories_from_messages
from sessions.models import Message, Session
from sessions.selectors import message_list
from tenants.models import Tenant


@dataclass
class ToolCall:
    id: str
    name: str
    arguments: dict | str  # the parsed arguments, or the text the model wrote when it is not JSON
    result: dict | str | None = None  # the answering tool message's content, parsed when it is JSON
    answered: bool = False


@dataclass
class TranscriptRow:
    message: Message
    calls: list[ToolCall] = field(default_factory=list)  # an assistant message's calls
    answers: ToolCall | None = None  # the call a tool message answers
    memories: list[MemoryRecord] = field(default_factory=list)


def _parsed(text):
    if not isinstance(text, str):
        return text if isinstance(text, dict) else {}
    try:
        value = json.loads(text)
    except (TypeError, ValueError):
        return text
    return value if isinstance(value, dict) else text


def transcript_select(*, tenant: Tenant, session: Session, limit: int) -> list[TranscriptRow]:
    """The first `limit` messages in order; three queries however many there are."""
    messages = list(message_list(tenant=tenant, session=session)[:limit])
    calls: dict[str, ToolCall] = {}
    rows = []
    for m in messages:
        row = TranscriptRow(message=m)
        for raw in m.tool_calls or []:
            fn = raw.get("function") if isinstance(raw, dict) else None
            if not isinstance(fn, dict):
                continue
            call = ToolCall(id=str(raw.get("id") or ""), name=str(fn.get("name") or "?"),
                            arguments=_parsed(fn.get("arguments") or "{}"))
            row.calls.append(call)
            if call.id:
                calls[call.id] = call
        if m.role == Message.Role.TOOL and m.tool_call_id in calls:
            call = calls[m.tool_call_id]
            call.result, call.answered = _parsed(m.content), True
            row.answers = call
        rows.append(row)
    drawn = memories_from_messages(tenant=tenant, user=session.user, message_ids=[m.pk for m in messages],
                                   since=session.opened_at)
    for row in rows:
        row.memories = drawn.get(str(row.message.pk), [])
    return rows


def transcript_memories(*, tenant: Tenant, message: Message) -> list[MemoryRecord]:
    """The memories drawn from one message (created from it, or reinforced by it)."""
    session = message.session
    return memories_from_messages(tenant=tenant, user=session.user, message_ids=[message.pk],
                                  since=message.created_at).get(str(message.pk), [])
