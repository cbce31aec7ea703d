"""The staff playground at /admin/playground/: chat as one end user of a tenant and see the answer, the context the
model was shown by section, the turn's receipt and the memories that changed (the turn: playground_turn.py).

Staff see the tenants the admin lets them see (admin/toolkit.py, admin_tenants) and need the permission to change
sessions: a turn here writes the end user's messages and memories as a real one does. The context a model read is
shown in the answer to the message's POST only (it is not stored); a refresh re-reads what the turn's background
task has written since: its receipt, the memories it changed, and the session's last messages.
"""
from __future__ import annotations

from urllib.parse import urlencode

import redis
from django import forms
from django.conf import settings
from django.contrib import admin
from django.core.exceptions import PermissionDenied
from django.template.response import TemplateResponse

from infra.errors import AppError, ServiceUnavailable
from infra.llm import llm_configured
from tenants.models import Tenant

from .admin.toolkit import admin_tenants
from .playground_turn import (
    SECTION_LABELS,
    playground_after,
    playground_close,
    playground_recent,
    playground_session,
    playground_turn,
    playground_user,
)

PERMISSION = "chat_sessions.change_session"
REDIS_DOWN = (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError)  # the API answers these with a 503


class TenantChoice(forms.ModelChoiceField):
    def label_from_instance(self, obj):
        return f"{obj.name} ({obj.slug})"


class PlaygroundForm(forms.Form):
    """Who the staff user chats as (a tenant they may see, an end user's external id) and, to send, the message."""

    tenant = TenantChoice(queryset=Tenant.objects.none(), empty_label=None)
    external_id = forms.CharField(max_length=255, label="End user (external id)",
                                  help_text="Created on first use, as the API does.")
    message = forms.CharField(widget=forms.Textarea(attrs={"rows": 3, "cols": 80}), strip=False, required=False,
                              max_length=settings.CONTINUUM_MAX_MESSAGE_CHARS)

    def __init__(self, *args, tenants, needs_message: bool = False, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["tenant"].queryset = tenants
        self.needs_message = needs_message

    def clean_external_id(self):
        value = self.cleaned_data["external_id"].strip()
        if not value:
            raise forms.ValidationError("Name the end user.")
        return value

    def clean_message(self):
        value = self.cleaned_data["message"]
        if self.needs_message and not value.strip():
            raise forms.ValidationError("The message is empty.")
        return value


class TurnForm(forms.Form):
    """Which turn a refresh reads again: its session and when it started."""

    session = forms.UUIDField(required=False)
    since = forms.DateTimeField(required=False)


def _next_form(tenant, external_id: str, tenants) -> PlaygroundForm:
    """The form for the next message, as the same user."""
    return PlaygroundForm(initial={"tenant": tenant.pk, "external_id": external_id}, tenants=tenants)


def _tenants(request):
    scoped = admin_tenants(request)
    return (Tenant.objects.all() if scoped is None else scoped).filter(is_active=True).order_by("name")


def _refresh_url(request, *, tenant, external_id, session, since) -> str:
    query = urlencode({"tenant": str(tenant.pk), "external_id": external_id, "session": str(session.pk),
                       "since": since.isoformat()})
    return f"{request.path}?{query}"


def _read(*, tenant, external_id, session_id, since) -> dict:
    """What the page shows of a user's session without a turn: its last messages, and with `since` what the turn
    that began then has had written (its receipt, the memories it changed)."""
    user = playground_user(tenant=tenant, external_id=external_id)
    session = playground_session(tenant=tenant, user=user, session_id=session_id) if user is not None else None
    if session is None:
        return {"chat_user": user}
    out = {"chat_user": user, "session": session, "recent": playground_recent(tenant=tenant, session=session)}
    if since is not None:
        out["after"] = playground_after(tenant=tenant, session=session, since=since)
        out["since"] = since
    return out


def _render(request, context: dict, status: int = 200):
    after = context.get("after")
    receipt = after.receipt if after is not None else None
    receipt_sections = [(SECTION_LABELS.get(k, k), v) for k, v in (receipt.breakdown or {}).items()] if receipt else []
    if receipt_sections:  # the composer counts sections' text: what frames the messages makes up the total
        receipt_sections.append((SECTION_LABELS["framing"],
                                 max(0, receipt.total_tokens - sum(int(v or 0) for _, v in receipt_sections))))
    context = {**admin.site.each_context(request), "title": "Playground", "llm_configured": llm_configured(),
               "receipt_sections": receipt_sections, **context}
    return TemplateResponse(request, "admin/playground/playground.html", context, status=status)


def playground_view(request):
    if not request.user.has_perm(PERMISSION):
        raise PermissionDenied
    tenants = _tenants(request)
    if request.method == "POST":
        if "close" in request.POST:
            return _close(request, tenants)
        return _send(request, tenants)
    if "tenant" not in request.GET:
        return _render(request, {"form": PlaygroundForm(tenants=tenants)})
    form, which = PlaygroundForm(request.GET, tenants=tenants), TurnForm(request.GET)
    if not (form.is_valid() and which.is_valid()):
        return _render(request, {"form": form, "turn_errors": which.errors}, status=400)
    tenant, external_id = form.cleaned_data["tenant"], form.cleaned_data["external_id"]
    try:
        read = _read(tenant=tenant, external_id=external_id, session_id=which.cleaned_data["session"],
                     since=which.cleaned_data["since"])
    except AppError as exc:
        return _render(request, {"form": form, "error": exc}, status=exc.status)
    if read.get("since") is not None:
        read["refresh_url"] = _refresh_url(request, tenant=tenant, external_id=external_id, session=read["session"],
                                           since=read["since"])
    return _render(request, {"form": form, **read})


def _send(request, tenants):
    form = PlaygroundForm(request.POST, tenants=tenants, needs_message=True)
    if not form.is_valid():
        return _render(request, {"form": form}, status=400)
    tenant, external_id = form.cleaned_data["tenant"], form.cleaned_data["external_id"]
    try:
        turn = playground_turn(tenant=tenant, external_id=external_id, text=form.cleaned_data["message"])
    except AppError as exc:
        return _render(request, {"form": form, "error": exc}, status=exc.status)
    except REDIS_DOWN:
        down = ServiceUnavailable("Redis (the session buffers) is unavailable; try again.", code="redis_unavailable")
        return _render(request, {"form": form, "error": down}, status=down.status)
    context = {"form": _next_form(tenant, external_id, tenants),
               "turn": turn, "chat_user": turn.user, "session": turn.session,
               "recent": playground_recent(tenant=tenant, session=turn.session)}
    if turn.answered:
        context["after"] = playground_after(tenant=tenant, session=turn.session, since=turn.started_at)
        context["refresh_url"] = _refresh_url(request, tenant=tenant, external_id=external_id, session=turn.session,
                                              since=turn.started_at)
    return _render(request, context)


def _close(request, tenants):
    form = PlaygroundForm(request.POST, tenants=tenants)
    if not form.is_valid():
        return _render(request, {"form": form}, status=400)
    tenant, external_id = form.cleaned_data["tenant"], form.cleaned_data["external_id"]
    closed = playground_close(tenant=tenant, external_id=external_id)
    return _render(request, {"form": _next_form(tenant, external_id, tenants), "close_done": True, "closed": closed,
                             "chat_user": playground_user(tenant=tenant, external_id=external_id)})


playground = admin.site.admin_view(playground_view)
