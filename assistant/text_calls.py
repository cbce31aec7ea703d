"""Tool calls a model wrote as text: a small model served without a tool-call parser answers
`{"name": ..., "arguments": ...}` (bare, fenced or in call markers) in its content, or a tool's arguments alone.
Also the forgiving parser of a structured call's arguments."""
from __future__ import annotations

import json
import re

import json_repair

_FENCE = re.compile(r"^```(?:json|JSON)?\s*(.*?)\s*```$", re.S)
# Some chat templates wrap a call in these markers; a server that does not parse them passes them on as text.
# A small model also writes the template's other tags (<tool_response>) or tags of its own round a call.
_CALL_MARKERS = re.compile(r"^<([A-Za-z_]{2,32})>\s*(?P<body>.*?)\s*(?:</\1>)?$", re.S)
_LEADING_WRAPPER = re.compile(r"^(?:<[A-Za-z_]{2,32}>|```(?:json|JSON)?)\s*")


def _unwrapped(text: str) -> str:
    text = text.strip()
    for pattern in (_CALL_MARKERS, _FENCE):
        match = pattern.match(text)
        if match:
            text = match.group("body" if pattern is _CALL_MARKERS else 1).strip()
    return text


def json_object(text: str, *, repair: bool) -> dict | None:
    """The JSON object that text is (fences and call markers removed), repaired by json-repair when asked."""
    text = _unwrapped(text)
    if not text.startswith("{"):
        return None
    try:
        value = json.loads(text)
    except ValueError:
        if not repair:
            return None
        try:
            value = json_repair.loads(text)
        except (ValueError, RecursionError):
            return None
    return value if isinstance(value, dict) else None


def parse_arguments(raw) -> tuple[dict | None, str | None]:
    """Tool arguments as a dict, forgiving what models commonly get wrong (fences, trailing commas, single quotes,
    arguments encoded twice: json-repair); (None, reason) when hopeless."""
    if isinstance(raw, dict):
        return raw, None
    text = (raw or "").strip() if isinstance(raw, str) else ""
    if not text:
        return {}, None
    value = None
    try:
        value = json.loads(_unwrapped(text))
        if isinstance(value, str):  # arguments JSON-encoded twice
            value = json.loads(value)
    except (ValueError, TypeError):
        start = text.find("{")
        if start >= 0:
            try:
                value = json_repair.loads(text[start:])
            except (ValueError, RecursionError):
                value = None
    if isinstance(value, dict):
        return value, None
    snippet = text if len(text) <= 120 else text[:117] + "..."
    return None, f"The arguments are not a JSON object: {snippet!r}. Send the arguments as a JSON object."


def opening_object(content: str) -> dict | None:
    """The JSON value a reply opens with (after a tag or fence), repaired if cut off; what follows it is dropped."""
    text = _LEADING_WRAPPER.sub("", (content or "").strip(), count=1)
    if not text.startswith("{"):
        return None
    try:
        value, _ = json.JSONDecoder().raw_decode(text)
    except ValueError:
        try:
            value = json_repair.loads(text)  # cut off by max_tokens, or a stray comma
        except (ValueError, RecursionError):
            return None
        if isinstance(value, list):
            value = value[0] if value else None
    return value if isinstance(value, dict) else None


def call_object(content: str) -> dict | None:
    """The {"name": ..., "arguments": ...} object a reply opens with, if it does (a call's shape). What follows it is
    dropped: a small model often goes on to invent the tool's result, which must never stand in for the real one."""
    value = opening_object(content)
    # A name and its arguments make a call's shape; small models often add keys of their own (a subject, bits of
    # the tool's schema) beside them, which are dropped.
    if value is None or not isinstance(value.get("name"), str) or not set(value) & {"arguments", "parameters"}:
        return None
    return value


def tool_taking(arguments: dict, tools: list[dict]) -> str | None:
    """The one declared tool whose parameters these are (every required one given, nothing it does not take):
    a small model sometimes writes a call's arguments alone, without the tool's name."""
    fits = []
    for tool in tools or []:
        function = tool.get("function") or {}
        params = function.get("parameters") or {}
        known, required = set(params.get("properties") or {}), set(params.get("required") or [])
        if arguments and required <= set(arguments) <= known:
            fits.append(function.get("name"))
    return fits[0] if len(fits) == 1 else None


def written_call_complete(content: str) -> bool:
    """Whether the reply so far opens with a whole call written as text (a name and its arguments, valid JSON):
    what would follow it is never used (content_tool_call keeps the first call only)."""
    text = _LEADING_WRAPPER.sub("", content.lstrip(), count=1)
    if not text.startswith("{"):
        return False
    try:
        value, _ = json.JSONDecoder().raw_decode(text)
    except ValueError:
        return False
    return isinstance(value, dict) and isinstance(value.get("name"), str) and bool(
        set(value) & {"arguments", "parameters"})


class WrittenCallWatch:
    """Fed a streamed reply piece by piece, says when it has written a whole call as text (the model's stop_when):
    generating past it only writes what is never used."""

    def __init__(self):
        self._parts: list[str] = []

    def __call__(self, text: str) -> bool:
        self._parts.append(text)
        # A call's object is complete only at a closing brace: the reply is read again only then.
        return "}" in text and written_call_complete("".join(self._parts))


def content_tool_call(content: str, tools: list[dict]) -> dict | None:
    """A tool call the model wrote as text instead of a structured call, as an OpenAI tool call; None otherwise.

    Small models served without a tool-call parser answer `{"name": ..., "arguments": ...}` (bare, fenced or in
    call markers) in `content`. Only one call of a tool that was offered counts: anything else is left as text."""
    value = call_object(content)
    if value is None:
        arguments = opening_object(content)
        name = tool_taking(arguments, tools) if arguments is not None else None
        value = {"name": name, "arguments": arguments} if name else None
    declared = {(t.get("function") or {}).get("name") for t in tools or []}
    if value is None or value["name"] not in declared:
        return None
    arguments = value.get("arguments", value.get("parameters", {}))
    if isinstance(arguments, str):
        arguments, _ = parse_arguments(arguments)
    if not isinstance(arguments, dict):
        return None
    return {"id": "", "type": "function",
            "function": {"name": value["name"], "arguments": json.dumps(arguments, ensure_ascii=False)}}
