"""A chat UI's own background requests (a chat's title, tags, follow-up suggestions, search queries, autocomplete,
an emoji): recognised, answered by the model without memory, and kept out of every store.

Chat UIs send these through the same /v1/chat/completions as the user's turns, often with the chat copied inside
the prompt. Run as turns they were stored as the user's messages, drew memories from the copies, and a request whose
messages did not continue the open session closed it as a "new chat". A task is none of that: its answer comes from
one model call on the client's messages as sent, with a small generation cap, behind any user's turn on the model's
priority gate (infra.llm.llm_priority), and nothing is recorded, retrieved or changed.

What makes a request a task, first match wins:
- the client says so: header `X-Continuum-Task: <kind>` or body `"metadata": {"continuum_task": "<kind>"}`; the value
  `none` says it is a turn, whatever it looks like;
- Open WebUI's own marker, when a pipeline passes it on: `metadata.task` with one of Open WebUI's task names;
- the shape of Open WebUI's default task prompts (open_webui/config.py, DEFAULT_*_GENERATION_PROMPT_TEMPLATE): one user
  message and no conversation around it, whose text opens with a `### Task:` heading and carries the chat inside a
  `<chat_history>` block (title, tags, follow-ups, search and retrieval queries, image prompt, autocomplete), or asks
  for the speaker's facial expression as an emoji for a fenced `Message:` (emoji).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

import openai
from django.conf import settings

from infra.errors import ValidationFailed
from infra.llm import chat_completion_send, get_client, llm_priority, main_model
from infra.llm_chat import chat_error
from infra.quotas import input_tokens_check, quota_charge_tokens

TASK_HEADER = "X-Continuum-Task"
TASK_FIELD = "continuum_task"  # in the request's `metadata`
NOT_A_TASK = "none"
PRIORITY_KIND = "chat_task"  # not a foreground kind: it waits while a user's turn holds the model
MAX_TOKENS = 160  # a title, a few tags, three to five follow-ups; LLM_MAX_TOKENS["chat_task"] replaces it
_KIND = re.compile(r"^[A-Za-z0-9_.:-]{1,64}$")

# Open WebUI's task names (open_webui/constants.py TASKS) as the kinds Continuum reports.
OPEN_WEBUI_TASKS = {"title_generation": "title", "tags_generation": "tags", "follow_up_generation": "follow_ups",
                    "query_generation": "queries", "autocomplete_generation": "autocomplete",
                    "emoji_generation": "emoji", "image_prompt_generation": "image_prompt",
                    "function_calling": "function_calling", "moa_response_generation": "moa"}

_TASK_HEADING = re.compile(r"\A\s*#{2,4}\s*Task:", re.IGNORECASE)
_CHAT_HISTORY = re.compile(r"<chat_history>.*?</chat_history>", re.DOTALL)
_AUTOCOMPLETE_PARTS = re.compile(r"<type>.*?</type>\s*<text>.*?</text>", re.DOTALL)
_EMOJI = re.compile(r"\A\s*Your task is to reflect the speaker's likely facial expression through a fitting emoji\b"
                    r".*\bMessage:\s*```.*```\s*\Z", re.DOTALL | re.IGNORECASE)
# What an Open WebUI task heading asks for, in its first line (only to name the kind; the shape decides).
_HEADING_KINDS = (("title", "title"), ("tags", "tags"), ("follow-up", "follow_ups"), ("search quer", "queries"),
                  ("image", "image_prompt"))


def chat_task_marked(value) -> str | None:
    """A client's marker (the header's or the metadata field's value) as a task kind, NOT_A_TASK, or None (unmarked);
    a 400 for a value that is not a short name."""
    if value is None:
        return None
    if not isinstance(value, str) or not _KIND.match(value.strip()):
        raise ValidationFailed(f"{TASK_HEADER} (or metadata.{TASK_FIELD}) must be a short name such as 'title', or "
                               f"'{NOT_A_TASK}'.", code="invalid_request", details={"param": TASK_FIELD})
    value = value.strip().lower()
    return NOT_A_TASK if value in (NOT_A_TASK, "false", "0") else value


def _open_webui_kind(text: str) -> str | None:
    """The kind of an Open WebUI task prompt, by its structure; None for anything else."""
    if _EMOJI.match(text):
        return "emoji"
    if not (_TASK_HEADING.match(text) and _CHAT_HISTORY.search(text)):
        return None
    if _AUTOCOMPLETE_PARTS.search(text):
        return "autocomplete"
    heading = text.strip().splitlines()[0:3]
    first = " ".join(heading).lower()
    return next((kind for words, kind in _HEADING_KINDS if words in first), "task")


def chat_task_of(*, header: str | None, metadata: dict | None, user_input: str, earlier: list,
                 continuing: bool = False) -> str | None:
    """The kind of background task a chat request is, or None when it is a turn (see the module's docstring)."""
    metadata = metadata if isinstance(metadata, dict) else {}
    for marked in (chat_task_marked(header), chat_task_marked(metadata.get(TASK_FIELD))):
        if marked is not None:
            return None if marked == NOT_A_TASK else marked
    theirs = metadata.get("task")
    if isinstance(theirs, str) and theirs in OPEN_WEBUI_TASKS:
        return OPEN_WEBUI_TASKS[theirs]
    if earlier or continuing:  # Open WebUI's task requests are one user message; a conversation is a turn
        return None
    return _open_webui_kind(user_input)


@dataclass
class TaskAnswer:
    kind: str
    reply: str
    finish_reason: str = "stop"
    usage: dict = field(default_factory=dict)


def _max_tokens(asked: dict) -> int:
    cap = int(settings.LLM_MAX_TOKENS.get(PRIORITY_KIND) or MAX_TOKENS)
    wanted = [v for k in ("max_tokens", "max_completion_tokens") if isinstance(v := asked.get(k), int) and v > 0]
    return min([cap, *wanted])


def chat_task_answer(*, tenant, kind: str, messages: list[dict], options: dict | None = None) -> TaskAnswer:
    """One model call on the client's own messages, no tools, nothing read from or written to memory or sessions.

    It waits behind a user's turn on the model's priority gate for as long as a turn may run: a chat UI sends its
    title request at the moment it sends the user's message, and on a one-thread local model the two at once made
    the turn run out of time."""
    options = dict(options or {})
    prompt = input_tokens_check(tenant=tenant, text="\n".join(str(m.get("content") or "") for m in messages))
    quota_charge_tokens(tenant=tenant, tokens=prompt)  # a 429 before the model is asked, as for a turn
    body = {"model": main_model(), "messages": messages, "max_tokens": _max_tokens(options),
            **{k: options[k] for k in ("temperature", "top_p") if k in options}}
    if body.get("temperature") is None and settings.ASSISTANT_TEMPERATURE is not None:
        body["temperature"] = settings.ASSISTANT_TEMPERATURE
    client = get_client()
    try:
        with llm_priority(PRIORITY_KIND, hold=settings.ASSISTANT_WALL_CLOCK_SECONDS):
            resp = chat_completion_send(client, body, timeout=settings.LLM_TIMEOUT_SECONDS)
    except openai.OpenAIError as exc:
        raise chat_error(exc) from exc
    choice = resp.choices[0] if resp.choices else None
    usage = {"prompt_tokens": getattr(resp.usage, "prompt_tokens", 0) or 0,
             "completion_tokens": getattr(resp.usage, "completion_tokens", 0) or 0}
    quota_charge_tokens(tenant=tenant, tokens=usage["prompt_tokens"] + usage["completion_tokens"] - prompt,
                        enforce=False)
    return TaskAnswer(kind=kind, reply=(choice.message.content or "") if choice else "",
                      finish_reason=(choice.finish_reason or "stop") if choice else "stop", usage=usage)


def chat_task_messages(*, client_system: str, earlier: list[tuple[str, str]], user_input: str) -> list[dict]:
    """The client's messages as it sent them (its system text, the conversation, the newest user message)."""
    messages = [{"role": "system", "content": client_system}] if client_system.strip() else []
    messages += [{"role": role, "content": text} for role, text in earlier]
    return [*messages, {"role": "user", "content": user_input}]
