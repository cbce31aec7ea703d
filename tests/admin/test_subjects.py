"""A memory's subject and value follow its text: an edit reads them again (or takes the reviewer's), and every label
reads as the memory does ("avoids: United", not "likes: united")."""
from __future__ import annotations

import html

import pytest
from django.test import Client

from memory.actions import memory_create, memory_update_text
from memory.models import MemoryEvent, MemoryRecord
from memory.subjects import first_person, slot_after_edit, slot_derive, subject_label
from tests.admin.admin_world import form_of, post_data

pytestmark = pytest.mark.django_db

MEMORIES = "/admin/memory/memoryrecord/"


@pytest.mark.parametrize("text, kind, slot", [
    ("Dana avoids United.", "preference", ("likes: united", "negative")),
    ("Dana prefers aisle seats.", "preference", ("likes: aisle seats", "positive")),
    ("Dana never flies United.", "preference", ("habit: fly united", "never")),
    ("Dana's destination is Boston.", "fact", ("destination", "Boston")),
    ("Dana is flying to Boston.", "fact", ("destination", "Boston")),
    ("Dana asked the assistant: Always answer in French in every reply.", "procedure",
     ("instruction: always answer in french in every reply.", "Always answer in French in every reply.")),
    ("Boston", "fact", None),
    ("Her brother avoids United.", "preference", None),  # not about Dana
])
def test_a_statement_is_read_back_into_the_slot_extraction_gives_it(text, kind, slot):
    assert slot_derive(text=text, kind=kind, who="Dana") == slot


def test_third_person_statements_read_back_in_the_users_words():
    assert first_person("Dana avoids United.", who="Dana") == "I avoid United."
    assert first_person("The user never flies at night.", who="Dana") == "I never fly at night."
    assert first_person("Dana's budget is $500.", who="Dana") == "My budget is $500."
    assert first_person("Danaë likes tea.", who="Dana") is None


@pytest.mark.parametrize("subject, value, text, label", [
    ("likes: united", "negative", "Dana avoids United.", "avoids: United"),
    ("likes: united", "negative", "Dana hates United.", "hates: United"),
    ("likes: aisle seats", "positive", "Dana prefers aisle seats.", "prefers: aisle seats"),
    ("likes: united", "positive", "Likes the airline.", "likes: united"),
    ("habit: want red-eye flights", "never", "Dana never wants red-eye flights.", "never: wants red-eye flights"),
    ("destination", "Boston", "Dana's destination is Boston.", "destination"),
    ("instruction: always answer in french.", "Always answer in French.",
     "Dana asked the assistant: Always answer in French.", "instruction"),
])
def test_labels_read_as_the_memory_does(subject, value, text, label):
    assert subject_label(subject=subject, value=value, text=text) == label


def test_an_edit_keeps_a_slot_the_text_still_says_and_drops_one_it_no_longer_does():
    kept = slot_after_edit(text="Dana avoids United on long trips.", kind="fact", who="Dana",
                           subject="likes: united", value="negative")
    assert kept == ("likes: united", "negative")
    assert slot_after_edit(text="Boston", kind="fact", who="Dana", subject="destination", value="JFK") == ("", "")


def test_an_edited_text_carries_its_own_subject_and_value_with_the_change_in_the_history(alice, dana):
    memory = memory_create(tenant=alice, user=dana, kind="fact", text="Dana's destination is JFK.",
                           subject="destination", value="JFK")
    memory_update_text(tenant=alice, memory=memory, text="Dana's destination is Boston.", actor_type="staff",
                       actor_id="root")
    memory.refresh_from_db()
    assert (memory.text, memory.subject, memory.value) == ("Dana's destination is Boston.", "destination", "Boston")
    event = MemoryEvent.objects.for_tenant(alice).filter(memory_uuid=memory.pk, action="updated").get()
    assert (event.before["value"], event.after["value"]) == ("JFK", "Boston")
    assert event.note == "text edited; subject and value read from the text"

    memory_update_text(tenant=alice, memory=memory, text="Dana has not chosen where to fly.", actor_type="staff")
    memory.refresh_from_db()
    assert (memory.subject, memory.value) == ("", "")


def test_subject_and_value_given_by_the_caller_are_kept(alice, dana):
    memory = memory_create(tenant=alice, user=dana, kind="fact", text="Dana flies out of Boston.")
    memory_update_text(tenant=alice, memory=memory, text=memory.text, subject="The Origin ", value=" Boston ",
                       actor_type="staff")
    memory.refresh_from_db()
    assert (memory.subject, memory.value) == ("origin", "Boston")
    assert MemoryEvent.objects.for_tenant(alice).filter(memory_uuid=memory.pk, action="updated").get().note == \
        "subject and value set"


def _page_form(client, memory):
    url = f"{MEMORIES}{memory.pk}/change/"
    form = form_of(client.get(url).content.decode(), "memoryrecord_form")
    return url, post_data(form.data)


def test_the_reviewer_edits_text_and_the_slot_follows_or_sets_the_slot_by_hand(alice, dana, root):
    client = Client()
    client.force_login(root)
    memory = memory_create(tenant=alice, user=dana, kind="fact", text="Dana's destination is JFK.",
                           subject="destination", value="JFK")
    url, data = _page_form(client, memory)
    assert data["subject"] == ["destination"] and data["value"] == ["JFK"]
    data["text"] = ["Dana's destination is Boston."]
    assert client.post(url, {**data, "_save": "Save"}).status_code == 302
    memory.refresh_from_db()
    assert (memory.subject, memory.value) == ("destination", "Boston")

    url, data = _page_form(client, memory)
    data["value"] = ["Boston Logan"]
    assert client.post(url, {**data, "_save": "Save"}).status_code == 302
    memory.refresh_from_db()
    assert (memory.text, memory.subject, memory.value) == ("Dana's destination is Boston.", "destination",
                                                           "Boston Logan")
    history = html.unescape(client.get(f"{MEMORIES}{memory.pk}/history/").content.decode())
    assert "value “JFK” → “Boston”" in history and "value “Boston” → “Boston Logan”" in history


def test_a_subject_too_long_is_a_form_error(alice, dana, root):
    client = Client()
    client.force_login(root)
    memory = memory_create(tenant=alice, user=dana, kind="fact", text="Dana flies out of Boston.")
    url, data = _page_form(client, memory)
    data["subject"] = ["x" * 300]
    r = client.post(url, {**data, "_save": "Save"})
    assert r.status_code == 200 and "at most 200 characters" in r.content.decode()
    assert MemoryRecord.objects.for_tenant(alice).get(pk=memory.pk).subject == ""


def test_the_user_page_and_the_queue_label_a_liking_as_the_memory_says_it(alice, dana, root):
    alice.review_inferred = True
    alice.save(update_fields=["review_inferred"])
    memory_create(tenant=alice, user=dana, kind="preference", text="Dana avoids United.", subject="likes: united",
                  value="negative")
    memory_create(tenant=alice, user=dana, kind="preference", text="Dana never wants red-eye flights.",
                  subject="habit: want red-eye flights", value="never")
    memory_create(tenant=alice, user=dana, kind="preference", text="Dana probably dislikes Delta.",
                  subject="likes: delta", value="negative", source_type="inferred", confidence=0.5)
    client = Client()
    client.force_login(root)
    page = html.unescape(client.get(f"/admin/tenants/enduser/{dana.pk}/change/").content.decode())
    assert "avoids: United" in page and "never: wants red-eye flights" in page
    assert "likes: united" not in page and "habit: want red-eye flights" not in page
    queue = html.unescape(client.get(f"/admin/memory/memoryreview/?user__id__exact={dana.pk}").content.decode())
    assert "dislikes: Delta" in queue and "likes: delta" not in queue
