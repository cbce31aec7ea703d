"""How many memory rows a user's messages became: the reviewer's sign that extraction floods (17 user messages, 276
rows). It counts messages (sessions) and rows (memory), so it lives here. Two bounded queries."""
from __future__ import annotations

from dataclasses import dataclass

from django.db.models import Count, Q
from django.db.models.functions import Substr

from memory.models import MemoryKind, MemoryRecord, MemoryStatus
from sessions.models import Message
from tenants.models import EndUser, Tenant

# More active rows than this per user message is shown as a flood: a message rarely states more than a few lasting
# things, and a long one is a few passages.
FLOOD_PER_MESSAGE = 5.0
EXCERPT_CHARS = 200


@dataclass(frozen=True)
class MessageYield:
    message: Message  # unsaved: its id, seq, role, session and the opening of its content
    rows: int  # active rows drawn from it
    passages: int  # of which its own words kept for search


@dataclass(frozen=True)
class ExtractionYield:
    user_messages: int
    rows: int  # the user's active rows, every layer
    top: list[MessageYield]  # the messages the most active rows were drawn from, most first

    @property
    def per_message(self) -> float:
        return self.rows / self.user_messages if self.user_messages else 0.0

    @property
    def floods(self) -> bool:
        return self.per_message > FLOOD_PER_MESSAGE


def extraction_yield(*, tenant: Tenant, user: EndUser, rows: int, top: int = 5) -> ExtractionYield:
    """`rows`: the user's active rows, which the caller has counted already."""
    user_messages = (Message.objects.for_tenant(tenant)
                     .filter(session__user=user, role=Message.Role.USER).count())
    # The message's few fields come in the same query (grouped with it: one message, one value each).
    counted = (MemoryRecord.objects.for_tenant(tenant)
               .filter(user=user, status=MemoryStatus.ACTIVE, source_message__isnull=False).order_by()
               .values("source_message", "source_message__seq", "source_message__role",
                       "source_message__session_id", excerpt=Substr("source_message__content", 1, EXCERPT_CHARS))
               .annotate(n=Count("pk"), passages=Count("pk", filter=Q(kind=MemoryKind.EVENT)))
               .order_by("-n", "source_message")[:top])
    return ExtractionYield(user_messages=user_messages, rows=rows, top=[MessageYield(
        message=Message(pk=c["source_message"], seq=c["source_message__seq"], role=c["source_message__role"],
                        session_id=c["source_message__session_id"], content=c["excerpt"]),
        rows=c["n"], passages=c["passages"]) for c in counted])
