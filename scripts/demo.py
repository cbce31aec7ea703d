#!/usr/bin/env python
"""Play a returning user's two sessions against a running Continuum server over HTTP and print each step.

Session 1 plans a flight (SFO to NYC next Tuesday, under $400, aisle seats, never United), then moves the destination
to Newark and closes. Session 2 opens with the bridge summary and answers from what was remembered, with provenance,
NYC superseded by Newark. With LLM_BASE_URL set the server's own assistant answers (POST .../turns); otherwise the
demo plays the client's assistant lines itself and shows the context Continuum composes (memory-service mode).

    python scripts/demo.py --base-url http://127.0.0.1:8000 --api-key <key>
"""
from __future__ import annotations

import argparse
import os
import sys
import textwrap
import time

import httpx

SESSION_1 = [
    ("I need a flight from SFO to NYC next Tuesday, under $400.",
     "Got it: SFO to NYC next Tuesday, under $400. Any seat or airline preferences?"),
    ("I prefer aisle seats, and never United.",
     "Noted: aisle seats, and no United flights."),
    ("Actually, change the destination to Newark.",
     "Done: SFO to Newark next Tuesday, under $400, aisle seat, no United."),
]
# What the returning user should get back, and the words that show the answer gives it.
EXPECTED_BACK = [("the destination (Newark)", ("newark",)), ("aisle seats", ("aisle",)),
                 ("never United", ("united",))]
SESSION_2 = "Hi, I'm back. Which flight were we looking at, and what should I keep in mind when I book it?"
WAIT_SECONDS = float(os.environ.get("DEMO_WAIT_SECONDS", "90"))  # background work on a CPU model takes longer


class DemoError(Exception):
    pass


class Api:
    def __init__(self, base_url: str, api_key: str, timeout: float):
        self.http = httpx.Client(base_url=base_url.rstrip("/"), timeout=timeout,
                                 headers={"Authorization": f"Bearer {api_key}"})

    def __call__(self, method: str, path: str, **kwargs):
        try:
            resp = self.http.request(method, f"/api/v1{path}", **kwargs)
        except httpx.HTTPError as exc:
            raise DemoError(f"{method} {path}: {exc}") from exc
        if resp.status_code >= 400:
            raise DemoError(f"{method} {path} -> {resp.status_code}: {resp.text[:500]}")
        return resp.json() if resp.content else None


def say(text: str = "", indent: int = 0) -> None:
    prefix = " " * indent
    for line in (text.splitlines() or [""]):
        print(textwrap.fill(line, width=100, initial_indent=prefix, subsequent_indent=prefix + "  ") if line else "")
    sys.stdout.flush()


def step(title: str) -> None:
    say()
    say(f"== {title}")


def wait_for(what: str, probe, timeout: float = WAIT_SECONDS, interval: float = 1.0):
    """Poll until probe() returns something truthy; background work (extraction, bridge) takes a moment."""
    deadline = time.monotonic() + timeout
    value = probe()
    while not value and time.monotonic() < deadline:
        time.sleep(interval)
        value = probe()
    if not value:
        say(f"(still waiting for {what} after {timeout:.0f} s; is the Celery worker running?)", 2)
    return value


def all_memories(api: Api, user_id: str, status: str | None = None) -> list[dict]:
    params = {"limit": 200, **({"status": status} if status else {})}
    return api("GET", f"/users/{user_id}/memories", params=params)["results"]


def show_memories(memories: list[dict]) -> None:
    if not memories:
        say("(none)", 2)
    for m in memories:
        extra = f" -> superseded by {m['superseded_by'][:8]}" if m.get("superseded_by") else ""
        say(f"[{m['status']:<10}] {m['kind']:<10} {m['text']}  ({m['source_type']}){extra}", 2)


def show_retrieved(memories: list[dict]) -> None:
    if not memories:
        say("(no memories retrieved)", 2)
    for m in memories:
        say(f"- {m['text']}  — {m.get('provenance') or m.get('source_type', '')}", 2)


def show_turn(result: dict, seconds: float) -> None:
    for call in result.get("tool_calls", []):
        say(f"tool {call['name']}({call.get('arguments')}) -> {call['status']}", 2)
    say(f"assistant: {result['reply']}", 2)
    for change in result.get("grounding") or []:
        # A sentence claiming an action no tool call of the turn did never reaches the user as written.
        replaced = f'replaced by "{change["replaced_by"]}"' if change["replaced_by"] else "dropped"
        say(f'(claimed what no tool did, {replaced}: "{change["sentence"]}")', 2)
    if result.get("stop_reason") != "answer":
        say(f"(stopped: {result.get('stop_reason')})", 2)
    usage = result.get("usage") or {}
    say(f"({usage.get('model_calls', '?')} model calls, {usage.get('completion_tokens', '?')} tokens generated, "
        f"{seconds:.1f} s)", 2)


def turn(api: Api, session_id: str, line: str) -> dict:
    started = time.monotonic()
    result = api("POST", f"/sessions/{session_id}/turns", json={"input": line})
    show_turn(result, time.monotonic() - started)
    return result


def context_of(api: Api, session_id: str, text: str) -> dict:
    return api("GET", f"/sessions/{session_id}/context", params={"input": text})


def bridge_in(context: dict) -> str:
    """The bridge summaries the composer put into a session's first-turn context."""
    return "\n".join(f"({b['kind']}) {b['text']}" for b in context.get("bridges") or [])


def session_1_extracted(api: Api, user_id: str):
    """The memories, once every line of session 1 has been extracted (each leaves at least its event memory):
    extraction runs per message in the background, in no fixed order."""
    memories = all_memories(api, user_id)
    texts = " ".join(m["text"] for m in memories)
    return memories if all(line in texts for line, _ in SESSION_1) else None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base-url", default=os.environ.get("CONTINUUM_URL", "http://127.0.0.1:8000"))
    parser.add_argument("--api-key", default=os.environ.get("CONTINUUM_API_KEY"), required=not os.environ.get(
        "CONTINUUM_API_KEY"))
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds per HTTP request")
    args = parser.parse_args()
    api = Api(args.base_url, args.api_key, args.timeout)
    assistant = bool(os.environ.get("LLM_BASE_URL"))

    step("Mode")
    if assistant:
        say(f"assistant mode: LLM_BASE_URL is set ({os.environ['LLM_BASE_URL']}); each user line goes to "
            "POST /sessions/{id}/turns and Continuum's own ReAct loop answers with memory tools.", 2)
    else:
        say("memory-service mode: LLM_BASE_URL is not set, so the demo plays the client's own assistant lines "
            "(POST /sessions/{id}/messages) and shows the context Continuum composes for the client's model "
            "(GET /sessions/{id}/context).", 2)

    step("A user arrives")
    user = api("POST", "/users", json={"external_id": f"demo-traveller-{int(time.time())}", "display_name": "Dana"})
    say(f"user {user['id']} (external id {user['external_id']})", 2)

    step("Session 1: planning a trip")
    s1 = api("POST", "/sessions", json={"user_id": user["id"], "title": "Flight to New York"})
    say(f"session {s1['id']} opened", 2)
    for line, scripted_reply in SESSION_1:
        say()
        say(f"user: {line}", 2)
        if assistant:
            turn(api, s1["id"], line)
        else:
            api("POST", f"/sessions/{s1['id']}/messages",
                json={"messages": [{"role": "user", "content": line},
                                   {"role": "assistant", "content": scripted_reply}]})
            say(f"assistant (client's model): {scripted_reply}", 2)

    step("What Continuum remembered from session 1 (extraction runs in the background)")
    show_memories(wait_for("the extraction of every message", lambda: session_1_extracted(api, user["id"]))
                  or all_memories(api, user["id"]))

    step("Session 1 closes")
    closed = api("POST", f"/sessions/{s1['id']}/close")
    say(f"session {closed['id']} is {closed['state']}; the bridge summary is written in the background", 2)

    step("Session 2, days later: the user returns")
    s2 = api("POST", "/sessions", json={"user_id": user["id"], "title": "Back for the flight"})
    say(f"session {s2['id']} opened, previous session {s2.get('previous_id')}", 2)
    def context_with_bridge():
        context = context_of(api, s2["id"], SESSION_2)
        return context if bridge_in(context) else None

    context = wait_for("the bridge summary", context_with_bridge) or context_of(api, s2["id"], SESSION_2)
    say("session 2 starts from the bridge of session 1:", 2)
    say(bridge_in(context) or "(no bridge yet)", 4)

    say()
    say(f"user: {SESSION_2}", 2)
    if assistant:
        result = turn(api, s2["id"], SESSION_2)
        step("Memories the answer used, with provenance")
        show_retrieved(result.get("memories_used", []))
        step("What the answer gives back")
        reply = result["reply"].lower()
        for what, words in EXPECTED_BACK:
            say(f"{'yes' if any(w in reply for w in words) else 'NO '}  {what}", 2)
        breakdown = result.get("breakdown", {})
    else:
        step("The context Continuum composed for the client's model")
        show_retrieved(context.get("memories", []))
        breakdown = context.get("breakdown", {})
        # Only what was really said is stored: the user's message. With no model here there is no answer to keep;
        # a client's own model would answer from this context and the client would store its reply too.
        api("POST", f"/sessions/{s2['id']}/messages", json={"messages": [{"role": "user", "content": SESSION_2}]})
        say("(no model here: the client's own model answers from this context, and the client stores its reply)", 2)
    say(f"context tokens by section: {breakdown}", 2)

    step("NYC was superseded by Newark (history kept)")
    show_memories(all_memories(api, user["id"], status="superseded"))
    say()
    say(f"done: user {user['id']}, sessions {s1['id']} and {s2['id']}")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except DemoError as exc:
        print(f"demo failed: {exc}", file=sys.stderr)
        sys.exit(1)
