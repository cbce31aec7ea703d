"""Admin for sessions: transcript, summary anchors, bridge summary and links, read-only and tenant-scoped."""
from __future__ import annotations

from django.contrib import admin, messages
from django.utils.html import format_html, format_html_join

from tenants.admin import (ParentScopedInlineMixin, ReadOnlyAdmin, ScopedTenantFilter, TenantScopedAdminMixin,
                           admin_link, changelist_link)

from .models import ImportJob, Message, Session, SessionLink, SummaryAnchor

# The transcript shown on a session's page; longer sessions show their first turns and a count.
TRANSCRIPT_LIMIT = 500


class ReadOnlyInline(ParentScopedInlineMixin, admin.TabularInline):
    extra = 0
    can_delete = False
    show_change_link = False

    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False


class AnchorInline(ReadOnlyInline):
    model = SummaryAnchor
    fields = readonly_fields = ("first_seq", "last_seq", "text", "method", "token_count", "created_at")


class LinkOutInline(ReadOnlyInline):
    model = SessionLink
    fk_name = "from_session"
    verbose_name = verbose_name_plural = "links to earlier sessions"
    fields = readonly_fields = ("kind", "to", "score", "created_at")

    @admin.display(description="session")
    def to(self, obj):
        return admin_link(obj.to_session, f"{obj.to_session.opened_at:%Y-%m-%d %H:%M} · {obj.to_session.title or obj.to_session_id}")


class LinkInInline(ReadOnlyInline):
    model = SessionLink
    fk_name = "to_session"
    verbose_name = verbose_name_plural = "linked from later sessions"
    fields = readonly_fields = ("kind", "source", "score", "created_at")

    @admin.display(description="session")
    def source(self, obj):
        return admin_link(obj.from_session, f"{obj.from_session.opened_at:%Y-%m-%d %H:%M} · {obj.from_session.title or obj.from_session_id}")


@admin.register(Session)
class SessionAdmin(TenantScopedAdminMixin, admin.ModelAdmin):
    list_display = ("short_id", "title", "user", "tenant", "state", "opened_at", "last_activity_at", "message_seq")
    list_filter = (ScopedTenantFilter, "state", "close_reason")
    search_fields = ("title", "goal", "user__external_id", "external_id")
    list_select_related = ("user", "tenant")
    date_hierarchy = "opened_at"
    fields = ("id", "tenant", "user", "state", "title", "external_id", "goal", "opened_at", "last_activity_at",
              "closed_at", "close_reason", "previous_link", "bridge_summary", "memories_link", "transcript")
    readonly_fields = tuple(f for f in fields if f != "title")
    inlines = [AnchorInline, LinkOutInline, LinkInInline]
    actions = ["close_sessions"]

    @admin.display(description="session", ordering="id")
    def short_id(self, obj):
        return str(obj.pk)[:8]

    @admin.display(description="previous session")
    def previous_link(self, obj):
        return admin_link(obj.previous, f"{obj.previous.opened_at:%Y-%m-%d %H:%M}") if obj.previous_id else "—"

    @admin.display(description="bridge summary")
    def bridge_summary(self, obj):
        bridge = getattr(obj, "bridge", None) if obj.pk else None
        if bridge is None:
            return "—"
        return format_html("<p>{}</p><p><small>{} · {} tokens</small></p>", bridge.text, bridge.method,
                           bridge.token_count)

    @admin.display(description="memories")
    def memories_link(self, obj):
        # The memories drawn from a session are reached through their provenance relation (memory's model).
        return changelist_link(obj.memories.model, "memories from this session", session__id__exact=obj.pk)

    @admin.display(description="transcript")
    def transcript(self, obj):
        if not obj.pk:
            return "—"
        rows = list(obj.messages.order_by("seq")[:TRANSCRIPT_LIMIT])
        body = format_html_join(
            "", '<tr id="msg-{}"><td>{}</td><td>{}</td><td>{}</td><td style="white-space:pre-wrap">{}</td></tr>',
            ((m.pk, m.seq, m.role, m.created_at.strftime("%Y-%m-%d %H:%M"), m.content) for m in rows))
        more = obj.message_seq - len(rows)
        tail = format_html("<p>… and {} more message(s).</p>", more) if more > 0 else ""
        return format_html('<table><tr><th>#</th><th>role</th><th>at</th><th>content</th></tr>{}</table>{}',
                           body, tail)

    def has_add_permission(self, request):
        return False  # sessions open through the API

    def has_delete_permission(self, request, obj=None):
        return False  # a session is provenance for memories; erasing a user removes theirs

    @admin.action(description="Close selected sessions", permissions=["change"])
    def close_sessions(self, request, queryset):
        from orchestration.sessions import session_end

        closed = 0
        for session in queryset.filter(state=Session.State.OPEN).select_related("tenant"):
            session_end(tenant=session.tenant, session_id=session.pk, reason="admin")
            closed += 1
        self.message_user(request, f"Closed {closed} session(s).", messages.SUCCESS)


@admin.register(Message)
class MessageAdmin(TenantScopedAdminMixin, ReadOnlyAdmin):
    """Read-only: the target of a memory's provenance link."""

    list_display = ("seq", "role", "short_content", "session_link", "tenant", "created_at")
    list_filter = (ScopedTenantFilter, "role")
    search_fields = ("content", "external_id")
    list_select_related = ("session", "tenant")
    fields = readonly_fields = ("id", "tenant", "session_link", "seq", "role", "content", "name", "external_id",
                                "created_at", "token_count", "tool_calls", "tool_call_id", "extracted_at")

    @admin.display(description="content")
    def short_content(self, obj):
        return obj.content[:80]

    @admin.display(description="session")
    def session_link(self, obj):
        return admin_link(obj.session, f"{obj.session.title or obj.session_id} (turn #{obj.seq})")


@admin.register(ImportJob)
class ImportJobAdmin(TenantScopedAdminMixin, ReadOnlyAdmin):
    """Bulk imports and their progress (the export itself is not shown: it is the users' conversations)."""

    list_display = ("id", "tenant", "user", "format", "source", "status", "progress", "messages_created",
                    "messages_skipped", "created_at", "finished_at")
    list_filter = (ScopedTenantFilter, "status", "format", "source")
    search_fields = ("id", "user__external_id", "file_name")
    list_select_related = ("tenant", "user")
    fields = readonly_fields = ("id", "tenant", "user", "format", "options", "source", "status", "file_name",
                                "sessions_total", "messages_total", "position", "sessions_created",
                                "messages_created", "messages_skipped", "error", "created_at", "started_at",
                                "finished_at")

    def get_queryset(self, request):
        return super().get_queryset(request).defer("payload")

    @admin.display(description="messages consumed")
    def progress(self, obj):
        return f"{obj.position} / {obj.messages_total}"
