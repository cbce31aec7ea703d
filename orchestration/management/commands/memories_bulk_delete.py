"""manage.py memories_bulk_delete --tenant SLUG --user USER [filters] [--dry-run]: soft-delete one end user's
memories by kind, source type, session and creation date, as a single delete does: the same transition, and their
words taken out of what was derived from them (orchestration/forgetting.py), one pass per bounded call."""
from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError
from django.utils.dateparse import parse_datetime

from infra.errors import AppError
from memory.models import MemoryEvent, MemoryKind, SourceType
from memory.selectors import MemoryCriteria
from orchestration.forgetting import memories_bulk_forget
from orchestration.management.refs import tenant_and_user_by_ref
from orchestration.sessions import access_user_session


def _when(value: str | None, what: str):
    if not value:
        return None
    parsed = parse_datetime(value)
    if parsed is None:
        raise CommandError(f"{what} is not an ISO 8601 date and time: {value!r}")
    if parsed.tzinfo is None:
        raise CommandError(f"{what} needs a time zone (e.g. 2024-01-01T00:00:00Z): {value!r}")
    return parsed


class Command(BaseCommand):
    help = ("Soft-delete an end user's memories matching every given filter (history and vector writes included) and "
            "take their words out of the messages, notes, bridges and receipts derived from them.")

    def add_arguments(self, parser):
        parser.add_argument("--tenant", required=True, help="Tenant slug or id.")
        parser.add_argument("--user", required=True, help="The end user's id or external id.")
        parser.add_argument("--kind", action="append", default=[], choices=MemoryKind.values)
        parser.add_argument("--source-type", action="append", default=[], choices=SourceType.values)
        parser.add_argument("--session", help="Only memories drawn from this session (id).")
        parser.add_argument("--created-from", help="Created at or after (ISO 8601, with a time zone).")
        parser.add_argument("--created-to", help="Created before (ISO 8601, with a time zone).")
        parser.add_argument("--dry-run", action="store_true", help="Count the matches; delete nothing.")

    def handle(self, *args, tenant, user, kind, source_type, session, created_from, created_to, dry_run, **options):
        tenant_row, user_row = tenant_and_user_by_ref(tenant=tenant, user=user)
        try:
            session_id = str(access_user_session(tenant=tenant_row, user=user_row, session_id=session).pk) \
                if session else None
        except AppError as exc:
            raise CommandError(exc.message) from None
        criteria = MemoryCriteria(kinds=tuple(kind), source_types=tuple(source_type), session_id=session_id,
                                  created_from=_when(created_from, "--created-from"),
                                  created_to=_when(created_to, "--created-to"))
        if criteria.is_empty():
            raise CommandError("Give at least one filter (--kind, --source-type, --session, --created-from, "
                               "--created-to).")
        deleted = 0
        while True:
            result = memories_bulk_forget(tenant=tenant_row, user=user_row, criteria=criteria,
                                          actor_type=MemoryEvent.Actor.STAFF, actor_id="manage.py",
                                          dry_run=dry_run)
            if dry_run:
                self.stdout.write(f"{result.matched} memories match; first ids: {', '.join(result.sample_ids)}")
                return
            deleted += result.deleted
            if not result.more or not result.deleted:
                break
        self.stdout.write(f"deleted {deleted} memories")
