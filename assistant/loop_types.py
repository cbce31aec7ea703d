"""What the ReAct loop deals in: why it stopped, the record of each tool call, its result, and the model and the
answer check it is given (protocols, so a test or another model stands in)."""
from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Callable, Protocol

from infra.llm_chat import CANCELLED, TIMEOUT, ModelReply

__all__ = ["ANSWER", "MAX_STEPS", "TIMEOUT", "LOOP_DETECTED", "CANCELLED", "LLM_ERROR", "CLIENT_TOOLS",
           "ToolCallRecord", "LoopResult", "AnswerCheck", "ChatModel"]

# Why a loop stopped. TIMEOUT and CANCELLED are the model adapter's finish reasons too: a reply cut short stops
# the loop for the same reason.
ANSWER = "answer"
MAX_STEPS = "max_steps"
LOOP_DETECTED = "loop_detected"
LLM_ERROR = "llm_error"
CLIENT_TOOLS = "client_tools"  # the model called a client's tool: the client runs it and continues the turn


@dataclass
class ToolCallRecord:
    id: str
    name: str
    arguments: dict | None
    status: str  # ok | error | repeated | skipped
    observation: dict
    step: int


@dataclass
class LoopResult:
    content: str
    messages: list[dict]  # the loop's own messages, OpenAI format: assistant(tool_calls), tool..., final assistant
    steps: int
    stop_reason: str
    tool_calls: list[ToolCallRecord]
    usage: dict
    pending_calls: list[dict] = field(default_factory=list)  # the client's calls the turn ends with (CLIENT_TOOLS)
    finish_reason: str = "stop"  # OpenAI's: stop, length (the answer was cut) or tool_calls

    @property
    def partial(self) -> bool:
        return self.stop_reason not in (ANSWER, CLIENT_TOOLS)


class AnswerCheck(Protocol):
    """Checks an answer's sentences against the turn's tool calls (assistant/grounding.py), whole or as it streams."""

    def text(self, content: str, records: list[ToolCallRecord]) -> str: ...

    def stream(self, on_delta: Callable[[str], None], records: list[ToolCallRecord]): ...

    def dropped(self) -> list[str]: ...


class ChatModel(Protocol):
    """One model call (infra/llm_chat.py's OpenAIChatModel); stop_when ends a streamed reply early."""

    name: str

    def complete(self, *, messages: list[dict], tools: list[dict], tool_choice: str, deadline: float,
                 on_delta: Callable[[str], None] | None = None, cancel: threading.Event | None = None,
                 stop_when: Callable[[str], bool] | None = None) -> ModelReply: ...
