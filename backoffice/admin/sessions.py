"""The session's and the message's admin pages: a transcript with tool calls in words and the memories drawn from each
message, the bridge with its support, and closing a session through orchestration. They read the assistant's,
context's and orchestration's code, so they sit here, above everything they show; read-only and tenant-scoped."""
from __future__ import annotations

import json

from django.contrib import admin, messages
from django.template.loader import render_to_string
from django.utils.html import format_html

from assistant.tools import outcome_summary
from context.bridge_support import bridge_support
from context.models import SessionLink, SummaryAnchor
from infra.labels import label_cut
from orchestration.sessions import session_close
from sessions.models import Message, Session

from ..transcript import transcript_memories, transcript_select
from .toolkit import (
    ParentScopedInlineMixin,
    ReadOnlyAdmin,
    ScopedTenantFilter,
    TenantScopedAdminMixin,
    UserFilterMediaMixin,
    admin_link,
    changelist_link,
    user_filter,
    wide_text,
)

# The transcript shown on a session's page; longer sessions show their first turns and a count.
TRANSCRIPT_LIMIT = 500
# Most recent first; sessions opened at one instant (an import without timestamps) by the one that went on
# longest, then by id, so a page lists them in the same order every time.
SESSION_ORDER = ("-opened_at", "-last_activity_at", "-message_seq", "id")


def session_heading(session) -> str:
    """ "Flights to Boston — Dana, 5 Dec 2026 20:31": a session in words."""
    name = label_cut(session.title or session.goal, 80) or "Untitled session"
    return f"{name} — {session.user}, {session.opened_at:%d %b %Y %H:%M}"


# Per-user lists of sessions' rows (sessions, import jobs) and of messages, the user picked by name.
SessionUserFilter = user_filter("user", ("chat_sessions", "session", "user"))
MessageUserFilter = user_filter("session__user", ("chat_sessions", "session", "user"))


def _arguments_render(arguments, limit: int = 60) -> str:
    """recall(query="aisle seats", k=3): each value cut to `limit` characters."""
    if not isinstance(arguments, dict):
        text = str(arguments)
        return text if len(text) <= limit else text[:limit - 1] + "…"
    parts = []
    for key, value in arguments.items():
        text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
        text = text if len(text) <= limit else text[:limit - 1] + "…"
        parts.append(f'{key}="{text}"' if isinstance(value, str) else f"{key}={text}")
    return ", ".join(parts)


def _result_render(call) -> str:
    """What a call returned, in a few words: "4 memories", "stored (inferred): …", "error: …"."""
    if not call.answered:
        return "no answer recorded"
    result = call.result
    if not isinstance(result, dict):  # cut to the observation budget, or not JSON: its first words
        text = str(result or "")
        return text if len(text) <= 160 else text[:159] + "…"
    if call.name == "recall" and not result.get("error"):
        n = len(result.get("memories") or [])
        return f"{n} memor{'y' if n == 1 else 'ies'}"
    summary = outcome_summary(call.name, result)
    return summary if len(summary) <= 160 else summary[:159] + "…"


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


class _LinkInline(ReadOnlyInline):
    """A session's links at one end (fk_name), each shown with the session at its other end."""

    model = SessionLink
    fields = readonly_fields = ("kind", "other_session", "score", "created_at")
    other_end = ""

    @admin.display(description="session")
    def other_session(self, obj):
        other = getattr(obj, self.other_end)
        return admin_link(other, f"{other.opened_at:%Y-%m-%d %H:%M} · {other.title or other.pk}")


class LinkOutInline(_LinkInline):
    fk_name, other_end = "from_session", "to_session"
    verbose_name = verbose_name_plural = "links to earlier sessions"


class LinkInInline(_LinkInline):
    fk_name, other_end = "to_session", "from_session"
    verbose_name = verbose_name_plural = "linked from later sessions"


@admin.register(Session)
class SessionAdmin(UserFilterMediaMixin, TenantScopedAdminMixin, admin.ModelAdmin):
    list_display = ("short_id", "title", "user", "tenant", "state", "opened_at", "last_activity_at", "message_seq")
    list_filter = (ScopedTenantFilter, SessionUserFilter, "state", "close_reason")
    search_fields = ("title", "goal", "user__external_id", "user__display_name", "external_id")
    list_select_related = ("user", "tenant")
    list_per_page = 50
    date_hierarchy = "opened_at"
    # Sessions opened at one instant (an import without timestamps) follow the one that went on longest, then id.
    ordering = SESSION_ORDER
    # The transcript first, under the title and one line of who and when; the session's records folded below it.
    fieldsets = (
        (None, {"fields": ("title", "summary_line", "transcript")}),
        ("Bridge and memories", {"fields": ("bridge_summary", "previous_link", "memories_link")}),
        ("Details", {"classes": ("collapse",),
                     "fields": ("id", "tenant", "user", "state", "external_id", "goal", "opened_at",
                                "last_activity_at", "closed_at", "close_reason")}),
    )
    readonly_fields = ("summary_line", "transcript", "bridge_summary", "previous_link", "memories_link", "id",
                       "tenant", "user", "state", "external_id", "goal", "opened_at", "last_activity_at",
                       "closed_at", "close_reason")
    inlines = [AnchorInline, LinkOutInline, LinkInInline]
    actions = ["close_sessions"]

    @admin.display(description="session", ordering="id")
    def short_id(self, obj):
        return str(obj.pk)[:8]

    def render_change_form(self, request, context, add=False, change=False, form_url="", obj=None):
        """The page's heading names the session in words (its title or goal, whose, when), not its id."""
        if obj is not None:
            context["subtitle"] = session_heading(obj)
        return super().render_change_form(request, context, add, change, form_url, obj)

    @admin.display(description="session")
    def summary_line(self, obj):
        if not obj.pk:
            return "—"
        closed = (f"closed {obj.closed_at:%d %b %Y %H:%M}" + (f" ({obj.close_reason})" if obj.close_reason else "")
                  if obj.closed_at else obj.get_state_display().lower())
        return format_html("{} · opened {} · {} · {} message{} · <small>{}</small>", admin_link(obj.user),
                           f"{obj.opened_at:%d %b %Y %H:%M}", closed, obj.message_seq,
                           "" if obj.message_seq == 1 else "s", obj.pk)

    @admin.display(description="previous session")
    def previous_link(self, obj):
        return admin_link(obj.previous, f"{obj.previous.opened_at:%Y-%m-%d %H:%M}") if obj.previous_id else "—"

    @admin.display(description="bridge summary")
    def bridge_summary(self, obj):
        bridge = getattr(obj, "bridge", None) if obj.pk else None
        if bridge is None:
            return "—"
        return render_to_string("admin/chat_sessions/session/bridge.html", {
            "bridge": bridge, "sentences": bridge_support(tenant=obj.tenant, session=obj, text=bridge.text)})

    @admin.display(description="memories")
    def memories_link(self, obj):
        # The memories drawn from a session are reached through their provenance relation (memory's model).
        return changelist_link(obj.memories.model, "memories from this session", session__id__exact=obj.pk)

    @admin.display(description="transcript")
    def transcript(self, obj):
        if not obj.pk:
            return "—"
        rows = transcript_select(tenant=obj.tenant, session=obj, limit=TRANSCRIPT_LIMIT)
        for row in rows:
            for call in row.calls:
                call.arguments_text, call.result_text = _arguments_render(call.arguments), _result_render(call)
            if row.answers is not None:
                row.answers.result_text = _result_render(row.answers)
        return render_to_string("admin/chat_sessions/session/transcript.html",
                                {"rows": rows, "more": max(0, obj.message_seq - len(rows))})

    def has_add_permission(self, request):
        return False  # sessions open through the API

    def has_delete_permission(self, request, obj=None):
        return False  # a session is provenance for memories; erasing a user removes theirs

    @admin.action(description="Close selected sessions", permissions=["change"])
    def close_sessions(self, request, queryset):
        closed = 0
        for session in queryset.filter(state=Session.State.OPEN).select_related("tenant"):
            session_close(tenant=session.tenant, session_id=session.pk, reason="admin")
            closed += 1
        self.message_user(request, f"Closed {closed} session(s).", messages.SUCCESS)


@admin.register(Message)
class MessageAdmin(UserFilterMediaMixin, TenantScopedAdminMixin, ReadOnlyAdmin):
    """Read-only: the target of a memory's provenance link, with the memories drawn from it."""

    list_display = ("seq", "role", "short_content", "session_link", "tenant", "created_at")
    list_filter = (ScopedTenantFilter, MessageUserFilter, "role")
    search_fields = ("content", "external_id")
    list_select_related = ("session", "session__user", "tenant")
    list_per_page = 50
    fields = readonly_fields = ("id", "tenant", "session_link", "seq", "role", "text", "calls", "name",
                                "external_id", "created_at", "token_count", "tool_call_id", "extracted_at",
                                "memories_drawn")

    @admin.display(description="content")
    def text(self, obj):
        """The message as written: a read-only text field is rendered with <br>s, which drops a line's leading
        spaces (code lost its indentation); the session's transcript keeps them too."""
        if not obj.content:
            return "—"
        return format_html('<pre class="message-content" style="white-space:pre-wrap;word-break:break-word;'
                           'margin:0;font-family:inherit">{}</pre>', obj.content)

    @admin.display(description="content")
    def short_content(self, obj):
        if not obj.content and obj.tool_calls:
            names = ", ".join(str((c.get("function") or {}).get("name")) for c in obj.tool_calls
                              if isinstance(c, dict))
            return f"(called {names})"
        return wide_text(label_cut(obj.content, 100))

    @admin.display(description="tool calls")
    def calls(self, obj):
        if not obj.tool_calls:
            return "—"
        lines = []
        for c in obj.tool_calls:
            fn = c.get("function") if isinstance(c, dict) else None
            if isinstance(fn, dict):
                try:
                    args = json.loads(fn.get("arguments") or "{}")
                except (TypeError, ValueError):
                    args = fn.get("arguments")
                lines.append(f"{fn.get('name')}({_arguments_render(args)})")
        return format_html("<br>".join(["called {}"] * len(lines)), *lines) if lines else "—"

    @admin.display(description="memories drawn from it")
    def memories_drawn(self, obj):
        drawn = transcript_memories(tenant=obj.tenant, message=obj)
        if not drawn:
            return "—"
        return render_to_string("admin/chat_sessions/session/memories.html", {"memories": drawn})

    @admin.display(description="session")
    def session_link(self, obj):
        return admin_link(obj.session, f"{obj.session.title or obj.session_id} (turn #{obj.seq})")
