"""The Qdrant point of a memory record: its payload (the retrieval contract) and its vectors."""
from __future__ import annotations

from infra.embedder import get_embedder
from infra.tokens import count_tokens
from infra.vector_store import MemoryPoint

from .models import MemoryRecord


def _epoch(value) -> float | None:
    return value.timestamp() if value is not None else None


def point_payload(record: MemoryRecord) -> dict:
    """Everything a search needs to filter and render a hit without a database round trip."""
    payload = {
        "tenant_id": str(record.tenant_id),
        "user_id": str(record.user_id),
        "memory_id": str(record.id),
        "kind": record.kind,
        "status": record.status,
        "text": record.text,
        "tokens": count_tokens(record.text),  # its size in a context: how deep retrieval reads to fill a budget
        "source_type": record.source_type,
        "confidence": float(record.confidence),
        "importance": float(record.importance),
        "created_at": _epoch(record.created_at),
        "session_id": str(record.session_id) if record.session_id else None,
        "source_message_id": str(record.source_message_id) if record.source_message_id else None,
    }
    # Absent, not null, when the memory never expires: the not-expired filter reads "absent OR later than now".
    if record.expires_at is not None:
        payload["expires_at"] = _epoch(record.expires_at)
    return payload


def point_for_record(record: MemoryRecord, dense: list[float]) -> MemoryPoint:
    return MemoryPoint(memory_id=str(record.id), dense=list(dense), text=record.text, payload=point_payload(record))


def points_for_records(records) -> list[MemoryPoint]:
    """Points for many records, their texts embedded in one batch."""
    records = list(records)
    if not records:
        return []
    vectors = get_embedder().embed([r.text for r in records])
    return [point_for_record(r, v) for r, v in zip(records, vectors, strict=True)]
