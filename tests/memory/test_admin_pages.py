"""The reviewer's admin pages: each renders for a staff user with data, shows what a reviewer reads there (in
words, linked), and costs the same number of queries for 3 rows as for 30 (no query per row)."""
from __future__ import annotations

import html
import json
import re

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test.utils import CaptureQueriesContext

from memory.actions import memories_fold, memory_create, memory_remember, memory_supersede, memory_update_text
from memory.models import MemoryEvent, MemoryRecord
from memory.sources import SourceMessage
from tests.memory.test_admin_review import login, staff_for

pytestmark = pytest.mark.django_db(transaction=True)

MEMORIES = "/admin/memory/memoryrecord/"
QUEUE = "/admin/memory/memoryreview/"
# What a page may add in queries going from 3 rows to 30: none per row. (A page built from bounded
# queries costs the same; one query per row would add 27.)
PER_PAGE_SLACK = 2


def _source(message):
    return SourceMessage(id=str(message.pk), session_id=message.session_id, created_at=message.created_at)


def world(tenant, user, n: int) -> dict:
    """A user with n of everything a reviewer looks at: sessions with bridges, messages with tool calls and their
    results, memories by kind (some inferred and held for review, some reinforced, superseded, edited)."""
    from context.models import BridgeSummary
    from orchestration.messages import messages_append
    from orchestration.sessions import session_close, session_open
    from sessions.services import NewMessage
    from tenants.services import end_user_create

    for i in range(n):
        end_user_create(tenant=tenant, external_id=f"{user.external_id}-neighbour-{i}")
    tenant.review_inferred = True
    tenant.save(update_fields=["review_inferred"])
    sessions = []
    for i in range(n):
        s, _ = session_open(tenant=tenant, user=user, title=f"trip {i}")
        session_close(tenant=tenant, session_id=s.pk, finish=False)
        BridgeSummary.objects.unscoped().create(tenant=tenant, session=s, text=f"Bridge of trip {i}: booked.")
        sessions.append(s)
    session, _ = session_open(tenant=tenant, user=user, title="tools")
    items = []
    for i in range(n):
        items += [
            NewMessage(role="user", content=f"I like city number {i} a lot"),
            NewMessage(role="assistant", content="", tool_calls=[{"id": f"c{i}", "type": "function", "function": {
                "name": "recall", "arguments": json.dumps({"query": f"city {i}"})}}]),
            NewMessage(role="tool", tool_call_id=f"c{i}", name="recall", content=json.dumps(
                {"memories": [{"id": "x", "kind": "fact", "text": "a", "provenance": "p"}] * 4})),
            NewMessage(role="assistant", content=f"City {i} it is."),
        ]
    msgs = messages_append(tenant=tenant, session_id=session.pk, items=items, enqueue_extraction=False)
    users_msgs = [m for m in msgs if m.role == "user"]
    memories = []
    for i, m in enumerate(users_msgs):
        memories.append(memory_create(tenant=tenant, user=user, kind="preference", text=f"Likes city number {i}.",
                                      source=_source(m), subject=f"likes: city {i}", value=f"city {i}"))
        memory_create(tenant=tenant, user=user, kind="preference", text=f"Probably travels to city {i} often.",
                      source_type="inferred", confidence=0.6, source=_source(m))
        memory_create(tenant=tenant, user=user, kind="goal", text=f"Wants to visit city {i}.", source=_source(m))
        memory_create(tenant=tenant, user=user, kind="fact", text=f"Has been to town {i}.", source=_source(m),
                      subject=f"visited {i}", value="yes")
    return {"session": session, "sessions": sessions, "messages": msgs, "memories": memories}


@pytest.fixture
def dana(alice):
    from tenants.services import end_user_create

    return end_user_create(tenant=alice, external_id="traveller-with-a-very-long-external-identifier",
                           display_name="Dana")


@pytest.fixture
def root():
    return User.objects.create_superuser(username="root", password="pw")


def _queries(client, url) -> tuple[int, str]:
    with CaptureQueriesContext(connection) as ctx:
        r = client.get(url)
    assert r.status_code == 200, (url, r.status_code)
    return len(ctx.captured_queries), r.content.decode()


def _pages(tenant, user, w) -> dict[str, str]:
    """Each list narrowed to this tenant or user: the two worlds share the database."""
    memory = w["memories"][-1]
    event = MemoryEvent.objects.unscoped().filter(memory_uuid=memory.pk).first()
    return {
        "user list": f"/admin/tenants/enduser/?tenant={tenant.pk}",
        "user page": f"/admin/tenants/enduser/{user.pk}/change/",
        "memories of the user": f"{MEMORIES}?user__id__exact={user.pk}",
        "memory page": f"{MEMORIES}{memory.pk}/change/",
        "memory history": f"{MEMORIES}{memory.pk}/history/",
        "review queue": f"{QUEUE}?tenant={tenant.pk}",
        "review queue of the user": f"{QUEUE}?user__id__exact={user.pk}",
        "near-duplicates": f"{QUEUE}duplicates/{user.pk}/",
        "events": f"/admin/memory/memoryevent/?user__id__exact={user.pk}",
        "event page": f"/admin/memory/memoryevent/{event.pk}/change/",
        "sessions": f"/admin/chat_sessions/session/?user__id__exact={user.pk}",
        "session transcript": f"/admin/chat_sessions/session/{w['session'].pk}/change/",
        "messages": f"/admin/chat_sessions/message/?session__user__id__exact={user.pk}",
        "message page": f"/admin/chat_sessions/message/{w['messages'][0].pk}/change/",
        "import jobs": f"/admin/orchestration/importjob/?user__id__exact={user.pk}",
    }


def test_every_page_renders_and_costs_no_query_per_row(alice, make_tenant, root):
    from tenants.services import end_user_create

    small_tenant, big_tenant = alice, make_tenant("Big")
    small = end_user_create(tenant=small_tenant, external_id="small", display_name="Small")
    big = end_user_create(tenant=big_tenant, external_id="big", display_name="Big")
    small_pages = _pages(small_tenant, small, world(small_tenant, small, 3))
    big_pages = _pages(big_tenant, big, world(big_tenant, big, 30))
    client = login(root)
    client.get("/admin/")  # the session and the site's caches are warm before anything is counted
    counts = {}
    for name in small_pages:
        n_small, _ = _queries(client, small_pages[name])
        n_big, page = _queries(client, big_pages[name])
        counts[name] = (n_small, n_big)
        assert "Traceback" not in page
    grown = {name: c for name, c in counts.items() if c[1] - c[0] > PER_PAGE_SLACK}
    assert not grown, f"queries (3 rows, 30 rows) that grow with the rows: {grown}"


# --- 1. a user's memory at a glance ----------------------------------------------------------------------------------

def test_user_page_shows_profile_subjects_goals_sessions_and_linked_counts(alice, dana):
    w = world(alice, dana, 3)
    page = login(staff_for(alice)).get(f"/admin/tenants/enduser/{dana.pk}/change/").content.decode()
    assert "Standing profile" in page and "Likes city number 2." in page
    subjects = page[page.index("Instructions, preferences and facts by subject"):page.index("Open goals")]
    assert "likes: city 1" in subjects and "Has been to town 0." in subjects and "the user" in subjects
    assert "I like city number 1 a lot" in subjects  # provenance: the words it came from
    assert "Probably travels" not in subjects  # held for review, not active
    goals = page[page.index("Open goals"):page.index("Recent sessions")]
    assert "Wants to visit city 2." in goals
    recent = page[page.index("Recent sessions"):]
    assert "Bridge of trip 2: booked." in recent and f"/admin/chat_sessions/session/{w['sessions'][0].pk}/" in recent
    # counts link to their filtered lists
    assert f'href="{MEMORIES}?user__id__exact={dana.pk}&amp;status__exact=active&amp;kind__exact=goal">3<' in page
    assert f'?user__id__exact={dana.pk}&amp;status__exact=active&amp;source_type__exact=user_stated">9<' in page
    assert f'{QUEUE}?user__id__exact={dana.pk}' in page
    assert "3 memories awaiting review" in page


def test_user_page_flags_a_goal_that_names_a_replaced_value(alice, dana):
    goal = memory_create(tenant=alice, user=dana, kind="goal", text="Dana needs a flight from SFO to NYC on Tuesday.")
    # Written as a supersede alone: a correction through remember also corrects the goal, so nothing is flagged.
    nyc = memory_create(tenant=alice, user=dana, kind="fact", text="Dana's destination is NYC.", subject="destination",
                        value="NYC")
    newark = memory_create(tenant=alice, user=dana, kind="fact", text="Dana's destination is Newark.",
                           subject="destination", value="Newark")
    memory_supersede(old=nyc, new=newark, actor_type="system")
    page = login(staff_for(alice)).get(f"/admin/tenants/enduser/{dana.pk}/change/").content.decode()
    goals = html.unescape(page[page.index("Open goals"):page.index("Recent sessions")])
    assert goal.text in goals
    assert f'still says “NYC”, since replaced by <a href="{MEMORIES}{newark.pk}/change/">“Newark”</a>' in goals


def test_user_labels_are_short(alice, dana):
    assert str(dana) == "Dana (traveller-with-a-very-l…)"
    memory_create(tenant=alice, user=dana, kind="fact", text="Lives in Ghent.")
    listing = login(staff_for(alice)).get(MEMORIES).content.decode()
    assert "Dana (traveller-with-a-very-l…)" in listing
    assert f"{alice.pk}:traveller" not in listing


def test_user_filter_narrows_every_per_user_list_and_shows_who(alice, dana):
    from tenants.services import end_user_create

    other = end_user_create(tenant=alice, external_id="other", display_name="Olga")
    world(alice, dana, 1)
    memory_create(tenant=alice, user=other, kind="fact", text="Olga lives in Oslo.")
    client = login(staff_for(alice))
    page = client.get(f"{MEMORIES}?user__id__exact={dana.pk}").content.decode()
    assert "Likes city number 0." in page and "Olga lives in Oslo." not in page
    assert re.search(r"Showing only <a href=\"[^\"]+\"><strong>Dana \(", page)  # the active filter, by name
    assert 'class="admin-autocomplete"' in page and 'data-field-name="user"' in page
    assert "select2" in page  # the picker's script is on the page
    for url in ("/admin/memory/memoryevent/", QUEUE, "/admin/chat_sessions/session/",
                "/admin/orchestration/importjob/"):
        assert "Showing only" in client.get(f"{url}?user__id__exact={dana.pk}").content.decode(), url
    msgs = client.get(f"/admin/chat_sessions/message/?session__user__id__exact={dana.pk}").content.decode()
    assert "Showing only" in msgs
    # the autocomplete answers with the short labels of the staff user's own tenant only
    r = client.get("/admin/autocomplete/", {"app_label": "memory", "model_name": "memoryrecord",
                                            "field_name": "user", "term": "Ol"})
    assert r.status_code == 200 and [x["text"] for x in r.json()["results"]] == ["Olga (other)"]
    # a malformed or foreign id selects nothing instead of failing
    assert client.get(f"{MEMORIES}?user__id__exact=nope").status_code == 200


def test_user_filter_and_autocomplete_show_nothing_of_another_tenant(alice, bob, dana):
    memory_create(tenant=alice, user=dana, kind="fact", text="Alice-only fact.")
    client = login(staff_for(bob, username="bobstaff"))
    page = client.get(f"{MEMORIES}?user__id__exact={dana.pk}").content.decode()
    assert "Alice-only fact." not in page and "Dana" not in page
    r = client.get("/admin/autocomplete/", {"app_label": "memory", "model_name": "memoryrecord",
                                            "field_name": "user", "term": "Dana"})
    assert r.json()["results"] == []
    assert client.get(f"{QUEUE}duplicates/{dana.pk}/").status_code == 404


# --- 2. the review queue ---------------------------------------------------------------------------------------------

def test_review_queue_lists_what_is_held_with_its_source(alice, dana):
    w = world(alice, dana, 2)
    page = login(staff_for(alice)).get(QUEUE).content.decode()
    assert "Probably travels to city 1 often." in page and "Likes city number 1." not in page
    assert "I like city number 1 a lot" in page  # the words it was inferred from
    assert f"Holding inferred memories for review: <strong>{alice.slug}</strong>" in page
    pending = MemoryRecord.objects.unscoped().filter(status="pending_review").first()
    assert f"{MEMORIES}{pending.pk}/change/" in page  # opened on its own page, with the buttons
    assert w


@pytest.mark.parametrize("button,status,action", [("_approve", "active", "approved"),
                                                  ("_reject", "deleted", "rejected")])
def test_buttons_on_the_memory_page_edit_then_approve_or_reject(alice, dana, button, status, action):
    alice.review_inferred = True
    alice.save(update_fields=["review_inferred"])
    m = memory_create(tenant=alice, user=dana, kind="preference", text="Probably likes trains.",
                      source_type="inferred", confidence=0.6)
    assert m.status == "pending_review"
    client = login(staff_for(alice, username="reviewer"))
    page = client.get(f"{MEMORIES}{m.pk}/change/").content.decode()
    assert 'name="_approve"' in page and 'name="_reject"' in page and 'name="_restore"' not in page
    r = client.post(f"{MEMORIES}{m.pk}/change/", {"text": "Likes trains.", button: "x"})
    assert r.status_code == 302 and r["Location"] == QUEUE
    m.refresh_from_db()
    assert (m.status, m.text) == (status, "Likes trains.")
    events = list(MemoryEvent.objects.unscoped().filter(memory_uuid=m.pk).values_list(
        "action", "actor_type", "actor_id"))
    assert events[-2:] == [("updated", "staff", "reviewer"), (action, "staff", "reviewer")]


def test_approve_button_on_an_active_memory_is_refused_not_applied(alice, dana):
    m = memory_create(tenant=alice, user=dana, kind="fact", text="Lives in Ghent.")
    client = login(staff_for(alice))
    assert 'name="_approve"' not in client.get(f"{MEMORIES}{m.pk}/change/").content.decode()
    r = client.post(f"{MEMORIES}{m.pk}/change/", {"text": m.text, "_approve": "x"}, follow=True)
    assert "Not approved" in r.content.decode()
    assert not MemoryEvent.objects.unscoped().filter(memory_uuid=m.pk, action="approved").exists()


def test_delete_and_restore_buttons(alice, dana):
    m = memory_create(tenant=alice, user=dana, kind="fact", text="Lives in Ghent.")
    client = login(staff_for(alice, username="reviewer"))
    client.post(f"{MEMORIES}{m.pk}/change/", {"text": m.text, "_delete_memory": "x"})
    m.refresh_from_db()
    assert m.status == "deleted"
    assert 'name="_restore"' in client.get(f"{MEMORIES}{m.pk}/change/").content.decode()
    client.post(f"{MEMORIES}{m.pk}/change/", {"text": m.text, "_restore": "x"})
    m.refresh_from_db()
    assert m.status == "active"


def test_bulk_approve_and_reject_in_the_queue(alice, dana):
    world(alice, dana, 2)
    held = list(MemoryRecord.objects.unscoped().filter(status="pending_review").order_by("created_at"))
    client = login(staff_for(alice, username="reviewer"))
    client.post(QUEUE, {"action": "approve", "_selected_action": [str(held[0].pk)], "index": 0})
    client.post(QUEUE, {"action": "reject", "_selected_action": [str(held[1].pk)], "index": 0})
    held[0].refresh_from_db()
    held[1].refresh_from_db()
    assert (held[0].status, held[1].status) == ("active", "deleted")
    assert MemoryEvent.objects.unscoped().filter(memory_uuid=held[0].pk, action="approved", actor_id="reviewer")
    assert "Probably travels to city 0" not in client.get(QUEUE).content.decode()


def test_near_duplicates_side_by_side_and_merged_by_the_reviewer(alice, dana):
    a = memory_create(tenant=alice, user=dana, kind="preference", text="Dana prefers aisle seats.",
                      subject="likes: aisle seats", value="aisle seats")
    b = memory_create(tenant=alice, user=dana, kind="preference", text="aisle seats",
                      subject="likes: aisle seats", value="aisle seats", source_type="inferred")
    c = memory_create(tenant=alice, user=dana, kind="fact", text="Dana's destination is Newark.")
    client = login(staff_for(alice, username="reviewer"))
    url = f"{QUEUE}duplicates/{dana.pk}/"
    page = client.get(url).content.decode()
    assert "Dana prefers aisle seats." in page and "same subject and value" in page
    assert c.text not in page
    r = client.post(url, {"keeper": str(a.pk), "other": str(b.pk)}, follow=True)
    assert "Merged" in r.content.decode()
    b.refresh_from_db()
    a.refresh_from_db()
    assert (b.status, b.superseded_by_id, a.reinforcement_count) == ("superseded", a.pk, 1)
    ev = MemoryEvent.objects.unscoped().filter(memory_uuid=b.pk, action="superseded").get()
    assert (ev.actor_type, ev.actor_id) == ("staff", "reviewer")


def test_a_merge_of_another_users_memory_is_refused(alice, dana):
    from tenants.services import end_user_create

    olga = end_user_create(tenant=alice, external_id="olga")
    a = memory_create(tenant=alice, user=dana, kind="fact", text="Lives in Ghent.")
    b = memory_create(tenant=alice, user=olga, kind="fact", text="Lives in Ghent.")
    r = login(staff_for(alice)).post(f"{QUEUE}duplicates/{dana.pk}/", {"keeper": str(a.pk), "other": str(b.pk)},
                                     follow=True)
    assert "Not merged" in r.content.decode()
    b.refresh_from_db()
    assert b.status == "active"


# --- 3. readable history ---------------------------------------------------------------------------------------------

def test_memory_timeline_in_words_with_links_actors_and_the_source_quoted(alice, dana):
    w = world(alice, dana, 1)
    old = w["memories"][0]
    memory_update_text(tenant=alice, memory=old, text="Likes city zero.", actor_type="staff", actor_id="ed")
    new = memory_create(tenant=alice, user=dana, kind="preference", text="Likes city zero very much.")
    memories_fold(tenant=alice, keeper_id=new.pk, other_ids=[old.pk], actor_id="lifecycle.merge",
                  note="merged near-duplicates")
    client = login(staff_for(alice))
    page = client.get(f"{MEMORIES}{old.pk}/change/").content.decode()
    timeline = page[page.index("memory-timeline"):]
    assert "Created from what the user said" in timeline
    assert "“I like city number 0 a lot”" in timeline  # the source message, quoted
    assert "Text edited: “Likes city number 0.” → “Likes city zero.”" in timeline and "by staff ed" in timeline
    assert re.search(rf'Merged into →\s*<a href="{MEMORIES}{new.pk}/change/">“Likes city zero very much.”</a>',
                     timeline)
    assert "by the system (lifecycle.merge)" in timeline
    keeper = client.get(f"{MEMORIES}{new.pk}/change/").content.decode()
    assert "Absorbed 1 near-duplicate(s)" in keeper and "reinforced" not in keeper.split("memory-timeline")[1][:20]
    # Django's HISTORY button shows the same timeline, not "no history"
    history = client.get(f"{MEMORIES}{old.pk}/history/").content.decode()
    assert "Text edited" in history and "Merged into" in history


def test_reinforced_and_superseded_read_as_such(alice, dana):
    a, _ = memory_remember(tenant=alice, user=dana, kind="fact", text="Dana's destination is NYC.",
                           subject="destination", value="NYC")
    memory_remember(tenant=alice, user=dana, kind="fact", text="Dana's destination is NYC.",
                    subject="destination", value="NYC")
    b, _ = memory_remember(tenant=alice, user=dana, kind="fact", text="Dana's destination is Newark.",
                           subject="destination", value="Newark")
    page = login(staff_for(alice)).get(f"{MEMORIES}{a.pk}/change/").content.decode()
    assert "Reinforced: said again" in page and "confidence 0.80 → 0.84" in page
    assert re.search(rf'Superseded by →\s*<a href="{MEMORIES}{b.pk}/change/">“Dana&#x27;s destination is Newark.”',
                     page)
    events = login(staff_for(alice, username="other")).get(
        f"/admin/memory/memoryevent/?user__id__exact={dana.pk}").content.decode()
    assert f'Superseded by → <a href="{MEMORIES}{b.pk}/change/">memory {str(b.pk)[:8]}</a>' in events


def test_events_list_shows_the_memory_text_linked_and_no_object_captions(alice, dana):
    m = memory_create(tenant=alice, user=dana, kind="fact", text="Lives in Ghent.")
    memory_update_text(tenant=alice, memory=m, text="Lives in Antwerp.", actor_type="staff", actor_id="ed")
    client = login(staff_for(alice))
    page = client.get("/admin/memory/memoryevent/").content.decode()
    assert f'<a href="{MEMORIES}{m.pk}/change/">Lives in Antwerp.</a>' in page
    assert "Text edited: “Lives in Ghent.” → “Lives in Antwerp.”" in page and "by staff ed" in page
    assert "MemoryEvent object" not in page
    event = MemoryEvent.objects.unscoped().filter(memory_uuid=m.pk, action="updated").get()
    detail = client.get(f"/admin/memory/memoryevent/{event.pk}/change/").content.decode()
    assert "MemoryEvent object" not in detail and "Lives in Antwerp." in detail
    assert str(event).startswith("updated · Lives in Antwerp.")


# --- 4. transcripts --------------------------------------------------------------------------------------------------

def test_transcript_shows_calls_in_words_results_summarised_and_memories_per_message(alice, dana):
    w = world(alice, dana, 2)
    page = html.unescape(login(staff_for(alice)).get(
        f"/admin/chat_sessions/session/{w['session'].pk}/change/").content.decode())
    transcript = page[page.index('class="transcript"'):]
    assert 'called <code>recall(query="city 1")</code> → 4 memories' in transcript
    assert "↳ recall returned 4 memories" in transcript
    assert '{"memories"' not in transcript  # no raw JSON
    first_user = w["messages"][0]
    row = transcript[transcript.index(f'id="msg-{first_user.pk}"'):]
    row = row[:row.index("</tr>")]
    assert "Likes city number 0." in row and "Probably travels to city 0 often." in row and "inferred" in row


def test_message_page_lists_the_memories_drawn_from_it(alice, dana):
    w = world(alice, dana, 1)
    client = login(staff_for(alice))
    page = client.get(f"/admin/chat_sessions/message/{w['messages'][0].pk}/change/").content.decode()
    assert "memories drawn from it" in page.lower() and "Likes city number 0." in page
    call = html.unescape(client.get(f"/admin/chat_sessions/message/{w['messages'][1].pk}/change/").content.decode())
    assert 'called recall(query="city 0")' in call
    listing = client.get("/admin/chat_sessions/message/").content.decode()
    assert "(called recall)" in listing


# --- 5. no debug pages from admin links ------------------------------------------------------------------------------

def test_view_site_leads_to_a_page_that_exists(alice, root):
    page = login(root).get("/admin/").content.decode()
    site = re.search(r'<a href="([^"]+)">View site</a>', page).group(1)
    r = login(root).get(site, follow=True)
    assert r.status_code == 200


def test_transcript_marks_bridge_sentences_nothing_in_the_session_supports(alice, dana):
    from context.models import BridgeSummary
    from orchestration.messages import messages_append
    from orchestration.sessions import session_close, session_open
    from sessions.services import NewMessage

    s, _ = session_open(tenant=alice, user=dana)
    messages_append(tenant=alice, session_id=s.pk, enqueue_extraction=False, items=[
        NewMessage(role="user", content="I need a flight from Boston to Denver on Friday."),
        NewMessage(role="assistant", content="I found a Delta flight for $350 with a window seat.")])
    session_close(tenant=alice, session_id=s.pk, finish=False)
    BridgeSummary.objects.unscoped().create(tenant=alice, session=s, text=(
        "Goal: a flight from Boston to Denver on Friday. Decided: the Delta flight for $350 with a window seat."))
    page = login(staff_for(alice)).get(f"/admin/chat_sessions/session/{s.pk}/change/").content.decode()
    bridge = page[page.index('class="bridge"'):]
    bridge = bridge[:bridge.index("</p>")]
    assert "Goal: a flight from Boston to Denver on Friday.</mark>" not in bridge
    assert re.search(r"<mark[^>]*>Decided: the Delta flight for \$350 with a window seat.</mark>", bridge)


def test_new_tenants_take_the_deployments_review_default(settings):
    from tenants.services import tenant_create

    settings.TENANT_REVIEW_INFERRED_DEFAULT = True
    assert tenant_create(name="Held", slug="held").review_inferred is True
    assert tenant_create(name="Told", slug="told", review_inferred=False).review_inferred is False
    settings.TENANT_REVIEW_INFERRED_DEFAULT = False
    assert tenant_create(name="Free", slug="free").review_inferred is False
