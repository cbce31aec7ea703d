"""The curated context buffer of a session: one Redis key per session, written only by one Lua script
(buffer_store.py); this module reads it and holds every change a caller can ask for.

The buffer holds what the model sees of the session: turn count, goal stack, a compact tool ledger, facts
extracted this session, summary anchors and the unfolded recent turns. It is disposable: every write sets the
TTL again, and a missing key (TTL, eviction, restart) or one that is behind the database is rebuilt or caught
up from the database on the next read, so no turn is lost. The goal stack, ledger and notes are also kept as a
versioned snapshot on the Session row, because nothing else in the database holds them. The database's view
of the buffer is built in buffer_rebuild.py.
"""
from __future__ import annotations

import hashlib
import json
import logging
import re
from collections.abc import Callable
from dataclasses import dataclass, field

import redis

from infra.errors import NotFound, ValidationFailed
from infra.redis_client import Keys, get_redis
from infra.secrets import secrets_redacted
from infra.sentences import sentences
from memory.extraction.rules import slot_changes
from sessions.models import Session
from sessions.services import session_working_save, sessions_working_rewrite

from .buffer_rebuild import MESSAGE_FIELDS, buffer_build_from_db, message_entry, message_rows
from .buffer_store import doc_normalized, script_run
from .goal_changes import goal_revise

log = logging.getLogger(__name__)


@dataclass
class Buffer:
    """A session's buffer as read from Redis (or rebuilt from the database)."""

    session_id: str
    seq: int = 0  # every message up to this seq is in recent or folded into an anchor
    turns: int = 0  # user messages in the session
    goal: str = ""
    subgoals: list[dict] = field(default_factory=list)  # {key, text, status: open|done}
    tools: list[dict] = field(default_factory=list)  # {tool, args, outcome, status, count}
    facts: list[dict] = field(default_factory=list)  # {id, text}
    anchors: list[dict] = field(default_factory=list)  # {first_seq, last_seq, first_turn, last_turn, text, tokens}
    recent: list[dict] = field(default_factory=list)  # unfolded messages: {id, seq, role, content, ..., tokens}
    notes: dict = field(default_factory=lambda: {"key_findings": [], "open_questions": []})
    anchored_seq: int = 0
    version: int = 0
    unanchored_turns: int = 0
    unanchored_tokens: int = 0

    @property
    def open_subgoals(self) -> list[str]:
        return [s["text"] for s in self.subgoals if s.get("status") != "done"]

    @property
    def done_subgoals(self) -> list[str]:
        """Finished subgoals, each already collapsed to one line."""
        return [s["text"] for s in self.subgoals if s.get("status") == "done"]

    @classmethod
    def from_doc(cls, doc: dict) -> Buffer:
        doc = doc_normalized(doc)
        return cls(session_id=str(doc.get("session_id", "")), seq=int(doc.get("seq", 0)),
                   turns=int(doc.get("turns", 0)), goal=doc.get("goal") or "", subgoals=doc["subgoals"],
                   tools=doc["tools"], facts=doc["facts"], anchors=doc["anchors"], recent=doc["recent"],
                   notes=doc["notes"], anchored_seq=int(doc.get("anchored_seq", 0)), version=int(doc.get("v", 0)),
                   unanchored_turns=int(doc.get("unanchored_turns", 0)),
                   unanchored_tokens=int(doc.get("unanchored_tokens", 0)))


@dataclass(frozen=True)
class WriteResult:
    """What one scripted write reports back: enough to decide whether a fold is due."""

    version: int
    seq: int
    turns: int
    unanchored_turns: int
    unanchored_tokens: int
    working: dict | None
    doc: dict | None
    size_bytes: int


@dataclass(frozen=True)
class _Ids:
    tenant_id: str
    user_id: str
    session_id: str

    @property
    def key(self) -> str:
        return Keys.session_buffer(self.tenant_id, self.user_id, self.session_id)


def _ids(tenant_id, user_id, session_id) -> _Ids:
    return _Ids(str(tenant_id), str(user_id), str(session_id))


def _working(w: dict) -> dict:
    """The snapshot kept on the Session row: goal stack, tool ledger and notes."""
    doc = doc_normalized({"goal": w.get("goal"), "subgoals": w.get("subgoals"), "tools": w.get("tools"),
                          "notes": w.get("notes")})
    return {"goal": doc["goal"] or "", "subgoals": doc["subgoals"], "tools": doc["tools"], "notes": doc["notes"]}


_STORED = frozenset({"messages", "default_goal", "facts", "anchor"})


def _apply(ids: _Ids, op: str, payload: dict, *, return_doc: bool = False) -> WriteResult:
    """Run one scripted write; a missing key is rebuilt from the database first."""
    # What the model or a tool call asks the buffer to hold (a goal, notes, a ledger entry) may repeat what the user
    # typed; what comes from the database (messages, the goal read off them, memories, anchors) is redacted already.
    payload = {k: v if k in _STORED else secrets_redacted(v) for k, v in payload.items()}
    body = json.dumps({**payload, "return_doc": return_doc}, default=str)
    for _ in range(3):
        res = script_run(ids.key, op, body)
        if res[0] == -1:
            _rebuild(ids)
            continue
        working = _working(json.loads(res[6])) if res[6] else None
        result = WriteResult(version=int(res[1]), seq=int(res[2]), turns=int(res[3]), unanchored_turns=int(res[4]),
                             unanchored_tokens=int(res[5]), working=working,
                             doc=json.loads(res[7]) if res[7] else None, size_bytes=int(res[8]))
        if working is not None:
            _persist_working(ids, result)
        return result
    raise redis.exceptions.ResponseError(f"buffer key {ids.key} vanished three times during one write")


def _persist_working(ids: _Ids, result: WriteResult) -> None:
    """Keep the newest goal stack, ledger and notes on the Session row (versions only move forward)."""
    session_working_save(tenant_id=ids.tenant_id, session_id=ids.session_id, working=result.working or {},
                         version=result.version)


# --- reading ----------------------------------------------------------------------------------------------------


def _rebuild(ids: _Ids) -> dict:
    """Write the database's view if the key is still missing; return whatever the key now holds."""
    doc = buffer_build_from_db(tenant_id=ids.tenant_id, user_id=ids.user_id, session_id=ids.session_id)
    if script_run(ids.key, "create", json.dumps(doc, default=str))[0] == 1:
        return doc
    raw = get_redis().get(ids.key)
    return json.loads(raw) if raw else doc


def _decoded(ids: _Ids, raw: bytes) -> dict | None:
    """The stored document; one that cannot be read is dropped (the database rebuilds it)."""
    try:
        doc = json.loads(raw)
        if isinstance(doc, dict):
            return doc
    except ValueError:
        pass
    log.warning("dropping an unreadable buffer at %s", ids.key)
    get_redis().delete(ids.key)
    return None


def _db_seq(ids: _Ids) -> int:
    seq = (Session.objects.for_tenant(ids.tenant_id).filter(pk=ids.session_id, user_id=ids.user_id)
           .values_list("message_seq", flat=True).first())
    if seq is None:
        raise NotFound("Session not found.")
    return seq


def buffer_get(*, tenant_id, user_id, session_id, db_seq: int | None = None) -> Buffer:
    """The session's buffer: rebuilt when the key is gone, caught up when it is behind the database.

    db_seq is the session's message_seq when the caller has just read it (saves a query). Redis errors
    propagate (the API answers 503).
    """
    ids = _ids(tenant_id, user_id, session_id)
    raw = get_redis().get(ids.key)
    if db_seq is None:
        db_seq = _db_seq(ids)
    doc = _decoded(ids, raw) if raw else None
    if doc is None:
        doc = _rebuild(ids)
    if int(doc.get("seq", 0)) < db_seq:
        # An append reached the database but not Redis (or the key was compacted): catch up.
        rows = message_rows(ids.tenant_id, ids.session_id, seq__gt=int(doc.get("seq", 0)), seq__lte=db_seq)
        doc = _apply(ids, "append", {"messages": rows}, return_doc=True).doc or doc
    return Buffer.from_doc(doc)


# --- writes ----------------------------------------------------------------------------------------------------

_GOAL_CUE = re.compile(r"\b(i want|i need|i'd like|i would like|looking for|trying to|help me|plan(?:ning)?|"
                       r"goal|hoping to|find me|book)\b", re.I)


def _default_goal(rows: list[dict]) -> str:
    """The session's goal until someone sets one: the first user sentence that states what they want."""
    for m in rows:
        if m["role"] != "user":
            continue
        sents = sentences(m["content"])
        for s in sents:
            if _GOAL_CUE.search(s):
                return _one_line(s, 300)
        if sents and len(sents[0].split()) >= 4:
            return _one_line(sents[0], 300)
    return ""


def _one_line(text, limit: int) -> str:
    line = " ".join(str(text).split())
    return line if len(line) <= limit else line[: limit - 1].rstrip() + "…"


def _subgoal_key(text: str) -> str:
    return " ".join(re.sub(r"[^\w\s]", " ", text.lower()).split())[:200]


def buffer_append_messages(*, tenant_id, user_id, session_id, message_ids: list,
                           messages: list | None = None) -> WriteResult | None:
    """Add committed messages to the buffer (a missing or stale key is rebuilt from the database first).

    `messages`: the committed Message rows themselves, when the caller has them (saves reading them back).
    Redis errors propagate: the caller decides whether a turn may go on without the buffer.
    """
    if not message_ids:
        return None
    ids = _ids(tenant_id, user_id, session_id)
    wanted = {str(m) for m in message_ids}
    if messages is not None:
        rows = sorted((message_entry({f: getattr(m, f) for f in MESSAGE_FIELDS}) for m in messages
                       if str(m.pk) in wanted and str(m.session_id) == ids.session_id), key=lambda m: m["seq"])
    else:
        rows = message_rows(ids.tenant_id, ids.session_id, pk__in=list(wanted))
    if not rows:
        return None
    changes = [change for m in rows if m["role"] == "user" for change in slot_changes(m["content"])]
    result = _apply(ids, "append", {"messages": rows, "default_goal": _default_goal(rows)}, return_doc=bool(changes))
    if changes and result.doc is not None:
        goal = result.doc.get("goal") or ""
        revised = goal_revise(goal, changes)
        if revised != goal:
            _apply(ids, "goal", {"goal": _one_line(revised, 500)})
    return result


def buffer_set_goal(*, tenant_id, user_id, session_id, goal: str) -> Buffer:
    goal = _one_line(goal or "", 500)
    return Buffer.from_doc(_apply(_ids(tenant_id, user_id, session_id), "goal", {"goal": goal}, return_doc=True).doc)


def buffer_add_subgoal(*, tenant_id, user_id, session_id, text: str) -> Buffer:
    text = _one_line(text or "", 300)
    if not text:
        raise ValidationFailed("A subgoal needs text.")
    res = _apply(_ids(tenant_id, user_id, session_id), "subgoal_add", {"key": _subgoal_key(text), "text": text},
                 return_doc=True)
    return Buffer.from_doc(res.doc)


def buffer_complete_subgoal(*, tenant_id, user_id, session_id, text: str) -> Buffer:
    """Mark a subgoal done (added as done if it was never opened); it collapses to one short line."""
    text = _one_line(text or "", 300)
    if not text:
        raise ValidationFailed("A subgoal needs text.")
    res = _apply(_ids(tenant_id, user_id, session_id), "subgoal_done",
                 {"key": _subgoal_key(text), "text": _one_line(text, 100)}, return_doc=True)
    return Buffer.from_doc(res.doc)


def argument_digest(arguments) -> str:
    """A short, stable rendering of tool arguments: readable when small, hashed when long."""
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except ValueError:
            pass
    flat = json.dumps(arguments, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str) \
        if not isinstance(arguments, str) else arguments
    flat = " ".join(flat.split())
    if len(flat) <= 80:
        return flat
    return flat[:60] + "…#" + hashlib.sha1(flat.encode()).hexdigest()[:8]


def buffer_record_tool(*, tenant_id, user_id, session_id, tool: str, arguments, outcome, status: str = "ok") -> Buffer:
    """One line in the tool ledger; the same call repeated bumps a count instead of adding a line."""
    if not isinstance(outcome, str):
        outcome = json.dumps(outcome, ensure_ascii=False, default=str)
    payload = {"tool": _one_line(tool or "tool", 64), "args": argument_digest(arguments),
               "outcome": _one_line(outcome, 160), "status": _one_line(status or "ok", 20)}
    return Buffer.from_doc(_apply(_ids(tenant_id, user_id, session_id), "tool", payload, return_doc=True).doc)


def buffer_update_notes(*, tenant_id, user_id, session_id, key_findings: list[str] | None = None,
                        open_questions: list[str] | None = None) -> Buffer:
    """Replace the session's key findings and/or open questions (None leaves a list as it is)."""
    payload = {}
    for name, items in (("key_findings", key_findings), ("open_questions", open_questions)):
        if items is None:
            continue
        if isinstance(items, str) or not isinstance(items, list | tuple):
            raise ValidationFailed(f"{name} must be a list of strings.")
        payload[name] = [_one_line(i, 200) for i in items if str(i).strip()][:20]
    return Buffer.from_doc(_apply(_ids(tenant_id, user_id, session_id), "notes", payload, return_doc=True).doc)


def buffer_add_facts(*, tenant_id, user_id, session_id, facts: list[dict]) -> WriteResult | None:
    """Facts extracted this session ({id, text}); known ids are ignored."""
    clean = [{"id": str(f["id"]), "text": _one_line(f.get("text", ""), 300)} for f in facts or [] if f.get("id")]
    if not clean:
        return None
    return _apply(_ids(tenant_id, user_id, session_id), "facts", {"facts": clean})


def buffer_add_anchor(*, tenant_id, user_id, session_id, anchor) -> WriteResult:
    """Put a persisted SummaryAnchor into the buffer and drop the turns it folds."""
    payload = {"anchor": {"first_seq": anchor.first_seq, "last_seq": anchor.last_seq, "first_turn": anchor.first_turn,
                          "last_turn": anchor.last_turn, "text": anchor.text, "tokens": anchor.token_count,
                          "method": anchor.method}}
    return _apply(_ids(tenant_id, user_id, session_id), "anchor", payload)


def buffer_compact(*, tenant_id, user_id, session_id) -> dict | None:
    """Shrink an idle session's buffer to anchors, goal stack and facts; unfolded turns reload on the next read.

    Returns {"before_bytes", "after_bytes"}, or None when there is no buffer to compact.
    """
    ids = _ids(tenant_id, user_id, session_id)
    client = get_redis()
    before = client.strlen(ids.key)
    if not before:
        return None
    res = script_run(ids.key, "compact", "{}")
    if res[0] == -1:
        return None
    return {"before_bytes": int(before), "after_bytes": int(res[8])}


def buffer_delete(*, tenant_id, user_id, session_id) -> bool:
    return bool(get_redis().delete(_ids(tenant_id, user_id, session_id).key))


def _working_rewritten(working: dict, rewrite: Callable[[str], str]) -> dict:
    w = _working(working)
    subgoals = [{**s, "text": rewrite(s.get("text") or "").strip()} for s in w["subgoals"]]
    notes = {k: [t for t in (rewrite(str(i)).strip() for i in v) if t] for k, v in w["notes"].items()}
    tools = [{**t, "args": rewrite(str(t.get("args") or "")).strip(), "outcome": rewrite(str(t.get("outcome") or ""))
              .strip()} for t in w["tools"]]
    return {"goal": rewrite(w["goal"]).strip(), "subgoals": [s for s in subgoals if s["text"]], "tools": tools,
            "notes": notes}


def buffer_working_rewrite(*, tenant_id, user_id, rewrite: Callable[[str], str]) -> int:
    """Rewrite the goal stack, tool ledger and notes kept on each of the user's sessions (words the user took back),
    then drop the open sessions' buffers: each is rebuilt from the rewritten rows on its next read, and the bridge
    of a session closed later is written from them. Returns how many sessions changed."""
    def change(s: Session) -> tuple[dict, str] | None:
        working = s.working_state if isinstance(s.working_state, dict) else {}
        new = _working_rewritten({**working, "goal": working.get("goal") or s.goal}, rewrite)
        goal = rewrite(s.goal).strip()
        if (new, goal) != (_working({**working, "goal": working.get("goal") or s.goal}), s.goal):
            return new, goal
        return None

    changed = sessions_working_rewrite(tenant_id=tenant_id, user_id=user_id, change=change)
    for sid in Session.objects.for_tenant(tenant_id).filter(user_id=user_id, state=Session.State.OPEN) \
            .values_list("pk", flat=True):
        try:
            buffer_delete(tenant_id=tenant_id, user_id=user_id, session_id=sid)
        except redis.exceptions.RedisError:
            log.warning("the buffer of session %s could not be dropped; it expires on its own", sid)
    return changed

