"""How a session's buffer is stored: one JSON document per session under one Redis key, written only by one Lua
script, and the shape every document read back is normalised to (cjson writes an empty list as {})."""
from __future__ import annotations

import json
import time

from django.conf import settings
from redis.commands.core import Script

from infra.redis_client import get_redis

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


def doc_normalized(doc: dict) -> dict:
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


def _limits() -> str:
    return json.dumps({"tools": settings.CONTINUUM_BUFFER_TOOL_LEDGER, "facts": settings.CONTINUUM_BUFFER_MAX_FACTS,
                       "anchors": settings.CONTINUUM_BUFFER_MAX_ANCHORS,
                       "subgoals": settings.CONTINUUM_BUFFER_MAX_SUBGOALS, "compact_tools": 5})


def script_run(key: str, op: str, payload: str) -> list:
    """Run the script once on the key: its reply is a list whose first item is 1, 0 (create: key exists) or -1
    (the key is missing)."""
    global _script
    client = get_redis()
    if _script is None:
        _script = client.register_script(_LUA)
    ttl_ms = int(settings.CONTINUUM_BUFFER_TTL_SECONDS * 1000)
    return _script(keys=[key], args=[op, ttl_ms, payload, f"{time.time():.3f}", _limits()], client=client)
