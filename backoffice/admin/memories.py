"""A memory's admin page: filters, provenance links into the sessions it came from, a timeline in words, the turns
it was given to the model in (orchestration's receipts), and buttons and actions that go through memory.actions (a
delete through orchestration's forgetting), so every staff change is in the history with the staff actor and reaches
Qdrant. It reads sessions and orchestration, so it sits here, above everything it shows."""
from __future__ import annotations

from django import forms
from django.contrib import admin, messages
from django.db.models import Q
from django.http import HttpResponseRedirect
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils.html import format_html

from infra import clock
from infra.errors import AppError
from memory import actions as memory_actions
from memory.extraction.candidate import subject_normalize
from memory.models import MemoryEvent, MemoryRecord, MemoryStatus
from memory.overview import memory_origin, status_label, with_removal
from memory.timeline import memory_timeline
from orchestration.forgetting import memory_forget
from orchestration.models import ContextReceipt
from orchestration.receipts import memory_receipt_usage

from .memory_columns import ConfidenceFilter, LayerFilter, MemoryColumns, memory_text_short
from .review import controls_apply
from .toolkit import (
    ScopedTenantFilter,
    TenantScopedAdminMixin,
    UserFilter,
    UserFilterMediaMixin,
    admin_link,
    changelist_link,
    staff_actor,
    when,
    wide_text,
)


class ExpiredFilter(admin.SimpleListFilter):
    title = "expired"
    parameter_name = "expired"

    def lookups(self, request, model_admin):
        return [("yes", "expired"), ("no", "not expired")]

    def queryset(self, request, queryset):
        past = Q(status=MemoryStatus.EXPIRED) | Q(expires_at__lte=clock.now())
        if self.value() == "yes":
            return queryset.filter(past)
        if self.value() == "no":
            return queryset.exclude(past)
        return queryset


class MemoryRecordForm(forms.ModelForm):
    """The text, and the slot it fills: left as they are, subject and value are read again from an edited text;
    changed here, they are the reviewer's."""

    class Meta:
        model = MemoryRecord
        fields = ["text", "subject", "value"]
        widgets = {"value": forms.TextInput(attrs={"size": 60})}
        help_texts = {"subject": "The slot a later statement replaces (destination, likes: united). Left as it is, "
                                 "it is read again from an edited text.",
                      "value": "The slot's value (Boston; positive or negative for a liking; never, always for a "
                               "habit)."}

    def clean_subject(self):
        return subject_normalize(self.cleaned_data.get("subject", ""))

    def clean_value(self):
        return " ".join((self.cleaned_data.get("value") or "").split())

    def clean_text(self):
        """The same rules as any edit (length, secrets), reported on the form instead of after saving."""
        try:
            return memory_actions.memory_text_clean(self.cleaned_data.get("text", ""))
        except AppError as exc:
            raise forms.ValidationError(exc.message)


# The buttons on a memory's page: POST name -> (service, past tense, the statuses it applies to). Delete is
# forgetting's: the row stays restorable, but its words leave the messages, notes, bridges and goals made of them.
PAGE_CONTROLS = {
    "_approve": (memory_actions.memory_approve, "approved", (MemoryStatus.PENDING_REVIEW,)),
    "_reject": (memory_actions.memory_reject, "rejected", (MemoryStatus.PENDING_REVIEW,)),
    "_expire": (memory_actions.memory_expire, "expired", (MemoryStatus.ACTIVE, MemoryStatus.PENDING_REVIEW)),
    "_delete_memory": (memory_forget, "deleted",
                       (MemoryStatus.ACTIVE, MemoryStatus.PENDING_REVIEW, MemoryStatus.SUPERSEDED,
                        MemoryStatus.EXPIRED)),
    "_restore": (memory_actions.memory_restore, "restored", (MemoryStatus.DELETED, MemoryStatus.EXPIRED)),
}


@admin.register(MemoryRecord)
class MemoryRecordAdmin(MemoryColumns, UserFilterMediaMixin, TenantScopedAdminMixin, admin.ModelAdmin):
    form = MemoryRecordForm
    # The tenant is a filter here, not a column: with it the dates fell off a 1,400-pixel screen.
    list_display = ("short_text", "kind", "status_shown", "said_by", "confidence", "user_column", "created",
                    "expires")
    list_filter = (LayerFilter, ScopedTenantFilter, UserFilter, "kind", "status", "source_type", ConfidenceFilter,
                   ExpiredFilter)
    search_fields = ("text", "subject", "value", "user__external_id", "user__display_name")
    list_select_related = ("user", "tenant")
    list_per_page = 50
    date_hierarchy = "created_at"
    change_form_template = "admin/memory/memoryrecord/change_form.html"
    object_history_template = "admin/memory/memoryrecord/object_history.html"
    # The text and its slot first (the buttons sit above them), then where it came from and what happened to it.
    fieldsets = (
        (None, {"fields": ("text", "subject", "value", "kind", "status_shown", "said_by", "tenant", "user_link")}),
        ("Provenance", {"fields": ("source_type", "provenance", "source_messages", "extractor",
                                   "extractor_version", "created_at")}),
        ("Timeline", {"fields": ("timeline",)}),
        # Folded: dates and counts a reviewer opens when they need them.
        ("Lifecycle", {"classes": ("collapse",),
                       "fields": ("receipts", "learned_at", "valid_from", "valid_to", "confidence", "importance",
                                  "expires_at", "last_accessed_at", "access_count", "reinforcement_count",
                                  "status_changed_at", "superseded_by_link", "superseded_list", "updated_at")}),
    )
    readonly_fields = ("kind", "status_shown", "said_by", "tenant", "user_link", "timeline",
                       "source_type", "provenance", "source_messages", "extractor", "extractor_version",
                       "created_at", "learned_at", "valid_from", "valid_to", "receipts", "confidence", "importance",
                       "expires_at", "last_accessed_at", "access_count", "reinforcement_count", "status_changed_at",
                       "superseded_by_link", "superseded_list", "updated_at")
    actions = ["approve", "reject", "expire", "delete_memories", "restore"]

    def get_queryset(self, request):
        return with_removal(super().get_queryset(request))

    @admin.display(description="status", ordering="status")
    def status_shown(self, obj):
        """A review's rejection and a deletion set the same status: the list and the page tell them apart."""
        return format_html('<span class="memory-status status-{}">{}</span>', obj.status_words, status_label(obj))

    @admin.display(description="text", ordering="text")
    def short_text(self, obj):
        return wide_text(memory_text_short(obj.text, 160))

    @admin.display(description="created", ordering="created_at")
    def created(self, obj):
        return when(obj.created_at)

    @admin.display(description="expires", ordering="expires_at")
    def expires(self, obj):
        return when(obj.expires_at)

    @admin.display(description="user")
    def user_link(self, obj):
        return admin_link(obj.user, str(obj.user))

    @admin.display(description="what happened to it")
    def timeline(self, obj):
        if not obj.pk:
            return "—"
        return render_to_string("admin/memory/memoryrecord/timeline.html", self.timeline_context(obj))

    def timeline_context(self, obj) -> dict:
        source = obj.source_message if obj.source_message_id else None
        return {"memory": obj, "entries": memory_timeline(tenant=obj.tenant, memory=obj), "source": source,
                "events_link": changelist_link(MemoryEvent, "the raw events", memory_uuid=obj.pk)}

    def history_view(self, request, object_id, extra_context=None):
        """Django's HISTORY button: the memory's own timeline (staff edits included), not the admin log."""
        obj = self.get_object(request, object_id)
        context = dict(extra_context or {})
        if obj is not None:
            context.update(self.timeline_context(obj))
        return super().history_view(request, object_id, context)

    def render_change_form(self, request, context, add=False, change=False, form_url="", obj=None):
        if obj is not None:
            context["controls"] = [(name, label) for name, label in (
                ("_approve", "Approve"), ("_reject", "Reject"), ("_expire", "Expire now"),
                ("_delete_memory", "Delete"), ("_restore", "Restore")) if obj.status in PAGE_CONTROLS[name][2]]
        return super().render_change_form(request, context, add, change, form_url, obj)

    def response_change(self, request, obj):
        """A control button: the text edit (if any) was saved first, through memory_update_text; then the
        button's own service, with the staff actor in the memory's history."""
        name = next((n for n in PAGE_CONTROLS if n in request.POST), None)
        if name is None:
            return super().response_change(request, obj)
        control, verb, _ = PAGE_CONTROLS[name]
        try:
            control(tenant=obj.tenant, memory=obj, actor_type=MemoryEvent.Actor.STAFF, actor_id=staff_actor(request))
            self.message_user(request, f"Memory {verb}: {memory_text_short(obj.text, 80)}", messages.SUCCESS)
        except AppError as exc:
            self.message_user(request, f"Not {verb}: {exc.message}", messages.WARNING)
        if name in ("_approve", "_reject"):
            # The reviewer goes on with the queue.
            return HttpResponseRedirect(reverse("admin:memory_memoryreview_changelist"))
        return HttpResponseRedirect(request.path)

    @admin.display(description="source")
    def provenance(self, obj):
        parts = []
        if obj.source_message_id:
            msg = obj.source_message
            excerpt = msg.content if len(msg.content) <= 200 else msg.content[:199] + "…"
            parts.append(format_html('message <a href="{}">#{} ({}) on {}</a>: “{}”', reverse(
                "admin:chat_sessions_message_change", args=[msg.pk]), msg.seq, msg.role,
                msg.created_at.strftime("%d %b %Y %H:%M"), excerpt))
        if obj.session_id:
            url = reverse("admin:chat_sessions_session_change", args=[obj.session_id])
            anchor = f"#msg-{obj.source_message_id}" if obj.source_message_id else ""
            parts.append(format_html('in <a href="{}{}">session {}</a>', url, anchor,
                                     obj.session.title or str(obj.session_id)[:8]))
        if not obj.source_message_id:
            created = obj.events.filter(action=MemoryEvent.Action.CREATED).order_by("id").first()
            parts.insert(0, memory_origin(extractor=obj.extractor, created_by=created.actor_id if created else ""))
        return format_html(" ".join(["{}"] * len(parts)), *parts) if parts else "—"

    @admin.display(description="all source messages")
    def source_messages(self, obj):
        ids = [str(i) for i in (obj.source_message_ids or [])]
        if not ids:
            return "—"
        links = [format_html('<a href="{}">{}</a>', reverse("admin:chat_sessions_message_change", args=[i]), i[:8])
                 for i in ids]
        return format_html(", ".join(["{}"] * len(links)), *links)

    @admin.display(description="given to the model")
    def receipts(self, obj):
        usage = memory_receipt_usage(tenant=obj.tenant_id, memory_id=obj.pk)
        if not usage["turns"]:
            return "not in any kept receipt"
        label = f"used in {usage['turns']} turns, last on {usage['last']:%d %b %Y %H:%M}"
        return changelist_link(ContextReceipt, label, memory=obj.pk)

    @admin.display(description="superseded by")
    def superseded_by_link(self, obj):
        if not obj.superseded_by_id:
            return "—"
        return admin_link(obj.superseded_by, memory_text_short(obj.superseded_by.text, 80))

    @admin.display(description="supersedes")
    def superseded_list(self, obj):
        older = list(obj.supersedes.all()[:20])
        if not older:
            return "—"
        return format_html("<br>".join(["{}"] * len(older)), *(admin_link(o, o.text[:80]) for o in older))

    def has_add_permission(self, request):
        return False  # memories come from conversations; staff review and correct them

    def has_delete_permission(self, request, obj=None):
        return False  # deleting is an action through memory.actions, so it leaves history and reaches Qdrant

    def save_model(self, request, obj, form, change):
        """Only the text and its slot are editable; they go through the same service as an end user's edit
        (re-embedded)."""
        changed = set(form.changed_data) & {"text", "subject", "value"}
        if change and changed:
            # A slot the reviewer typed is theirs; otherwise it follows the text.
            by_hand = {k: form.cleaned_data[k] for k in ("subject", "value")} if changed - {"text"} else {}
            try:
                memory_actions.memory_update_text(tenant=obj.tenant, memory=obj, text=form.cleaned_data["text"],
                                                  actor_type=MemoryEvent.Actor.STAFF, actor_id=staff_actor(request),
                                                  **by_hand)
            except AppError as exc:
                self.message_user(request, f"Not saved: {exc.message}", messages.ERROR)

    def _apply(self, request, queryset, control, verb: str):
        controls_apply(self, request, queryset.select_related("tenant"), control, verb)

    @admin.action(description="Approve selected (pending review)", permissions=["change"])
    def approve(self, request, queryset):
        self._apply(request, queryset, memory_actions.memory_approve, "approved")

    @admin.action(description="Reject selected (pending review)", permissions=["change"])
    def reject(self, request, queryset):
        self._apply(request, queryset, memory_actions.memory_reject, "rejected")

    @admin.action(description="Expire selected now", permissions=["change"])
    def expire(self, request, queryset):
        self._apply(request, queryset, memory_actions.memory_expire, "expired")

    @admin.action(description="Delete selected (restorable until forgotten)", permissions=["change"])
    def delete_memories(self, request, queryset):
        self._apply(request, queryset, memory_forget, "deleted")

    @admin.action(description="Restore selected (deleted, rejected or expired)", permissions=["change"])
    def restore(self, request, queryset):
        self._apply(request, queryset, memory_actions.memory_restore, "restored")
