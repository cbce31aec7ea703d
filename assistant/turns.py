"""The turn service: record the user's input, compose the context, run the ReAct loop, record what it produced."""
from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field
from typing import Callable

from django.conf import settings

from context.budget import ContextBudget, closing_note_profile_limit
from context.buffer import buffer_record_tool
from infra.errors import ValidationFailed
from infra.llm import llm_priority, llm_required
from infra.llm_chat import OpenAIChatModel
from infra.quotas import input_tokens_check, quota_charge_tokens
from infra.task_queue import task_enqueue_on_commit
from infra.tokens import truncate_to_tokens
from memory.profile import profile_render
from orchestration.context import turn_context
from orchestration.messages import messages_append
from orchestration.receipts import receipt_record_later
from sessions.models import Message, Session
from sessions.selectors import message_list
from sessions.services import NewMessage

from .client_tools import ClientTools, Toolset, toolset_for_turn
from .grounding import Grounding
from .loop_types import ChatModel, LoopResult
from .react import LoopLimits, react_run
from .tool_results import ToolResults, as_new_message, as_openai, exchange_messages, open_turn_of, results_for
from .tools import ToolContext, outcome_summary, tool_actions, tool_definitions, tool_execute

log = logging.getLogger(__name__)

LEDGER_OUTCOME_CHARS = 200


@dataclass
class TurnResult:
    session: Session
    user_message: Message
    reply: str
    assistant_message: Message
    recorded: list[Message]  # every message this turn stored, in order (imports, user, loop, answer)
    memories: list  # RetrievedMemory: those composed into the context, then those the recall tool found
    memories_used: list  # of those and the standing profile, the ones the answer draws on
    grounding: list  # {sentence, replaced_by ("" when dropped)}: claims no call of the turn made good
    breakdown: dict
    total_tokens: int
    budget: int | None
    memory_status: str
    loop: LoopResult
    usage: dict = field(default_factory=dict)

    @property
    def stop_reason(self) -> str:
        return self.loop.stop_reason

    @property
    def pending_calls(self) -> list[dict]:
        """The client's tool calls the turn ends with, for the client to run and answer."""
        return self.loop.pending_calls

    @property
    def finish_reason(self) -> str:
        return self.loop.finish_reason



ASSISTANT_GUIDANCE = (
    "Tools: recall searches what is remembered about this user from earlier sessions; remember stores a durable "
    "fact or preference (pass the user's exact words as quote when they said it); forget deletes a memory the user "
    "wants gone; set_goal, complete_subgoal and update_notes keep track of this session's work. Call a tool only "
    "when the context does not already hold what you need. These tools reach this user's memory and this "
    "session's notes, nothing outside: never say you found, booked or changed anything that no tool result shows.")
CLIENT_SYSTEM_TOKENS = 1_000


def _system_prompt(client_system: str, toolset: Toolset | None = None) -> str:
    parts = [settings.CONTINUUM_SYSTEM_PROMPT, ASSISTANT_GUIDANCE]
    if toolset is not None:
        renamed = [f"{own} is called {name}" for name, own in toolset.memory.items() if name != own]
        if renamed:
            parts.append(f"In this conversation {', '.join(renamed)} (the chat client has tools of those names).")
        if toolset.client:
            parts.append(f"The chat client's own tools ({', '.join(sorted(toolset.client))}) are run by the client "
                         "application: call one when the request needs it, and its result comes back to you.")
    if client_system.strip():
        # The client's own instructions come last: under a tight budget they are cut before ours.
        parts.append("Instructions from the chat client:\n" + truncate_to_tokens(client_system.strip(),
                                                                                 CLIENT_SYSTEM_TOKENS))
    return "\n\n".join(parts)


def _check_input(*, tenant, text: str) -> str:
    if not isinstance(text, str) or not text.strip():
        raise ValidationFailed("The input is empty.", code="empty_input")
    if len(text) > settings.CONTINUUM_MAX_MESSAGE_CHARS:
        raise ValidationFailed(f"The input is longer than {settings.CONTINUUM_MAX_MESSAGE_CHARS} characters.",
                               code="input_too_long")
    input_tokens_check(tenant=tenant, text=text)  # 400 before any model call
    return text


def _recorded_input(*, tenant, session: Session, text: str) -> Message | None:
    """The session's last message when it is this input from the user: the input of a turn retried after its model
    call failed (or one the client stored itself) is that message, not a second copy of it."""
    last = message_list(tenant=tenant, session=session).last()
    return last if last is not None and last.role == "user" and last.content.strip() == text.strip() else None


def _ledger(ctx: ToolContext, loop: LoopResult, names: dict[str, str]) -> None:
    for call in loop.tool_calls:
        name = names.get(call.name, call.name)
        outcome = outcome_summary(name, call.observation)
        try:
            buffer_record_tool(tenant_id=str(ctx.tenant.pk), user_id=str(ctx.user.pk), session_id=str(ctx.session.pk),
                               tool=name, arguments=call.arguments or {},
                               outcome=str(outcome)[:LEDGER_OUTCOME_CHARS], status=call.status)
        except Exception:  # the ledger is a convenience the buffer can rebuild without; the turn stands
            log.warning("tool ledger update failed for session %s", ctx.session.pk, exc_info=True)


def turn_run(*, tenant, session: Session, user_input: str, earlier: list[NewMessage] | None = None,
             client_system: str = "", max_steps: int | None = None, model: ChatModel | None = None,
             model_options: dict | None = None, on_delta: Callable[[str], None] | None = None,
             cancel: threading.Event | None = None, client_tools: ClientTools | None = None,
             tool_results: ToolResults | None = None,
             surface: str = "assistant") -> TurnResult:
    """One assistant turn. Each write is its own short transaction; none is open while the model runs.

    `earlier`: conversation turns a client sends that the session lacks (the OpenAI surface imports them first).
    `client_tools`: the client's own tools, offered beside the memory tools; a call of one ends the turn with it
    (TurnResult.pending_calls). `tool_results`: their results, continuing the turn whose input is `user_input`.

    The messages the turn records are extracted together once it ends, however it ends (one task: the input's facts
    and the replies' episodes in one pass), so extraction never runs beside the turn's own model calls.
    """
    recorded: list[Message] = []
    receipts: list[dict] = []
    try:
        return _turn_run(tenant=tenant, session=session, user_input=user_input, earlier=earlier,
                         client_system=client_system, max_steps=max_steps, model=model, model_options=model_options,
                         on_delta=on_delta, cancel=cancel, client_tools=client_tools, tool_results=tool_results,
                         surface=surface, recorded=recorded, receipts=receipts)
    finally:
        # Once each: an input the client also sent as earlier history is recorded once and listed twice.
        pending = list(dict.fromkeys(str(m.pk) for m in recorded if m.extracted_at is None))
        if pending:
            # The context's receipt rides with the turn's extraction: one background task per turn, not two.
            task_enqueue_on_commit("orchestration.tasks.messages_extract_task", str(tenant.pk), pending,
                                   receipts=receipts)
        else:
            for receipt in receipts:
                receipt_record_later(receipt)


def _turn_run(*, tenant, session: Session, user_input: str, earlier: list[NewMessage] | None, client_system: str,
              max_steps: int | None, model: ChatModel | None, model_options: dict | None,
              on_delta: Callable[[str], None] | None, cancel: threading.Event | None,
              client_tools: ClientTools | None, tool_results: ToolResults | None, surface: str,
              recorded: list[Message], receipts: list[dict]) -> TurnResult:
    def record(items: list[NewMessage]) -> list[Message]:
        rows = messages_append(tenant=tenant, session_id=session.pk, items=items, enqueue_extraction=False)
        recorded.extend(rows)
        return rows

    llm_required()
    text = _check_input(tenant=tenant, text=user_input)
    toolset = toolset_for_turn(tool_definitions(), client_tools)
    options = dict(model_options or {})
    if toolset.client and not toolset.parallel:
        options["parallel_tool_calls"] = False
    model = model or OpenAIChatModel(options=options)
    open_turn = open_turn_of(tenant=tenant, session=session, text=text) if tool_results is not None else None
    resume, results, exchange = None, [], []
    if open_turn is not None:
        results = results_for(open_turn[1], tool_results)
        resume = [as_openai(m) for m in open_turn[1]]
        earlier = None  # the session holds this turn: what the client sent before it is history already
    elif tool_results is not None:
        exchange = exchange_messages(tool_results.exchange)
        resume = list(tool_results.exchange)
    if earlier:
        record(list(earlier))
        # What recording them changed on the session is read back (the caller loaded it just before otherwise).
        session.refresh_from_db()

    # The context is composed before the input is stored, so the input appears once: as the new turn.
    tools = toolset.definitions
    # What is known of the user reaches every turn and its closing call, whatever the input's words.
    # No query rewrite: the model has the recall tool to search with words of its own choosing.
    # The client's own tools are its cost, on top of the context Continuum composes (context.budget).
    budget = ContextBudget.with_client_tools(toolset.client_only()) if toolset.client else None
    ctx = turn_context(tenant=tenant, session=session, new_input=text, tools=tools, budget=budget,
                       system_prompt=_system_prompt(client_system, toolset), rewrite_query=False,
                       prompt_apart=True, resume_from_seq=open_turn[0].seq if open_turn is not None else None,
                       surface=surface, receipt_to=receipts)
    # The tenant's token quota is charged for the composed context up front (429 before anything is recorded or
    # sent); what the loop adds on top is charged once it is known.
    quota_charge_tokens(tenant=tenant, tokens=ctx.total_tokens)
    # The closing call's note repeats the standing profile the composer put in the context, next to what the tools
    # returned: a small model answers from what is nearest the end of its prompt.
    profile_shown = list(ctx.profile)
    profile_text, _, _ = profile_render(profile_shown, limit_tokens=closing_note_profile_limit())
    # The whole turn counts as a user's call for the model's priority gate, not each call alone: background work
    # (other turns' extraction, a session's bridge) would otherwise start in the gaps between the loop's calls and
    # share the model server's cores with the rest of the turn.
    with llm_priority("turn", seconds=settings.ASSISTANT_WALL_CLOCK_SECONDS):
        if open_turn is not None:
            user_message = open_turn[0]
        else:
            user_message = _recorded_input(tenant=tenant, session=session, text=text) if ctx.echoed else None
            if user_message is None:
                user_message = record([NewMessage(role="user", content=text)])[0]
            else:
                recorded.append(user_message)
        if results or exchange:
            rows = record(results or exchange)
            resume += [as_openai(r) for r in rows] if results else []

        tools_ctx = ToolContext(tenant=tenant, user=session.user, session=session, user_message=user_message,
                                goal=ctx.goal or session.goal or "")
        names = toolset.memory
        shown_name = (session.user.display_name or "").strip()
        grounding = Grounding(actions_of=lambda tool: tool_actions(names.get(tool, tool)),
                              ignore=tuple(shown_name.split()),
                              sources=[*(e.text for e in profile_shown), *(m.text for m in ctx.memories),
                                       # the conversation and what the context holds, not our own instructions
                                       *(str(m.get("content") or "") for m in ctx.messages[1:])])
        loop = react_run(messages=ctx.messages, tools=tools,
                         execute=lambda name, args: tool_execute(tools_ctx, names.get(name, name), args), model=model,
                         # A caller may ask for fewer steps than the deployment allows, never more.
                         limits=LoopLimits.from_settings(max_steps=min(max_steps or settings.ASSISTANT_MAX_STEPS,
                                                                       settings.ASSISTANT_MAX_STEPS)),
                         on_delta=on_delta, cancel=cancel,
                         describe=lambda name, observation: outcome_summary(names.get(name, name), observation),
                         grounding=grounding, closing_note=profile_text, client_tools=toolset.client,
                         tool_choice=toolset.step_choice, parallel=toolset.parallel, resume=resume)

    spent = loop.usage.get("prompt_tokens", 0) + loop.usage.get("completion_tokens", 0)
    quota_charge_tokens(tenant=tenant, tokens=spent - ctx.total_tokens, enforce=False)

    names = {c.id: c.name for c in loop.tool_calls}
    # The loop's messages are the assistant's and the tools': what the assistant said is kept as episodic context
    # (extracted with the input once the turn ends); tool results echo stored data back and are not read.
    rows = record([as_new_message(m, names) for m in loop.messages])
    answer = next(r for r in reversed(rows) if r.role == Message.Role.ASSISTANT)
    _ledger(tools_ctx, loop, names)

    memories, seen = [], set()
    for m in [*ctx.memories, *tools_ctx.recalled.values()]:
        if str(m.memory_id) not in seen:
            seen.add(str(m.memory_id))
            memories.append(m)
    known = memories + [e for e in profile_shown if e.memory_id not in seen]
    return TurnResult(session=session, user_message=user_message, reply=loop.content, assistant_message=answer,
                      recorded=recorded, memories=memories, memories_used=grounding.used(loop.content, known),
                      grounding=[{"sentence": a, "replaced_by": b} for a, b in grounding.changes],
                      breakdown=dict(ctx.breakdown),
                      total_tokens=ctx.total_tokens, budget=ctx.budget, memory_status=ctx.memory_status, loop=loop,
                      usage=dict(loop.usage))
