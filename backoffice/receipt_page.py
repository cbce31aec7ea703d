"""A context receipt as a reviewer reads it: the sections' token counts in a table (the bridge with its text), each
item given to the model linked to its memory and its source messages (and their sessions) with its score rounded,
and what was left out and why. It reads memory, sessions and context to link them, so it lives here; a few bounded
queries whatever the receipt holds."""
from __future__ import annotations

from dataclasses import dataclass, field

from context.models import BridgeSummary, SessionLink
from memory.models import MemoryRecord
from memory.overview import with_removal
from orchestration.models import ContextReceipt, ContextReceiptItem
from sessions.labels import session_words
from sessions.models import Message, Session

# The composer's sections, in the order the context holds them, in words.
SECTION_WORDS = {
    "system": "system prompt and tools",
    "profile": "standing profile",
    "bridge": "bridge from the last session",
    "anchors": "summaries of older turns",
    "state": "goals and working state",
    "memories": "retrieved memories",
    "recent": "recent turns",
    "input": "the new message",
}
SOURCES_SHOWN = 5  # an item's source messages linked; the rest counted
NOT_MATCHED = "no match"  # a score part retrieval did not reach (keyword: no keyword hit), not a value of None
FRAMING = "message framing and reply priming"  # what the total counts beyond the sections' text


@dataclass
class SectionRow:
    name: str
    words: str
    tokens: int
    share: float  # of the context's total


@dataclass
class SourceRow:
    message: Message
    session: Session
    where: str  # "this session", or the session in words


@dataclass
class BridgeRow:
    session: Session  # the earlier session the bridge summarises
    where: str  # that session in words
    text: str
    written_after: bool  # rewritten since the context was composed: the model read an earlier text


@dataclass
class ItemRow:
    item: ContextReceiptItem
    memory: MemoryRecord | None  # None: forgotten since (the receipt still says what the model read)
    score: str
    parts: list[tuple[str, str]]
    sources: list[SourceRow] = field(default_factory=list)
    sources_gone: int = 0  # source messages erased since
    sources_more: int = 0

    @property
    def reason(self) -> str:
        return dict(ContextReceiptItem.Reason.choices).get(self.item.reason, self.item.reason)


@dataclass
class ReceiptPage:
    sections: list[SectionRow]
    total: int
    given: list[tuple[str, list[ItemRow]]]  # (section in words, its items), the profile first as the context shows it
    left_out: list[ItemRow]
    given_tokens: int
    left_out_tokens: int
    bridges: list[BridgeRow] = field(default_factory=list)  # the bridge section's text, when it had tokens


def _rounded(value) -> str:
    if value is None:
        return NOT_MATCHED
    try:
        return f"{float(value):.2f}"
    except (TypeError, ValueError):
        return str(value)


def _by_weight(parts) -> list[tuple[str, object]]:
    """Score parts, the largest first (the stored JSON keeps no order)."""
    def weight(pair):
        try:
            return -abs(float(pair[1]))
        except (TypeError, ValueError):
            return 0.0
    return sorted((parts or {}).items(), key=lambda p: (weight(p), p[0])) if isinstance(parts, dict) else []


def _bridges(receipt: ContextReceipt) -> list[BridgeRow]:
    """The bridges of the sessions the receipt's session links to: what its bridge section was made of (the receipt
    keeps the section's tokens, not its text)."""
    tenant = receipt.tenant_id
    linked = SessionLink.objects.for_tenant(tenant).filter(from_session_id=receipt.session_id) \
        .values_list("to_session_id", flat=True)
    rows = BridgeSummary.objects.for_tenant(tenant).filter(session_id__in=list(linked)).select_related("session") \
        .order_by("-session__closed_at")
    return [BridgeRow(session=b.session, where=session_words(b.session), text=b.text,
                      written_after=b.created_at > receipt.created_at) for b in rows]


def receipt_page(*, receipt: ContextReceipt) -> ReceiptPage:
    tenant = receipt.tenant_id
    breakdown = {str(k): int(v or 0) for k, v in (receipt.breakdown or {}).items() if isinstance(v, (int, float))}
    total = receipt.total_tokens or sum(breakdown.values())
    order = [*SECTION_WORDS, *sorted(k for k in breakdown if k not in SECTION_WORDS)]
    sections = [SectionRow(name=k, words=SECTION_WORDS.get(k, k), tokens=breakdown[k],
                           share=breakdown[k] / total if total else 0.0) for k in order if k in breakdown]
    framing = total - sum(breakdown.values())
    if sections and framing > 0:  # the composer counts the sections' text; the rows add up to the total
        sections.append(SectionRow(name="framing", words=FRAMING, tokens=framing, share=framing / total))
    items = list(ContextReceiptItem.objects.for_tenant(tenant).filter(receipt=receipt)
                 .order_by("-included", "-section", "rank"))
    memories = with_removal(MemoryRecord.objects.for_tenant(tenant).only("id", "status", "text", "kind")).in_bulk(
        list({i.memory_uuid for i in items}))
    wanted = {str(s) for i in items for s in (i.source_message_ids or [])[:SOURCES_SHOWN]}
    messages = {str(k): m for k, m in Message.objects.for_tenant(tenant).select_related("session")
                .only("id", "seq", "role", "session_id", "content", "session__id", "session__title",
                      "session__goal", "session__opened_at").in_bulk(list(wanted)).items()} if wanted else {}
    rows = []
    for item in items:
        ids = [str(s) for s in item.source_message_ids or []]
        shown = [SourceRow(message=m, session=m.session, where="this session" if m.session_id == receipt.session_id
                           else session_words(m.session)) for m in (messages[s] for s in ids[:SOURCES_SHOWN]
                                                                    if s in messages)]
        rows.append(ItemRow(item=item, memory=memories.get(item.memory_uuid), score=_rounded(item.score),
                            parts=[(k, _rounded(v)) for k, v in _by_weight(item.score_parts)],
                            sources=shown, sources_gone=len(ids[:SOURCES_SHOWN]) - len(shown),
                            sources_more=max(0, len(ids) - SOURCES_SHOWN)))
    given: dict[str, list[ItemRow]] = {}
    for row in rows:
        if row.item.included:
            given.setdefault(SECTION_WORDS.get(row.item.section, row.item.section), []).append(row)
    left_out = sorted((r for r in rows if not r.item.included), key=lambda r: r.item.rank)
    return ReceiptPage(sections=sections, total=total, given=list(given.items()), left_out=left_out,
                       given_tokens=sum(r.item.tokens for r in rows if r.item.included),
                       left_out_tokens=sum(r.item.tokens for r in left_out),
                       bridges=_bridges(receipt) if breakdown.get("bridge") else [])
