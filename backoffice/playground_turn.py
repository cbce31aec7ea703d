"""The staff playground's turn (its page: backoffice/playground.py): chat as one end user through the turn service the
REST and OpenAI surfaces run, then read back what the turn did: the context the model was shown, by section, the
turn's receipt and the memories that changed since it began.

The receipt and the memories are written after the turn by the background task every surface queues (extraction and
the receipt travel together, orchestration.tasks.messages_extract_task), so they are read, not waited for:
`playground_after` reads what exists now, and the page reads it again on refresh. Without a model nothing is sent or
stored, but the context composed for the message is receipted at once, so the page can link what it shows.

The page's two tables count alike: each message as the model reads it (its text and the few tokens that frame it),
the tool definitions once, and three tokens that prime the reply; the sections of the context message are the
composer's counts, and what frames and joins them is a row of its own.
"""
from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import datetime

from django.conf import settings

from assistant.loop_types import ChatModel
from assistant.turns import turn_run
from context.budget import SECTIONS, tool_tokens
from infra import clock
from infra.errors import NotFound
from infra.llm import llm_configured
from infra.llm_chat import OpenAIChatModel
from infra.tokens import message_tokens
from memory.models import MemoryEvent
from orchestration.context import turn_context
from orchestration.models import ContextReceipt
from orchestration.receipts import receipt_write
from orchestration.sessions import session_close, session_open
from sessions.models import Message, Session
from sessions.selectors import access_session, session_open_for_user
from tenants.models import EndUser, Tenant
from tenants.services import end_user_get_or_create

SURFACE = "playground"  # the turn's receipts say they came from here
CLOSE_REASON = "playground"
CHANGES_LIMIT = 50
RECENT_MESSAGES = 10
SECTION_LABELS = {
    "system": "System prompt and tool definitions",
    "profile": "Standing profile",
    "bridge": "Where earlier sessions left off (bridge)",
    "anchors": "Earlier in this session (summary anchors)",
    "state": "This session (goal, notes, facts, tool ledger)",
    "memories": "Retrieved memories",
    "recent": "Recent turns",
    "input": "The new message",
    "framing": "Message framing, section separators and reply priming",
}
# The playground's own rows, each as the model reads it (see the module's docstring).
PROMPT_LABEL = "System prompt"
TOOLS_LABEL = "Tool definitions"
CONTEXT_FRAMING_LABEL = "Framing of the context message and between its sections"
PRIMING_LABEL = "Reply priming"
REPLY_PRIMING = 3  # infra.tokens.count_message_tokens: the tokens that prime the reply
_CONTEXT_SECTIONS = ("profile", "bridge", "anchors", "state", "memories")


@dataclass
class Section:
    name: str
    label: str
    tokens: int


@dataclass
class ShownMessage:
    part: str  # which part of the context it carries
    role: str
    content: str
    tokens: int


@dataclass
class PlaygroundTurn:
    user: EndUser
    session: Session
    started_at: datetime
    answered: bool  # False: no model is configured; the context was composed, nothing was sent or stored
    reply: str = ""
    stop_reason: str = ""
    tool_calls: list = field(default_factory=list)  # ToolCallRecord
    sections: list[Section] = field(default_factory=list)
    total_tokens: int = 0
    budget: int | None = None
    memory_status: str = "ok"
    shown: list[ShownMessage] = field(default_factory=list)  # what the model's first call read, in order
    tool_tokens: int = 0  # the tool definitions the first call was offered
    receipt: ContextReceipt | None = None  # written at once when no model ran; a turn's comes with its extraction


@dataclass
class MemoryChange:
    memory_id: str
    text: str
    kind: str
    status: str
    actions: list[str]
    exists: bool  # False when the memory was deleted for good since (its history keeps the text)


@dataclass
class PlaygroundAfter:
    """What the turn's background work has written so far."""

    receipt: ContextReceipt | None
    changes: list[MemoryChange]
    pending: int  # the session's messages still waiting for extraction


class _FirstCallKept:
    """The model, keeping the messages and tools its first call is given: the composed context as the model read it."""

    def __init__(self, model: ChatModel):
        self._model = model
        self.name = model.name
        self.first: list[dict] | None = None
        self.tools: list[dict] = []

    def complete(self, *, messages, **kwargs):
        if self.first is None:
            self.first = [dict(m) for m in messages]
            self.tools = list(kwargs.get("tools") or [])
        return self._model.complete(messages=messages, **kwargs)


def _sections(breakdown: dict, shown: list[ShownMessage], tools: int) -> list[Section]:
    """The context by section, counted as the model read it (the same counts as the messages' table): the system
    prompt's message and the tool definitions, the context message's sections (the composer's counts) and what
    frames them, the recent turns, the new message, and the reply's priming; they add up to the total."""
    if not shown:  # the model was not called: the composer's counts as they are
        return [Section(name, SECTION_LABELS.get(name, name), int(breakdown.get(name) or 0))
                for name in (*SECTIONS, "input")]
    by_part: dict[str, int] = {}
    for m in shown:
        by_part[m.part] = by_part.get(m.part, 0) + m.tokens
    context = [Section(name, SECTION_LABELS[name], int(breakdown.get(name) or 0)) for name in _CONTEXT_SECTIONS]
    framing = by_part.get("context sections", 0) - sum(s.tokens for s in context)
    return [Section("system", PROMPT_LABEL, by_part.get("system prompt", 0)),
            Section("tools", TOOLS_LABEL, tools),
            *context,
            Section("context_framing", CONTEXT_FRAMING_LABEL, max(0, framing)),
            Section("recent", SECTION_LABELS["recent"], by_part.get("recent turns", 0)),
            Section("input", SECTION_LABELS["input"], by_part.get("new message", 0)),
            Section("priming", PRIMING_LABEL, REPLY_PRIMING)]


def _shown(messages: list[dict]) -> list[ShownMessage]:
    """The messages, each named for the part of the context it carries: the composer puts the system prompt first and
    the context sections in a second system message, then the recent turns, then the new input."""
    out = []
    for i, m in enumerate(messages):
        role = str(m.get("role") or "")
        if role == "system":
            part = "system prompt" if i == 0 else "context sections"
        elif i == len(messages) - 1 and role == "user":
            part = "new message"
        else:
            part = "recent turns"
        content = m.get("content") if isinstance(m.get("content"), str) else str(m.get("content") or "")
        if m.get("tool_calls"):
            calls = ", ".join(f"{c['function']['name']}({c['function'].get('arguments') or ''})"
                              for c in m["tool_calls"])
            content = f"{content}\n[tool calls: {calls}]".strip()
        out.append(ShownMessage(part=part, role=role, content=content, tokens=message_tokens(m)))
    return out


def playground_turn(*, tenant: Tenant, external_id: str, text: str, model: ChatModel | None = None) -> PlaygroundTurn:
    """One turn as the end user `external_id` (created on first use, as the API does), in their open session or a
    new one (which starts from their last session's bridge). Without a model the turn cannot run: the context this
    message would be given is composed and shown, and nothing is sent, stored or receipted. AppError as the turn
    raises it (empty input, quota, the model's outage)."""
    user = end_user_get_or_create(tenant=tenant, external_id=external_id)
    session = session_open_for_user(tenant=tenant, user=user) or session_open(tenant=tenant, user=user)[0]
    started = clock.now()
    if model is None and not llm_configured():
        receipts: list[dict] = []
        ctx = turn_context(tenant=tenant, session=session, new_input=text, prompt_apart=True, surface=SURFACE,
                           receipt_to=receipts)
        # Written now, not after commit by a worker: the page links it in this response. A receipt is what was
        # composed and for whom; that no model read this one, the page says.
        receipt = receipt_write(payload=receipts[0]) if receipts and settings.CONTINUUM_RECEIPTS else None
        shown = _shown(ctx.messages)
        return PlaygroundTurn(user=user, session=session, started_at=started, answered=False,
                              sections=_sections(ctx.breakdown, shown, 0), total_tokens=ctx.total_tokens,
                              budget=ctx.budget, memory_status=ctx.memory_status, shown=shown, receipt=receipt)
    kept = _FirstCallKept(model or OpenAIChatModel())
    result = turn_run(tenant=tenant, session=session, user_input=text, model=kept, surface=SURFACE)
    shown, tools = _shown(kept.first or []), tool_tokens(kept.tools)
    total = sum(m.tokens for m in shown) + tools + REPLY_PRIMING if shown else result.total_tokens
    return PlaygroundTurn(user=user, session=result.session, started_at=started, answered=True, reply=result.reply,
                          stop_reason=result.stop_reason, tool_calls=list(result.loop.tool_calls),
                          sections=_sections(result.breakdown, shown, tools), total_tokens=total,
                          budget=result.budget, memory_status=result.memory_status, shown=shown, tool_tokens=tools)


def playground_user(*, tenant: Tenant, external_id: str) -> EndUser | None:
    """The end user, or None when they have not chatted yet (reading never creates one)."""
    return EndUser.objects.for_tenant(tenant).filter(external_id=external_id).first()


def playground_session(*, tenant: Tenant, user: EndUser, session_id: uuid.UUID | None) -> Session | None:
    """The named session (404 unless it is this user's), else the user's open one, else None."""
    if session_id is None:
        return session_open_for_user(tenant=tenant, user=user)
    session = access_session(tenant=tenant, session_id=session_id)
    if session.user_id != user.pk:
        raise NotFound("Session not found.")  # the same answer as for a missing one
    return session


def playground_after(*, tenant: Tenant, session: Session, since: datetime) -> PlaygroundAfter:
    """The session's first receipt composed since `since` (the turn's), the user's memories with a change recorded in
    their history since then (the decay job's recomputations aside), newest last, and how many of the session's
    messages extraction has not read yet."""
    receipt = (ContextReceipt.objects.for_tenant(tenant).filter(session=session, created_at__gte=since)
               .order_by("created_at").first())
    events = (MemoryEvent.objects.for_tenant(tenant).filter(user_id=session.user_id, created_at__gte=since)
              .exclude(action=MemoryEvent.Action.DECAYED).select_related("memory").order_by("created_at", "id"))
    changes: dict[str, MemoryChange] = {}
    for event in events[:CHANGES_LIMIT * 4]:
        key = str(event.memory_uuid)
        if key not in changes:
            if len(changes) >= CHANGES_LIMIT:
                continue
            kept = event.after or event.before or {}
            changes[key] = MemoryChange(memory_id=key, text=str(kept.get("text") or ""),
                                        kind=str(kept.get("kind") or ""), status=str(kept.get("status") or ""),
                                        actions=[], exists=False)
        change = changes[key]
        if event.action not in change.actions:
            change.actions.append(event.action)
        if event.memory is not None:
            change.text, change.kind, change.status = event.memory.text, event.memory.kind, event.memory.status
            change.exists = True
    pending = (Message.objects.for_tenant(tenant).filter(session=session, extracted_at__isnull=True)
               .exclude(role=Message.Role.SYSTEM).count())
    return PlaygroundAfter(receipt=receipt, changes=list(changes.values()), pending=pending)


def playground_recent(*, tenant: Tenant, session: Session, limit: int = RECENT_MESSAGES) -> list[Message]:
    """The session's last messages, oldest first."""
    return list(reversed(Message.objects.for_tenant(tenant).filter(session=session).order_by("-seq")[:limit]))


def playground_close(*, tenant: Tenant, external_id: str) -> Session | None:
    """Close the user's open session (their next message opens a new one, bridged from this); None when none is
    open."""
    user = playground_user(tenant=tenant, external_id=external_id)
    session = session_open_for_user(tenant=tenant, user=user) if user is not None else None
    if session is None:
        return None
    return session_close(tenant=tenant, session_id=session.pk, reason=CLOSE_REASON)
