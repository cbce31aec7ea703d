"""The curated context buffer of a session: one Redis key per session, written only by one Lua script.

The buffer holds what the model sees of the session: turn count, goal stack, a compact tool ledger, facts
extracted this session, summary anchors and the unfolded recent turns. It is disposable: every write sets the
TTL again, and a missing key (TTL, eviction, restart) or one that is behind the database is rebuilt or caught
up from the database on the next read, so no turn is lost. The goal stack, ledger and notes are also kept as a
versioned snapshot on the Session row, because nothing else in the database holds them.
"""
from __future__ import annotations

import hashlib
import json
import logging
import re
import time
from dataclasses import dataclass, field

import redis
from django.conf import settings
from redis.commands.core import Script

from infra.errors import NotFound, ValidationFailed
from infra.redis_client import Keys, get_redis
from infra.sentences import sentences
from memory.selectors import session_facts

log = logging.getLogger(__name__)

# KEYS[1]: the buffer key. ARGV: op, ttl in ms, payload JSON, now (epoch seconds), limits JSON.
# Reads, changes and writes the document in one step, so concurrent writers cannot lose each other's
# updates, and every write sets the TTL again (there is no other writer of this key).
_LUA = r"""
local key, op, ttl = KEYS[1], ARGV[1], tonumber(ARGV[2])
if op == 'create' then
  if redis.call('SET', key, ARGV[3], 'PX', ttl, 'NX') then return {1} end
  return {0}
end
local raw = redis.call('GET', key)
if not raw then return {-1} end
local doc = cjson.decode(raw)
local p = cjson.decode(ARGV[3])
local lim = cjson.decode(ARGV[5])

local function list(x) if type(x) == 'table' then return x end return {} end
local function keep_newest(t, n) while #t > n do table.remove(t, 1) end end
-- cjson writes an empty array as {}; normalise every list on the way in.
for _, f in ipairs({'recent', 'anchors', 'subgoals', 'tools', 'facts'}) do doc[f] = list(doc[f]) end
if type(doc.notes) ~= 'table' then doc.notes = {} end
doc.notes.key_findings = list(doc.notes.key_findings)
doc.notes.open_questions = list(doc.notes.open_questions)
if type(doc.goal) ~= 'string' then doc.goal = '' end
doc.anchored_seq = tonumber(doc.anchored_seq) or 0
doc.base_turns = tonumber(doc.base_turns) or 0
doc.seq = tonumber(doc.seq) or 0
doc.v = tonumber(doc.v) or 0

local working = false
if op == 'append' then
  local at = {}
  for i, m in ipairs(doc.recent) do at[m.seq] = i end
  for _, m in ipairs(list(p.messages)) do
    if m.seq > doc.anchored_seq then
      if at[m.seq] then doc.recent[at[m.seq]] = m else table.insert(doc.recent, m); at[m.seq] = #doc.recent end
    end
  end
  table.sort(doc.recent, function(a, b) return a.seq < b.seq end)
  if doc.goal == '' and type(p.default_goal) == 'string' and p.default_goal ~= '' then
    doc.goal = p.default_goal; working = true
  end
elseif op == 'goal' then
  doc.goal = p.goal; working = true
elseif op == 'subgoal_add' or op == 'subgoal_done' then
  local status = 'open'
  if op == 'subgoal_done' then status = 'done' end
  local found = false
  for _, s in ipairs(doc.subgoals) do
    if s.key == p.key then found = true; s.status = status; s.text = p.text end
  end
  if not found then table.insert(doc.subgoals, {key = p.key, text = p.text, status = status}) end
  -- over the cap, finished subgoals go first, oldest first
  local i = 1
  while #doc.subgoals > lim.subgoals and i <= #doc.subgoals do
    if doc.subgoals[i].status == 'done' then table.remove(doc.subgoals, i) else i = i + 1 end
  end
  keep_newest(doc.subgoals, lim.subgoals)
  working = true
elseif op == 'tool' then
  local last = doc.tools[#doc.tools]
  if last and last.tool == p.tool and last.args == p.args then
    last.outcome = p.outcome; last.status = p.status; last.count = (tonumber(last.count) or 1) + 1
  else
    table.insert(doc.tools, {tool = p.tool, args = p.args, outcome = p.outcome, status = p.status, count = 1})
  end
  keep_newest(doc.tools, lim.tools)
  working = true
elseif op == 'notes' then
  if p.key_findings ~= nil then doc.notes.key_findings = list(p.key_findings) end
  if p.open_questions ~= nil then doc.notes.open_questions = list(p.open_questions) end
  working = true
elseif op == 'facts' then
  local have = {}
  for _, f in ipairs(doc.facts) do have[f.id] = true end
  for _, f in ipairs(list(p.facts)) do
    if not have[f.id] then table.insert(doc.facts, f); have[f.id] = true end
  end
  keep_newest(doc.facts, lim.facts)
elseif op == 'anchor' then
  local a = p.anchor
  local dup = false
  for _, x in ipairs(doc.anchors) do if x.first_seq == a.first_seq then dup = true end end
  if not dup then
    table.insert(doc.anchors, a)
    table.sort(doc.anchors, function(x, y) return x.first_seq < y.first_seq end)
  end
  keep_newest(doc.anchors, lim.anchors)
  if a.last_seq > doc.anchored_seq then
    doc.anchored_seq = a.last_seq
    if a.last_turn > doc.base_turns then doc.base_turns = a.last_turn end
    local rest = {}
    for _, m in ipairs(doc.recent) do if m.seq > a.last_seq then table.insert(rest, m) end end
    doc.recent = rest
  end
elseif op == 'compact' then
  -- Unfolded turns leave Redis; the high-water mark goes back so the next read reloads them from the database.
  doc.recent = {}
  doc.seq = doc.anchored_seq
  keep_newest(doc.tools, lim.compact_tools)
else
  return redis.error_reply('unknown buffer op ' .. tostring(op))
end

local present, turns, tokens = {}, 0, 0
for _, m in ipairs(doc.recent) do
  present[m.seq] = true
  if m.role == 'user' then turns = turns + 1 end
  tokens = tokens + (tonumber(m.tokens) or 0)
end
local s = math.max(doc.seq, doc.anchored_seq)
while present[s + 1] do s = s + 1 end
doc.seq = s
doc.turns = doc.base_turns + turns
doc.unanchored_turns = turns
doc.unanchored_tokens = tokens
doc.v = doc.v + 1
doc.updated_at = tonumber(ARGV[4])
local out = cjson.encode(doc)
redis.call('SET', key, out, 'PX', ttl)
local w = ''
if working then w = cjson.encode({goal = doc.goal, subgoals = doc.subgoals, tools = doc.tools, notes = doc.notes}) end
local ret = ''
if p.return_doc then ret = out end
return {1, doc.v, doc.seq, doc.turns, turns, tokens, w, ret, string.len(out)}
"""

_script: Script | None = None

_LIST_FIELDS = ("recent", "anchors", "subgoals", "tools", "facts")
_MESSAGE_FIELDS = ("id", "seq", "role", "content", "name", "tool_calls", "tool_call_id", "token_count", "created_at")


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
        doc = _normalized(doc)
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


def _normalized(doc: dict) -> dict:
    for f in _LIST_FIELDS:
        if not isinstance(doc.get(f), list):
            doc[f] = []
    notes = doc.get("notes") if isinstance(doc.get("notes"), dict) else {}
    doc["notes"] = {k: notes[k] if isinstance(notes.get(k), list) else [] for k in ("key_findings", "open_questions")}
    for s in doc["subgoals"]:
        s.setdefault("status", "open")
    for m in doc["recent"]:
        if not isinstance(m.get("tool_calls"), list):
            m["tool_calls"] = []
    return doc


def _working(w: dict) -> dict:
    """The snapshot kept on the Session row: goal stack, tool ledger and notes."""
    doc = _normalized({"goal": w.get("goal"), "subgoals": w.get("subgoals"), "tools": w.get("tools"),
                       "notes": w.get("notes")})
    return {"goal": doc["goal"] or "", "subgoals": doc["subgoals"], "tools": doc["tools"], "notes": doc["notes"]}


def _limits() -> str:
    return json.dumps({"tools": settings.CONTINUUM_BUFFER_TOOL_LEDGER, "facts": settings.CONTINUUM_BUFFER_MAX_FACTS,
                       "anchors": settings.CONTINUUM_BUFFER_MAX_ANCHORS,
                       "subgoals": settings.CONTINUUM_BUFFER_MAX_SUBGOALS, "compact_tools": 5})


def _run(ids: _Ids, op: str, payload: str) -> list:
    global _script
    client = get_redis()
    if _script is None:
        _script = client.register_script(_LUA)
    ttl_ms = int(settings.CONTINUUM_BUFFER_TTL_SECONDS * 1000)
    return _script(keys=[ids.key], args=[op, ttl_ms, payload, f"{time.time():.3f}", _limits()], client=client)


def _apply(ids: _Ids, op: str, payload: dict, *, return_doc: bool = False) -> WriteResult:
    """Run one scripted write; a missing key is rebuilt from the database first."""
    body = json.dumps({**payload, "return_doc": return_doc}, default=str)
    for _ in range(3):
        res = _run(ids, op, body)
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
    from sessions.models import Session

    w = result.working or {}
    Session.objects.for_tenant(ids.tenant_id).filter(pk=ids.session_id, working_version__lt=result.version).update(
        working_state=w, working_version=result.version, goal=(w.get("goal") or "")[:2000])


# --- reading and rebuilding -----------------------------------------------------------------------------------


def message_entry(row: dict) -> dict:
    """A message as the buffer keeps it."""
    created = row.get("created_at")
    return {"id": str(row["id"]), "seq": int(row["seq"]), "role": row["role"], "content": row.get("content") or "",
            "name": row.get("name") or "", "tool_calls": row.get("tool_calls") or [],
            "tool_call_id": row.get("tool_call_id") or "", "tokens": int(row.get("token_count") or 0),
            "at": created.isoformat() if hasattr(created, "isoformat") else created}


def _message_rows(tenant_id: str, session_id: str, **filters) -> list[dict]:
    from sessions.models import Message

    return [message_entry(r) for r in
            Message.objects.for_tenant(tenant_id).filter(session_id=session_id, **filters).order_by("seq")
            .values(*_MESSAGE_FIELDS)]


def buffer_build_from_db(*, tenant_id, user_id, session_id) -> dict:
    """The buffer document as the database alone gives it (the rebuild; also what the bridge reads)."""
    from sessions.models import Session

    from .models import SummaryAnchor

    ids = _ids(tenant_id, user_id, session_id)
    row = (Session.objects.for_tenant(ids.tenant_id).filter(pk=ids.session_id, user_id=ids.user_id)
           .values("message_seq", "goal", "working_state", "working_version").first())
    if row is None:
        raise NotFound("Session not found.")
    anchors = list(SummaryAnchor.objects.for_tenant(ids.tenant_id).filter(session_id=ids.session_id)
                   .order_by("-last_seq")
                   .values("first_seq", "last_seq", "first_turn", "last_turn", "text", "token_count", "method")
                   [: settings.CONTINUUM_BUFFER_MAX_ANCHORS])[::-1]
    anchored_seq = anchors[-1]["last_seq"] if anchors else 0
    base_turns = anchors[-1]["last_turn"] if anchors else 0
    recent = _message_rows(ids.tenant_id, ids.session_id, seq__gt=anchored_seq, seq__lte=row["message_seq"])
    facts = session_facts(tenant_id=ids.tenant_id, session_id=ids.session_id,
                          limit=settings.CONTINUUM_BUFFER_MAX_FACTS)
    working = row["working_state"] if isinstance(row["working_state"], dict) else {}
    doc = _normalized({
        "session_id": ids.session_id, "v": row["working_version"], "goal": working.get("goal") or row["goal"] or "",
        "subgoals": working.get("subgoals"), "tools": working.get("tools"), "notes": working.get("notes"),
        "facts": facts,
        "anchors": [{"first_seq": a["first_seq"], "last_seq": a["last_seq"], "first_turn": a["first_turn"],
                     "last_turn": a["last_turn"], "text": a["text"], "tokens": a["token_count"],
                     "method": a["method"]} for a in anchors],
        "recent": recent, "anchored_seq": anchored_seq, "base_turns": base_turns,
    })
    # The same derived fields the script computes; database messages have no gaps.
    turns = sum(1 for m in recent if m["role"] == "user")
    doc.update(seq=max(row["message_seq"], anchored_seq), turns=base_turns + turns, unanchored_turns=turns,
               unanchored_tokens=sum(m["tokens"] for m in recent), updated_at=time.time())
    return doc


def _rebuild(ids: _Ids) -> dict:
    """Write the database's view if the key is still missing; return whatever the key now holds."""
    doc = buffer_build_from_db(tenant_id=ids.tenant_id, user_id=ids.user_id, session_id=ids.session_id)
    if _run(ids, "create", json.dumps(doc, default=str))[0] == 1:
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
    from sessions.models import Session

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
        rows = _message_rows(ids.tenant_id, ids.session_id, seq__gt=int(doc.get("seq", 0)), seq__lte=db_seq)
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
        rows = sorted((message_entry({f: getattr(m, f) for f in _MESSAGE_FIELDS}) for m in messages
                       if str(m.pk) in wanted and str(m.session_id) == ids.session_id), key=lambda m: m["seq"])
    else:
        rows = _message_rows(ids.tenant_id, ids.session_id, pk__in=list(wanted))
    if not rows:
        return None
    return _apply(ids, "append", {"messages": rows, "default_goal": _default_goal(rows)})


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
    res = _run(ids, "compact", "{}")
    if res[0] == -1:
        return None
    return {"before_bytes": int(before), "after_bytes": int(res[8])}


def buffer_delete(*, tenant_id, user_id, session_id) -> bool:
    return bool(get_redis().delete(_ids(tenant_id, user_id, session_id).key))
