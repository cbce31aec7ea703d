"""A turn continued with a client's tool results: the open turn they continue, and the results it takes."""
from __future__ import annotations

from dataclasses import dataclass

from infra.errors import ValidationFailed
from sessions.models import Message, Session
from sessions.selectors import message_list
from sessions.services import NewMessage

from .history import history_problems


@dataclass(frozen=True)
class ToolResults:
    """A client's results for its tool calls, continuing the turn whose input is the request's last user message.

    `results`: (call id, content) as sent. `exchange`: the client's own messages after that input (assistant steps
    with tool_calls, tool results), which become the turn's first steps when the session holds no such open turn
    (a conversation begun elsewhere)."""

    results: list[tuple[str, str]]
    exchange: list[dict]


def as_new_message(message: dict, calls_by_id: dict[str, str]) -> NewMessage:
    if message["role"] == "tool":
        return NewMessage(role="tool", content=message.get("content") or "", tool_call_id=message["tool_call_id"],
                          name=calls_by_id.get(message["tool_call_id"], "")[:128])
    return NewMessage(role="assistant", content=message.get("content") or "", tool_calls=message.get("tool_calls"))


def as_openai(message: Message) -> dict:
    if message.role == "tool":
        return {"role": "tool", "tool_call_id": message.tool_call_id, "content": message.content}
    return {"role": "assistant", "content": message.content or None, "tool_calls": message.tool_calls}


def open_turn_of(*, tenant, session: Session, text: str) -> tuple[Message, list[Message]] | None:
    """The session's last turn when its input is `text` and it ended with tool calls, not an answer: (its user
    message, the steps and results after it)."""
    messages = message_list(tenant=tenant, session=session)
    user = messages.filter(role=Message.Role.USER).last()
    if user is None or user.content.strip() != text.strip():
        return None
    after = list(messages.filter(seq__gt=user.seq))
    if not after or any(m.role == Message.Role.ASSISTANT and not m.tool_calls for m in after):
        return None
    return user, after


def results_for(steps: list[Message], given: ToolResults) -> list[NewMessage]:
    """The client's results for the open turn's unanswered calls, in call order: each call answered, no result
    for a call the turn did not make (results for calls already answered are history, skipped)."""
    calls = [c for m in steps if m.role == Message.Role.ASSISTANT for c in m.tool_calls or []]
    answered = {m.tool_call_id for m in steps if m.role == Message.Role.TOOL}
    results = dict(given.results)
    unknown = [cid for cid in results if cid not in {c.get("id") for c in calls}]
    if unknown:
        raise ValidationFailed(f"The tool message for call '{unknown[0]}' answers no call of this turn.",
                               code="invalid_request", details={"param": "messages"})
    pending = [c for c in calls if c.get("id") not in answered]
    missing = [c for c in pending if c.get("id") not in results]
    if missing:
        raise ValidationFailed(f"No tool message answers call '{missing[0].get('id')}' "
                               f"({(missing[0].get('function') or {}).get('name')}): answer every call.",
                               code="invalid_request", details={"param": "messages"})
    return [NewMessage(role="tool", content=results[c["id"]], tool_call_id=c["id"],
                       name=str((c.get("function") or {}).get("name") or "")[:128]) for c in pending]


def exchange_messages(exchange: list[dict]) -> list[NewMessage]:
    problems = history_problems([{"role": "user", "content": ""}, *exchange])
    if problems:
        raise ValidationFailed(f"The tool calls after the last user message do not line up: {problems[0]}.",
                               code="invalid_request", details={"param": "messages"})
    names = {c["id"]: c["function"]["name"] for m in exchange for c in m.get("tool_calls") or []}
    return [as_new_message(m, names) for m in exchange]
