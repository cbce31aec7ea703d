"""Every admin change page saves: for each model the admin registers, its page is posted back as a browser would
send it, unchanged and with one text field changed, by a superuser and by a tenant's staff. A page staff may only
read refuses the post (403); none answers 500, and a page that may be saved redirects (saved), not a form error."""
from __future__ import annotations

import pytest
from django.contrib import admin
from django.contrib.auth.models import Group, Permission, User
from django.test import Client

from tests.admin.admin_world import admin_world, form_of, post_data

pytestmark = pytest.mark.django_db

# The field a change is made in, where a page has it: one a person would edit (a URL field would be checked
# against the network, a slug or username must stay unique).
PREFERRED = ("description", "display_name", "title", "name", "text", "first_name")


def _client(user) -> Client:
    client = Client(raise_request_exception=False)  # a 500 is an answer to assert on, not an exception
    client.force_login(user)
    return client


def _staff(tenant) -> User:
    user = User.objects.create_user(username="tenantstaff", password="pw", is_staff=True)
    user.user_permissions.set(Permission.objects.filter(content_type__app_label__in=[
        "tenants", "chat_sessions", "context", "orchestration", "memory", "webhooks"]))
    tenant.staff_users.add(user)
    return user


def _objects(tenant, root) -> dict[type, object]:
    """One object of each registered model: the first its admin lists of this tenant's (the queue lists only what is
    held for review)."""
    from django.test import RequestFactory

    Group.objects.get_or_create(name="reviewers")
    request = RequestFactory().get("/admin/")
    request.user = root
    found = {}
    for model, model_admin in admin.site._registry.items():
        qs = model_admin.get_queryset(request)
        if model is User:
            qs = qs.filter(pk=root.pk)
        elif any(f.name == "tenant" for f in model._meta.get_fields()):
            qs = qs.filter(tenant=tenant)
        elif model._meta.model_name == "tenant":
            qs = qs.filter(pk=tenant.pk)
        found[model] = qs.order_by("pk").first()
    return found


def _form_errors(response) -> str:
    context = getattr(response, "context", None)
    if not context or "adminform" not in context:
        return response.content.decode()[:300]
    errors = dict(context["adminform"].form.errors)
    for formset in context.get("inline_admin_formsets", []):
        errors.update({f"inline {formset.formset.prefix}": formset.formset.errors,
                       f"inline {formset.formset.prefix} (set)": formset.formset.non_form_errors()})
    return str(errors)


def _walk(client, objects, *, staff: bool) -> dict[str, str]:
    """Post every change page back, unchanged and changed; returns what failed, by model."""
    failures = {}
    for model, obj in objects.items():
        label = f"{model._meta.app_label}.{model._meta.model_name}"
        if obj is None:
            if not staff:
                failures[label] = "no object of this model in the world: add one to admin_world"
            continue
        url = f"/admin/{model._meta.app_label}/{model._meta.model_name}/{obj.pk}/change/"
        page = client.get(url)
        if model._meta.model_name == "memoryreview" and page.status_code == 302:  # the queue opens the memory's page
            url = page["Location"]
            page = client.get(url)
            model = model._meta.concrete_model
        if staff and page.status_code in (302, 403, 404):
            continue  # a page staff may not open (superusers' only): refused, as it should be
        if page.status_code != 200:
            failures[label] = f"GET {page.status_code}"
            continue
        form = form_of(page.content.decode(), f"{model._meta.model_name}_form")
        if 'name="_save"' not in page.content.decode():  # read-only: a post is refused, not served
            r = client.post(url, {"_save": "Save"})
            if r.status_code != 403:
                failures[label] = f"read-only page answered a post with {r.status_code}"
            continue
        unchanged = client.post(url, {**post_data(form.data), "_save": "Save"})
        if unchanged.status_code != 302:
            failures[label] = f"unchanged save answered {unchanged.status_code}: {_form_errors(unchanged)}"
            continue
        fields = dict(f for f in form.text_fields if "-" not in f[0])  # the page's own fields, not an inline's
        name = next((n for n in PREFERRED if n in fields), None)
        number = next((n for n, kind in fields.items() if kind == "number"), None)
        name = name or number or next(iter(fields), None)
        if name is None:
            continue
        data = post_data(form.data)
        old = (data.get(name) or [""])[0]
        data[name] = [str(float(old or 0) + 1) if name == number and name not in PREFERRED else old + " edited"]
        changed = client.post(url, {**data, "_save": "Save"})
        if changed.status_code >= 500:
            failures[label] = f"save of a changed {name} answered {changed.status_code}"
            continue
        if changed.status_code != 302:
            # Any field may refuse free text (a cron field, a date); a free-text or number field must save.
            if name in PREFERRED or name == number:
                failures[label] = f"save of a changed {name} answered {changed.status_code}: {_form_errors(changed)}"
            continue
        if name == number:
            continue
        saved = model._default_manager.all()
        saved = saved.unscoped() if hasattr(saved, "unscoped") else saved
        value = getattr(saved.get(pk=obj.pk), name, None)
        if value is not None and not str(value).endswith("edited"):
            failures[label] = f"the changed {name} was not saved: {value!r}"
    return failures


def test_every_change_page_saves_unchanged_and_changed_for_a_superuser(alice, dana, root):
    world = admin_world(alice, dana)
    objects = _objects(alice, root)
    assert objects[type(world["receipt"])] is not None
    failures = _walk(_client(root), objects, staff=False)
    assert not failures, "\n".join(f"{k}: {v[:600]}" for k, v in failures.items())


def test_every_change_page_saves_unchanged_and_changed_for_a_tenants_staff(alice, dana, root):
    admin_world(alice, dana)
    objects = _objects(alice, root)
    failures = _walk(_client(_staff(alice)), objects, staff=True)
    assert not failures, "\n".join(f"{k}: {v[:600]}" for k, v in failures.items())


def test_a_tenant_with_an_api_key_saves_its_review_settings(alice, root):
    from tenants.models import Tenant, TenantApiKey

    assert TenantApiKey.objects.for_tenant(alice).exists()
    client = _client(root)
    url = f"/admin/tenants/tenant/{alice.pk}/change/"
    form = form_of(client.get(url).content.decode(), "tenant_form")
    data = post_data(form.data)
    data["review_supersede_below"] = ["0.5"]
    data.pop("review_inferred", None)
    data["review_inferred"] = ["on"]
    r = client.post(url, {**data, "_save": "Save"})
    assert r.status_code == 302, _form_errors(r)
    alice = Tenant.objects.get(pk=alice.pk)
    assert alice.review_inferred is True and alice.review_supersede_below == 0.5


def test_an_inline_row_id_of_another_tenant_is_a_form_error_not_a_500(alice, bob, root):
    from tenants.models import TenantApiKey

    client = _client(root)
    url = f"/admin/tenants/tenant/{alice.pk}/change/"
    form = form_of(client.get(url).content.decode(), "tenant_form")
    data = post_data(form.data)
    key_field = "api_keys-0-id"
    assert key_field in data
    data[key_field] = [TenantApiKey.objects.for_tenant(bob).get().pk]
    r = client.post(url, {**data, "_save": "Save"})
    assert r.status_code == 200 and "Select a valid choice" in str(_form_errors(r))
