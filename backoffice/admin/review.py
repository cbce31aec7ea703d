"""The reviewer's queue: memories held for review, each approved, rejected, edited or deleted on its own row (or in
bulk), and one user's repeated memories side by side with a merge button. Every change goes through memory.actions,
a delete through orchestration's forgetting (its words leave what was derived from them), so the queue sits here,
above both."""
from __future__ import annotations

import uuid
from urllib.parse import urlsplit

from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.db.models import OuterRef, Subquery
from django.http import Http404, HttpResponseBadRequest, HttpResponseNotAllowed, HttpResponseRedirect
from django.template.loader import render_to_string
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils.html import format_html
from django.utils.http import url_has_allowed_host_and_scheme

from infra.errors import AppError
from memory import actions as memory_actions
from memory.models import MemoryEvent, MemoryRecord, MemoryReview
from memory.overview import memory_origin, said_by
from memory.review_queue import near_duplicate_pairs, review_pending
from memory.subjects import slot_words
from orchestration.forgetting import memory_forget
from tenants.models import EndUser, Tenant

from .memory_columns import ConfidenceFilter, MemoryColumns, memory_text_short
from .toolkit import (
    ScopedTenantFilter,
    TenantScopedAdminMixin,
    UserFilter,
    UserFilterMediaMixin,
    admin_link,
    admin_tenants,
    staff_actor,
    user_short,
    when,
    wide_text,
)


def controls_apply(admin_view, request, records, control, verb: str) -> None:
    """Apply one memory control to each record as the staff user; report what was done and what was refused."""
    done, refused = 0, []
    for record in records:
        try:
            control(tenant=record.tenant, memory=record, actor_type=MemoryEvent.Actor.STAFF,
                    actor_id=staff_actor(request))
            done += 1
        except AppError as exc:
            refused.append(f"{str(record.pk)[:8]} ({exc.message})")
    admin_view.message_user(request, f"{verb.capitalize()} {done} memory(ies).", messages.SUCCESS)
    if refused:
        admin_view.message_user(request, f"Not {verb}: " + "; ".join(refused[:20]), messages.WARNING)


@admin.register(MemoryReview)
class MemoryReviewAdmin(MemoryColumns, UserFilterMediaMixin, TenantScopedAdminMixin, admin.ModelAdmin):
    """Memories held for review, the longest waiting first. Which are held is the tenant's setting
    (Tenant.review_inferred: inferred memories; Tenant.review_supersede_below: corrections of low confidence)."""

    # Six columns that fit a 1,400-pixel screen: what the memory is (its kind, who said it, confidence and slot on
    # a line below it), what it would replace, its source, whose it is, since when, and the reviewer's buttons.
    list_display = ("memory", "replaces", "quote", "whose", "review")
    list_display_links = None
    list_filter = (ScopedTenantFilter, UserFilter, "kind", ConfidenceFilter)
    search_fields = ("text", "subject", "value", "user__external_id", "user__display_name")
    list_select_related = ("user", "tenant", "source_message")
    list_per_page = 50
    actions = ["approve", "reject"]
    change_list_template = "admin/memory/memoryreview/change_list.html"

    def get_queryset(self, request):
        return review_pending(queryset=super().get_queryset(request)).annotate(created_by=Subquery(
            MemoryEvent.objects.unscoped().filter(memory_uuid=OuterRef("pk"), action=MemoryEvent.Action.CREATED)
            .order_by("id").values("actor_id")[:1]))

    @admin.display(description="memory", ordering="text")
    def memory(self, obj):
        url = reverse("admin:memory_memoryrecord_change", args=[obj.pk])
        slot = slot_words(subject=obj.subject, value=obj.value, text=obj.text)
        about = " · ".join(p for p in (obj.get_kind_display().lower(), said_by(obj.source_type),
                                       f"confidence {obj.confidence:.2f}", slot) if p)
        return wide_text(format_html('<a href="{}">{}</a><br><small class="quiet">{}</small>', url,
                                     memory_text_short(obj.text, 160), about), "15em")

    @admin.display(description="review")
    def review(self, obj):
        """Approve, reject, edit or delete the row where it stands (the buttons post to review_row_view)."""
        url = reverse("admin:memory_memoryreview_row", args=[obj.pk])
        return render_to_string("admin/memory/memoryreview/review_row.html", {"url": url, "memory": obj})

    @admin.display(description="user, held since", ordering="created_at")
    def whose(self, obj):
        return format_html("{}<br>{}", user_short(obj.user), when(obj.created_at))

    @admin.display(description="would replace")
    def replaces(self, obj):
        # A correction or a new value waits here while the value it contradicts stays in use.
        text = getattr(obj, "replaces_text", None)
        return wide_text(memory_text_short(text, 120), "9em") if text else "—"

    @admin.display(description="source")
    def quote(self, obj):
        if not obj.source_message_id:
            return wide_text(memory_origin(extractor=obj.extractor, created_by=getattr(obj, "created_by", "")),
                             "10em")
        content = obj.source_message.content
        url = reverse("admin:chat_sessions_message_change", args=[obj.source_message_id])
        return wide_text(format_html('“{}” <a href="{}">message</a>',
                                     content if len(content) <= 120 else content[:119] + "…", url), "11em")

    def has_add_permission(self, request):
        return False

    def has_delete_permission(self, request, obj=None):
        return False

    def change_view(self, request, object_id, form_url="", extra_context=None):
        obj = self.get_object(request, object_id)
        if obj is None:
            return super().change_view(request, object_id, form_url, extra_context)  # the admin's own not-found
        return HttpResponseRedirect(reverse("admin:memory_memoryrecord_change", args=[obj.pk]))

    def changelist_view(self, request, extra_context=None):
        tenants = admin_tenants(request)
        tenants = Tenant.objects.all() if tenants is None else tenants
        context = {"reviewing": list(tenants.filter(review_inferred=True).order_by("slug")),
                   "not_reviewing": list(tenants.filter(review_inferred=False).order_by("slug")[:20]),
                   "holding_corrections": list(tenants.filter(review_supersede_below__gt=0).order_by("slug")[:20])}
        user_id = request.GET.get("user__id__exact")
        if user_id:
            try:
                context["duplicates_url"] = reverse("admin:memory_memoryreview_duplicates",
                                                    args=[uuid.UUID(user_id)])
            except ValueError:
                pass
        return super().changelist_view(request, {**context, **(extra_context or {})})

    @admin.action(description="Approve selected", permissions=["change"])
    def approve(self, request, queryset):
        controls_apply(self, request, queryset.select_related("tenant"), memory_actions.memory_approve, "approved")

    @admin.action(description="Reject selected", permissions=["change"])
    def reject(self, request, queryset):
        controls_apply(self, request, queryset.select_related("tenant"), memory_actions.memory_reject, "rejected")

    # --- near-duplicates of one user ---------------------------------------------------------------------------

    def get_urls(self):
        return [path("duplicates/<uuid:user_id>/", self.admin_site.admin_view(self.duplicates_view),
                     name="memory_memoryreview_duplicates"),
                path("<uuid:object_id>/review/", self.admin_site.admin_view(self.review_row_view),
                     name="memory_memoryreview_row"), *super().get_urls()]

    # --- one row reviewed where it stands ----------------------------------------------------------------------

    ROW_CONTROLS = {
        "approve": (memory_actions.memory_approve, "approved"),
        "reject": (memory_actions.memory_reject, "rejected"),
        # The record stays restorable; the words it was made of leave the messages, notes, bridges and receipts.
        "delete": (memory_forget, "deleted"),
    }

    def review_row_view(self, request, object_id):
        """One row's button: approve, reject or delete it, or save its edited text (and approve it). Every change
        goes through memory.actions (a delete through forgetting) as the staff user; the reviewer comes back to the
        queue where they were."""
        if request.method != "POST":
            return HttpResponseNotAllowed(["POST"])
        if not self.has_change_permission(request):
            raise PermissionDenied
        back = self._queue_url(request)
        do = request.POST.get("do", "")
        if do not in (*self.ROW_CONTROLS, "edit", "edit_approve"):
            return HttpResponseBadRequest("Unknown review action.")
        # One 404 for a memory that is missing and one of a tenant this user does not see.
        if not super().get_queryset(request).filter(pk=object_id).exists():
            raise Http404("No such memory.")
        record = self.get_queryset(request).select_related("tenant").filter(pk=object_id).first()
        if record is None:
            self.message_user(request, "That memory no longer awaits review (another reviewer may have taken it).",
                              messages.WARNING)
            return HttpResponseRedirect(back)
        actor = {"actor_type": MemoryEvent.Actor.STAFF, "actor_id": staff_actor(request)}
        try:
            if do in ("edit", "edit_approve"):
                text = request.POST.get(f"text-{record.pk}", "")
                record = memory_actions.memory_update_text(tenant=record.tenant, memory=record, text=text, **actor)
                if do == "edit":
                    self.message_user(request, f"Saved: {memory_text_short(record.text, 80)}", messages.SUCCESS)
                    return HttpResponseRedirect(back)
                do = "approve"
            control, verb = self.ROW_CONTROLS[do]
            control(tenant=record.tenant, memory=record, **actor)
            self.message_user(request, f"Memory {verb}: {memory_text_short(record.text, 80)}", messages.SUCCESS)
        except AppError as exc:
            self.message_user(request, f"Not saved: {exc.message}", messages.ERROR)
        return HttpResponseRedirect(back)

    def _queue_url(self, request) -> str:
        """The queue page the button was pressed on (its filters and page kept), else the queue."""
        queue = reverse("admin:memory_memoryreview_changelist")
        referer = request.META.get("HTTP_REFERER", "")
        if referer and url_has_allowed_host_and_scheme(referer, allowed_hosts={request.get_host()}):
            parts = urlsplit(referer)
            if parts.path == queue:
                return f"{queue}?{parts.query}" if parts.query else queue
        return queue

    def _user(self, request, user_id) -> EndUser:
        users = EndUser.objects.unscoped().select_related("tenant").filter(pk=user_id)
        tenants = admin_tenants(request)
        user = (users if tenants is None else users.filter(tenant__in=tenants)).first()
        if user is None or not self.has_view_permission(request):
            raise Http404("No such end user.")
        return user

    def duplicates_view(self, request, user_id):
        user = self._user(request, user_id)
        here = reverse("admin:memory_memoryreview_duplicates", args=[user.pk])
        if request.method == "POST":
            if not self.has_change_permission(request):
                raise Http404("No such end user.")
            return self._merge(request, user, here)
        pairs = near_duplicate_pairs(tenant=user.tenant, user=user)
        context = {**self.admin_site.each_context(request), "opts": self.opts, "title": f"Near-duplicates of {user}",
                   "subject": user, "user_link": admin_link(user, str(user)), "pairs": pairs,
                   "can_merge": self.has_change_permission(request)}
        return TemplateResponse(request, "admin/memory/memoryreview/duplicates.html", context)

    def _merge(self, request, user, here):
        try:
            keeper, other = uuid.UUID(request.POST.get("keeper", "")), uuid.UUID(request.POST.get("other", ""))
        except ValueError:
            self.message_user(request, "Not merged: pick two memories.", messages.ERROR)
            return HttpResponseRedirect(here)
        # Both must be this user's: the fold itself is scoped to the tenant only.
        found = set(MemoryRecord.objects.for_tenant(user.tenant).filter(user=user, pk__in=[keeper, other])
                    .values_list("pk", flat=True))
        if found != {keeper, other} or keeper == other:
            self.message_user(request, "Not merged: those are not two memories of this user.", messages.ERROR)
            return HttpResponseRedirect(here)
        folded = memory_actions.memories_fold(tenant=user.tenant, keeper_id=keeper, other_ids=[other],
                                              actor_id=staff_actor(request), actor_type=MemoryEvent.Actor.STAFF,
                                              note="merged near-duplicates by a reviewer")
        if folded:
            self.message_user(request, "Merged: the other memory is superseded by the one kept, which carries its "
                                       "support.", messages.SUCCESS)
        else:
            self.message_user(request, "Not merged: one of them is no longer active.", messages.WARNING)
        return HttpResponseRedirect(here)
