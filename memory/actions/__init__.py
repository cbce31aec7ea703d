"""Every change of a memory's state, in one package: create, remember (dedup and supersede aware), reinforce,
supersede, edit, approve, reject, expire, decay, fold (merge), consolidate, delete, restore, forget, erase, and a
closed session's note.

Each change locks or creates the row, writes its MemoryEvent (who, before, after) and records the vector write
in the outbox inside one transaction; the point reaches Qdrant after commit. Extraction, the assistant's tools,
the lifecycle jobs, the admin and the end-user API all come here, and nothing else writes MemoryRecord. Text passes
the secrets filter before anything is stored.

The package holds them by family: records (how any change is written), create (a memory as given), extract
(messages run through memory.extraction and persisted), decisions (an extraction's verified decisions), remember
(statements checked against what the user has), review (changes people ask for), upkeep (changes the lifecycle
jobs make), notes (a session's note lines) and imported (the records a portable export carried, written as they
were). Import from the package.
"""

from .create import memory_create, memory_supersede
from .decisions import decisions_apply
from .extract import ExtractionResult, memory_extract_many
from .imported import memories_import
from .notes import NoteLine, note_line_id, session_note_records, session_note_write, session_note_written
from .records import (
    MAX_SOURCE_MESSAGES,
    MEMORY_NAMESPACE,
    MEMORY_TEXT_MAX_CHARS,
    content_hash_for,
    history_rows_together,
    memory_expiry,
    memory_history_write,
    memory_id_for,
    memory_lifetime_start,
    memory_snapshot,
    memory_text_clean,
    memory_ttl_days,
    memory_vectors_enqueue,
    vector_op_for,
)
from .remember import INCOMPLETE, INCOMPLETE_REASON, memory_remember, memory_remember_statements
from .review import (
    BULK_DELETE_SAMPLE,
    BulkDeleteResult,
    memories_bulk_delete,
    memory_access_record,
    memory_approve,
    memory_delete,
    memory_delete_all,
    memory_expire,
    memory_reject,
    memory_restore,
    memory_text_forget,
    memory_update_text,
)
from .upkeep import (
    PENDING_MARK,
    fact_from_events,
    memories_erase_user,
    memories_expire_due,
    memories_fold,
    memories_forget_records,
    memory_decay,
)

__all__ = [
    "BULK_DELETE_SAMPLE",
    "INCOMPLETE",
    "INCOMPLETE_REASON",
    "BulkDeleteResult",
    "ExtractionResult",
    "MAX_SOURCE_MESSAGES",
    "MEMORY_NAMESPACE",
    "MEMORY_TEXT_MAX_CHARS",
    "NoteLine",
    "PENDING_MARK",
    "content_hash_for",
    "history_rows_together",
    "decisions_apply",
    "fact_from_events",
    "memories_bulk_delete",
    "memories_import",
    "memories_erase_user",
    "memories_expire_due",
    "memories_fold",
    "memories_forget_records",
    "memory_access_record",
    "memory_approve",
    "memory_create",
    "memory_decay",
    "memory_delete",
    "memory_delete_all",
    "memory_expire",
    "memory_expiry",
    "memory_extract_many",
    "memory_history_write",
    "memory_id_for",
    "memory_lifetime_start",
    "memory_reject",
    "memory_remember",
    "memory_remember_statements",
    "memory_restore",
    "memory_snapshot",
    "memory_supersede",
    "memory_text_clean",
    "memory_ttl_days",
    "memory_text_forget",
    "memory_update_text",
    "memory_vectors_enqueue",
    "note_line_id",
    "session_note_records",
    "session_note_write",
    "session_note_written",
    "vector_op_for",
]
