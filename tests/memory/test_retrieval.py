"""Retrieval: tenant and user isolation of every search, scroll, count and delete; only active, unexpired
memories; provenance; neighbour expansion under a budget; access counted off the request path; store down → 503."""
from __future__ import annotations

from datetime import timedelta

import pytest

from infra import clock
from infra.errors import ServiceUnavailable
from infra.vector_store import ScopeMissing, set_vector_store
from memory.actions import memory_create
from memory.models import MemoryRecord
from memory.rendering import memories_block
from memory.retrieval import memory_retrieve, memory_retrieve_for_users
from memory.retrieval.query import query_build
from memory.selectors import memory_points_count, memory_points_scroll, memory_points_search
from sessions.turn_reads import turns_around

from .memory_support import MAY_8, points_of, record_turns

pytestmark = pytest.mark.django_db(transaction=True)

CANARY = "canary-7f3a: the vault code word is pineapple"


@pytest.fixture
def world(alice, bob, alice_user):
    """Alice's user with ordinary memories; canaries for Alice's other user and for Bob's tenant's user."""
    from tenants.services import end_user_create

    alice.memory_ttl_days = {"event": None, "goal": None}
    alice.save()
    other = end_user_create(tenant=alice, external_id="alice-user-2", display_name="Zed")
    outsider = end_user_create(tenant=bob, external_id="alice-user-1", display_name="Ada")  # same external id
    record_turns(alice, alice_user, [("user", "I prefer aisle seats on long flights."),
                                     ("user", "My favourite fruit is pineapple.")])
    canaries = [memory_create(tenant=alice, user=other, kind="fact", text=CANARY),
                memory_create(tenant=bob, user=outsider, kind="fact", text=CANARY),
                memory_create(tenant=bob, user=outsider, kind="preference", text="Ada prefers aisle seats.")]
    return {"other": other, "outsider": outsider, "canaries": {str(c.pk) for c in canaries}}


def memory_points_delete(*, tenant, user, memory_ids):
    """Points removed behind the database's back (drift the reconcile job repairs)."""
    from infra.vector_store import Scope, get_vector_store

    scope = Scope(tenant_id=str(tenant.pk) if tenant is not None else "",
                  user_id=str(user.pk) if user is not None else None)
    get_vector_store().delete(scope, [str(m) for m in memory_ids])


def test_search_never_returns_another_users_or_tenants_memories(alice, alice_user, world):
    for query in (CANARY, "vault code word pineapple", "aisle seats", "canary"):
        found = memory_retrieve(tenant=alice, user=alice_user, query=query, k=50)
        assert found and not {m.memory_id for m in found} & world["canaries"]
        assert all(m.user_id == str(alice_user.pk) for m in found)
        budgeted = memory_retrieve(tenant=alice, user=alice_user, query=query, k=50, token_budget=2000)
        assert not {m.memory_id for m in budgeted} & world["canaries"]


def test_users_of_another_tenant_are_refused_even_when_passed(alice, alice_user, world):
    found = memory_retrieve_for_users(tenant=alice, users=[alice_user, world["outsider"]], query=CANARY, k=50)
    assert not {m.memory_id for m in found} & world["canaries"]


def test_scroll_count_search_and_delete_are_scoped(alice, bob, alice_user, world):
    mine = {str(pk) for pk in
            MemoryRecord.objects.unscoped().filter(tenant=alice, user=alice_user).values_list("pk", flat=True)}
    hits, _ = memory_points_scroll(tenant=alice, user=alice_user)
    assert {h.memory_id for h in hits} == mine
    assert memory_points_count(tenant=alice, user=alice_user) == len(mine)
    assert memory_points_count(tenant=bob) == 2
    assert not {h.memory_id for h in memory_points_search(tenant=alice, user=alice_user, text=CANARY, limit=50)} \
        & world["canaries"]
    # Deleting Bob's canary ids through Alice's scope deletes nothing.
    memory_points_delete(tenant=alice, user=alice_user, memory_ids=list(world["canaries"]))
    assert memory_points_count(tenant=bob) == 2
    assert memory_points_count(tenant=alice, user=world["other"]) == 1
    memory_points_delete(tenant=alice, user=alice_user, memory_ids=sorted(mine)[:1])
    assert memory_points_count(tenant=alice, user=alice_user) == len(mine) - 1


def test_a_query_without_tenant_raises(alice_user):
    with pytest.raises(ScopeMissing):
        memory_points_scroll(tenant=None)
    with pytest.raises(ScopeMissing):
        memory_points_count(tenant=None)
    with pytest.raises(ScopeMissing):
        memory_points_search(tenant=None, user=alice_user, text="aisle")
    with pytest.raises(ScopeMissing):
        memory_points_delete(tenant=None, user=None, memory_ids=["x"])
    with pytest.raises(ScopeMissing):
        memory_retrieve(tenant=None, user=alice_user, query="aisle")


def test_only_active_unexpired_memories_come_back(alice, alice_user):
    from memory.actions import memory_delete

    kept = memory_create(tenant=alice, user=alice_user, kind="preference", text="Ada prefers aisle seats.")
    gone = memory_create(tenant=alice, user=alice_user, kind="preference", text="Ada prefers aisle seats near exits.")
    expired = memory_create(tenant=alice, user=alice_user, kind="goal", text="Ada wants aisle seats on the May trip.",
                            learned_at=clock.now() - timedelta(days=400))
    pending = memory_create(tenant=alice, user=alice_user, kind="preference", source_type="inferred",
                            text="Ada probably likes aisle seats by the wing.")
    MemoryRecord.objects.unscoped().filter(pk=pending.pk).update(status="pending_review")
    memory_delete(tenant=alice, memory_id=gone.pk, actor_type="end_user")
    assert expired.expires_at < clock.now()
    found = {m.memory_id for m in memory_retrieve(tenant=alice, user=alice_user, query="aisle seats", k=20)}
    assert found == {str(kept.pk)}


def test_superseded_memory_is_not_retrieved(alice, alice_user):
    record_turns(alice, alice_user, [("user", "I need a flight from SFO to NYC next Tuesday.")], start=clock.now())
    record_turns(alice, alice_user, [("user", "Change the destination to Newark.")],
                 start=clock.now() + timedelta(minutes=1))
    texts = [m.text for m in memory_retrieve(tenant=alice, user=alice_user, query="destination", k=20)]
    assert "Ada's destination is Newark." in texts and "Ada's destination is NYC." not in texts


def test_results_carry_provenance_and_expand_neighbours_within_budget(alice, alice_user):
    alice.memory_ttl_days = {"event": None, "goal": None}
    alice.save()
    session, messages = record_turns(alice, alice_user, [
        ("assistant", "What did you do at the weekend?"),
        ("user", "I went hiking on Mount Tamalpais with my sister Sara."),
        ("assistant", "Nice! How long was the trail?"),
        ("user", "About 12 miles, it took us six hours."),
    ])
    plain = memory_retrieve(tenant=alice, user=alice_user, query="Who did Ada go hiking with?", k=5)
    assert "hiking" in plain[0].text and "Sara" in plain[0].text
    assert plain[0].provenance == "you said on 8 May 2023 (session 1)"
    assert plain[0].neighbours == []  # no budget, no expansion
    top = memory_retrieve(tenant=alice, user=alice_user, query="Who did Ada go hiking with?", k=5, token_budget=500,
                          neighbours=turns_around)
    event = next(m for m in top if m.kind == "event" and "hiking" in m.text)
    # Neighbours are shown as their informative part (the "Nice!" filler goes).
    assert event.neighbours == ["assistant: What did you do at the weekend?", "assistant: How long was the trail?"]
    assert event.neighbour_message_ids == [str(messages[0].pk), str(messages[2].pk)]
    assert event.neighbours_before == 1
    # Read as a transcript: the question before the hit above it, the follow-up below, each a line of its own.
    assert memories_block([event]).splitlines()[1:] == [
        "- assistant: What did you do at the weekend?", f"- {event.text}", "- assistant: How long was the trail?"]
    assert sum(m.token_count for m in top) <= 500
    tight = memory_retrieve(tenant=alice, user=alice_user, query="Who did Ada go hiking with?", k=5, token_budget=20,
                            neighbours=turns_around)
    assert sum(m.token_count for m in tight) <= 20 and all(not m.neighbours for m in tight)


def test_a_neighbouring_turn_reads_its_relative_dates_resolved_like_any_turn(alice, alice_user):
    record_turns(alice, alice_user, [
        ("assistant", "What have you been up to this week?"),
        ("user", "Margit Olsen conducts our choir."),
        ("user", "We had our first concert together yesterday."),
    ])
    found = memory_retrieve(tenant=alice, user=alice_user, query="Who conducts Ada's choir?", k=5, token_budget=500,
                            neighbours=turns_around)
    hit = next(m for m in found if m.neighbours)
    assert "Margit Olsen" in hit.text
    # Said on 8 May 2023: the turn after the hit says when the concert was, as the block shows any turn's dates.
    assert hit.neighbours[hit.neighbours_before:] == [
        'Ada: We had our first concert together yesterday. ("yesterday" = 7 May 2023)']


def test_token_budget_is_never_exceeded(alice, alice_user):
    alice.memory_ttl_days = {"event": None}
    alice.save()
    record_turns(alice, alice_user, [("user", f"On day {i} I walked {i} miles along the river with my dog Rex.")
                                     for i in range(1, 15)])
    assert not memory_retrieve(tenant=alice, user=alice_user, query="walks with Rex", k=50, token_budget=5)
    for budget in (40, 60, 100, 300):
        found = memory_retrieve(tenant=alice, user=alice_user, query="walks with Rex", k=50, token_budget=budget)
        assert found and sum(m.token_count for m in found) <= budget


def test_access_is_counted_after_the_response(alice, alice_user, settings):
    settings.CELERY_TASK_ALWAYS_EAGER = True
    kept = memory_create(tenant=alice, user=alice_user, kind="preference", text="Ada prefers aisle seats.")
    memory_retrieve(tenant=alice, user=alice_user, query="aisle seats", k=5)
    memory_retrieve(tenant=alice, user=alice_user, query="aisle seats", k=5)
    kept.refresh_from_db()
    assert kept.access_count == 2 and kept.last_accessed_at is not None


def test_store_down_raises_service_unavailable(alice, alice_user):
    memory_create(tenant=alice, user=alice_user, kind="preference", text="Ada prefers aisle seats.")

    class DownStore:
        backend_name = "down"

        def search(self, *args, **kwargs):
            raise ConnectionError("connection refused")

        search_batch = search

    set_vector_store(DownStore())
    try:
        with pytest.raises(ServiceUnavailable):
            memory_retrieve(tenant=alice, user=alice_user, query="aisle seats")
    finally:
        set_vector_store(None)


def test_query_is_input_plus_goal():
    assert query_build(query="which seat?", goal="Book a flight to Newark") == "which seat?\nBook a flight to Newark"
    assert query_build(query="book a flight to newark now", goal="Book a flight to Newark") == \
        "book a flight to newark now"


def test_events_of_old_sessions_keep_their_dates_and_session_numbers(alice, alice_user):
    alice.memory_ttl_days = {"event": None}
    alice.save()
    from orchestration.sessions import session_close

    s1, _ = record_turns(alice, alice_user, [("user", "I adopted a cat called Miso.")])
    session_close(tenant=alice, session_id=s1.pk)
    record_turns(alice, alice_user, [("user", "Miso learned to open the fridge door.")],
                 start=MAY_8 + timedelta(days=30))
    found = {m.text: m.provenance for m in memory_retrieve(tenant=alice, user=alice_user, query="Miso the cat", k=5)}
    assert found["Ada: I adopted a cat called Miso."] == "you said on 8 May 2023 (session 1)"
    assert found["Ada: Miso learned to open the fridge door."] == "you said on 7 June 2023 (session 2)"
    assert set(points_of(alice, alice_user))


def test_llm_rewrites_the_query_when_configured_and_failure_falls_back(alice, alice_user, settings):
    import json

    import httpx
    import respx

    settings.LLM_BASE_URL, settings.LLM_MODEL, settings.LLM_MAX_RETRIES = "http://llm.test/v1", "m", 0
    kept = memory_create(tenant=alice, user=alice_user, kind="preference", text="Ada prefers aisle seats.")
    answer = {"id": "x", "object": "chat.completion", "created": 0, "model": "m",
              "choices": [{"index": 0, "finish_reason": "stop",
                           "message": {"role": "assistant",
                                       "content": json.dumps({"query": "aisle seat preference", "parts": []})}}]}
    with respx.mock() as mock:
        route = mock.post("http://llm.test/v1/chat/completions").mock(
            side_effect=[httpx.Response(200, json=answer), httpx.ConnectError("down")])
        first = memory_retrieve(tenant=alice, user=alice_user, query="book it like last time", goal="Flight to Newark")
        second = memory_retrieve(tenant=alice, user=alice_user, query="which seat?")
    assert route.call_count == 2
    sent = json.loads(route.calls[0].request.content)["messages"][1]["content"]
    assert "book it like last time" in sent and "Flight to Newark" in sent
    assert first[0].memory_id == str(kept.pk) and second[0].memory_id == str(kept.pk)


def test_a_question_the_model_splits_into_parts_finds_the_best_memory_of_each_part(alice, alice_user, settings):
    import json

    import httpx
    import respx

    alice.memory_ttl_days = {"event": None}
    alice.save()
    sights = ["the castle", "the tram 28 line", "the Belem tower", "the tile museum", "the cathedral",
              "the LX factory market", "the botanical garden", "the aquarium", "the fado house in Alfama",
              "the Gulbenkian museum", "the Time Out market", "the Jeronimos monastery"]
    record_turns(alice, alice_user,
                 [("user", f"On the trip, when we got to Lisbon we saw {sight}.") for sight in sights]
                 + [("user", "We flew to Lisbon on the third of June."),
                    ("user", "In Porto I bought a blue ceramic jug for my mother.")])
    question = "When did we get to Lisbon on the trip, and what did I buy in Porto?"
    plain = memory_retrieve(tenant=alice, user=alice_user, query=question, k=3)

    settings.LLM_BASE_URL, settings.LLM_MODEL, settings.LLM_MAX_RETRIES = "http://llm.test/v1", "m", 0
    settings.MEMORY_QUERY_REWRITE = True
    plan = {"query": "trip to Lisbon and Porto", "parts": ["flew to Lisbon", "bought in Porto"]}
    answer = {"id": "x", "object": "chat.completion", "created": 0, "model": "m",
              "choices": [{"index": 0, "finish_reason": "stop",
                           "message": {"role": "assistant", "content": json.dumps(plan)}}]}
    with respx.mock() as mock:
        route = mock.post("http://llm.test/v1/chat/completions").mock(return_value=httpx.Response(200, json=answer))
        split = memory_retrieve(tenant=alice, user=alice_user, query=question, k=3)
    assert route.call_count == 1
    jug = "In Porto I bought a blue ceramic jug"
    # The whole question reads like the many trip notes, which crowd both answers out; each part brings its own in.
    assert not any(jug in m.text for m in plain) or not any("third of June" in m.text for m in plain)
    assert any(jug in m.text for m in split) and any("third of June" in m.text for m in split)


def test_an_embedder_that_fails_or_cannot_load_is_a_service_unavailable(alice, alice_user, world, monkeypatch):
    from infra import embedder as embedder_module
    from infra.embedder import set_embedder

    class Broken:
        model_name, dim = "broken", 384

        def embed(self, texts):
            raise RuntimeError("model crashed")

    set_embedder(Broken())
    try:
        with pytest.raises(ServiceUnavailable) as failed:
            memory_retrieve(tenant=alice, user=alice_user, query="aisle seats")
        assert failed.value.code == "embedder_unavailable"
    finally:
        set_embedder(None)

    def cannot_load():
        raise OSError("model files missing")

    monkeypatch.setattr(embedder_module, "get_embedder", cannot_load)
    with pytest.raises(ServiceUnavailable) as failed:
        memory_retrieve(tenant=alice, user=alice_user, query="aisle seats")
    assert failed.value.code == "embedder_unavailable"


def test_a_question_about_how_something_changed_gets_its_thread_from_every_session(alice, alice_user, settings):
    from orchestration.sessions import session_close

    alice.memory_ttl_days = {"event": None}
    alice.save()
    # One session discussed the invoices table at length; two later ones each changed it once.
    first, _ = record_turns(alice, alice_user, [
        ("user", "The invoices table schema has customer_id, amount_cents and due_on columns."),
        ("user", "In the invoices table schema, amount_cents is an integer column."),
        ("user", "The invoices table schema keeps due_on as a date column."),
        ("user", "The invoices table schema indexes customer_id.")])
    session_close(tenant=alice, session_id=first.pk)
    other, _ = record_turns(alice, alice_user, [("user", "My sister visits in August."), ("user", "I run on Sundays."),
                                                ("user", "The dentist moved my appointment."),
                                                ("user", "I am reading a novel about Lisbon.")],
                            start=MAY_8 + timedelta(days=10))
    session_close(tenant=alice, session_id=other.pk)
    later = []
    for days, change in ((20, "We added a currency column to the invoices table."),
                         (40, "We renamed due_on to due_date in the invoices table.")):
        session, _ = record_turns(alice, alice_user, [("user", change), ("user", "My cat Miso likes the balcony."),
                                                      ("user", "I booked a train to Porto for Friday.")],
                                  start=MAY_8 + timedelta(days=days))
        session_close(tenant=alice, session_id=session.pk)
        later.append(str(session.pk))
    question = "How did the invoices table schema change over the project?"

    def sessions_found():
        return {m.session_id for m in memory_retrieve(tenant=alice, user=alice_user, query=question, k=3)}

    settings.MEMORY_THREAD_QUESTIONS = False
    assert not set(later) <= sessions_found()  # the first session's many close matches fill k
    settings.MEMORY_THREAD_QUESTIONS = True
    assert set(later) <= sessions_found()


def test_thread_questions_are_told_from_others():
    from memory.retrieval.query import asks_for_thread

    for question in ("How did the invoices table's schema change over the project?",
                     "How has the page's load time evolved?", "What have we decided so far?",
                     "How did my training plan develop over the months?"):
        assert asks_for_thread(question), question
    for question in ("What did I buy in Porto?", "When did we change the schema?",
                     "Which seat do I prefer?", "What time is the flight over to Lisbon?",
                     "Where did she move from four years ago?"):
        assert not asks_for_thread(question), question


def test_questions_about_a_former_value_are_told_from_others():
    from memory.retrieval.query import asks_for_earlier

    for question in ("What did I say before?", "What locker number did I have before?", "Where did I use to live?",
                     "What was my old address?", "Which airline did I prefer at first?", "What was the plan before?",
                     "Have I ever eaten meat?"):
        assert asks_for_earlier(question), question
    for question in ("Where do I live?", "What should I pack before the trip?", "Did I eat before the meeting?",
                     "What is my locker number?", "How do I use to-do lists?"):
        assert not asks_for_earlier(question), question


def test_names_are_taken_out_of_a_second_search_and_nothing_else():
    from memory.retrieval.query import without_names

    assert without_names("What does Ada do to unwind?", ["Ada", "Zed"]) == "What does do to unwind?"
    assert without_names("Where did Ada's sister move? ada knows", ["Ada"]) == "Where did sister move? knows"
    assert without_names("What did Zed tell Ada about Porto?", ["Ada", "Zed"]) == "What did tell about Porto?"
    assert without_names("Is the Adamant report due?", ["Ada"]) is None  # a word that starts with a name is kept
    assert without_names("How was the trip?", ["Ada"]) is None  # no name: no second search
    assert without_names("Ada?", ["Ada"]) is None  # nothing but the name
    assert without_names("What does Ada like?", ["", "  "]) is None


@pytest.mark.parametrize("question,answer", [
    ("What does Ada do to destress?", "Running by the river clears my head after a long week."),
    ("What hobbies does Ada have?", "I have been doing pottery on Tuesdays and I play the cello."),
    ("Which sports does Ada play?", "I joined a volleyball club and we train on Thursdays."),
    ("What pets does Ada have?", "My two cats, Miso and Tofu, sleep on the balcony all day."),
])
def test_a_question_naming_the_user_finds_the_answer_over_their_shortest_turns(alice, alice_user, settings,
                                                                                question, answer):
    """Every event of Ada's is "Ada: ..."; her shortest turns are mostly her name, and a question that names her
    sits nearest to them, by embedding and by keyword alike. The answer shares no word with the question."""
    alice.memory_ttl_days = {"event": None}
    alice.save()
    for text in ("What inspired it?", "Where did you find it?", "Ha, same here.", "Tell me more!", "Oh wow, really?",
                 "Glad it helped.", "What happened next?", "I did, yes.",
                 "The quarterly report is due on the ninth and I still need the sales figures.",
                 "My sister moved to Porto last spring and loves the tram.",
                 "We repainted the kitchen a pale green over the holidays.",
                 "The new laptop arrived but the charger is the wrong plug.",
                 "I am learning Portuguese with an app every morning on the bus."):
        memory_create(tenant=alice, user=alice_user, kind="event", text=f"Ada: {text}")
    wanted = str(memory_create(tenant=alice, user=alice_user, kind="event", text=f"Ada: {answer}").pk)

    def rank_of_answer():
        found = [m.memory_id for m in memory_retrieve(tenant=alice, user=alice_user, query=question, k=20)]
        return found.index(wanted)

    settings.MEMORY_SEARCH_WITHOUT_NAMES = False
    assert rank_of_answer() >= 5  # below most of the short turns
    settings.MEMORY_SEARCH_WITHOUT_NAMES = True
    assert rank_of_answer() <= 1


def test_a_question_that_names_a_day_finds_what_was_said_that_day(alice, alice_user, settings):
    """Five sessions talk about dinner; the question names the day of one of them. The plain search has no way to
    tell those days apart (the words are alike), the search of that day's window does."""
    alice.memory_ttl_days = {"event": None}
    alice.save()
    wanted = None
    for n, plan in enumerate(("dinner with my brother at the Thai place", "dinner at home with a new pasta recipe",
                              "dinner with friends from the gym", "dinner with colleagues after the offsite",
                              "dinner with my neighbours on the terrace")):
        session, _ = record_turns(alice, alice_user, [
            ("user", f"Tonight I am off to have {plan}, talk later!"),
            ("user", "The weather has been lovely all week and the garden is full of tomatoes."),
            ("user", "Work was busy again, we shipped the new billing screen.")],
            start=MAY_8 + timedelta(days=9 * n))
        if n == 1:
            wanted = session
    day = (MAY_8 + timedelta(days=9)).strftime("%-d %B, %Y")
    question = f"What were Ada's plans for the evening of {day}?"

    def sessions_found():
        return [m.session_id for m in memory_retrieve(tenant=alice, user=alice_user, query=question, k=2)]

    settings.MEMORY_SEARCH_NAMED_DATES = False
    assert str(wanted.pk) not in sessions_found()
    settings.MEMORY_SEARCH_NAMED_DATES = True
    assert str(wanted.pk) in sessions_found()  # ranked in turn with the best of all days


def test_the_window_a_question_names():
    from datetime import datetime, timezone

    from memory.named_dates import said_window

    now = datetime(2026, 12, 3, 15, tzinfo=timezone.utc)
    utc = lambda *a: datetime(*a, tzinfo=timezone.utc)  # noqa: E731
    # a day, with a day's margin to each side for the asker's time zone
    assert said_window("What did Maria plan on the evening of 7 July, 2023?", now) == (utc(2023, 7, 6), utc(2023, 7, 9))
    assert said_window("what did I say on 2024-03-05", now) == (utc(2024, 3, 4), utc(2024, 3, 7))
    assert said_window("What did we discuss yesterday?", now) == (utc(2026, 12, 1), utc(2026, 12, 4))
    # two days named: one window over both
    assert said_window("Between March 3, 2024 and March 10, 2024, what changed?", now) == (utc(2024, 3, 2),
                                                                                         utc(2024, 3, 12))
    # nothing named, a bare month or a year, or a day still to come: no window
    for text in ("Where has Melanie camped?", "When did Melanie go camping in July?", "What happened in 2023?",
                 "I need a flight next Tuesday", "Remind me on 2027-01-05"):
        assert said_window(text, now) is None, text


def test_a_retrievals_searches_reach_the_store_as_two_batches_keywords_first(alice, alice_user, settings, world):
    """A question naming the user and a day is searched as the text, the text without the name, and that day's
    window: every keyword search goes to the store as one batch, issued while the query is still being embedded,
    then every dense search as another."""
    from infra.vector_store import get_vector_store

    settings.MEMORY_SEARCH_WITHOUT_NAMES = settings.MEMORY_SEARCH_NAMED_DATES = True
    store, batches = get_vector_store(), []

    class Recording:
        def __getattr__(self, name):
            return getattr(store, name)

        def search_batch(self, searches):
            batches.append(sorted({"dense" if s.dense is not None else "keyword" for s in searches})
                           + [len(searches), sum(s.said_between is not None for s in searches)])
            return store.search_batch(searches)

    set_vector_store(Recording())
    try:
        day = clock.now() - timedelta(days=2)
        memory_retrieve(tenant=alice, user=alice_user, query=f"What did Ada cook on {day:%-d %B, %Y}?", k=5)
    finally:
        set_vector_store(store)
    assert batches == [["keyword", 3, 1], ["dense", 3, 1]]


def _walk_row(n: int, text: str) -> dict:
    from datetime import datetime, timezone

    return {"id": f"m{n}", "kind": "event", "text": text, "source_type": "user_stated",
            "created_at": datetime(2026, 3, n, tzinfo=timezone.utc), "session_id": f"s{n}",
            "source_message_id": f"t{n}", "source_message_ids": [f"t{n}"], "user_id": "u", "confidence": 0.8,
            "session_number": n, "dates": []}


def test_a_memory_whose_shown_sentences_were_all_shown_already_gives_its_place_to_news():
    """A paragraph the user pastes into every session makes each session's passage show the same best sentence for
    the question: the second copy would spend the budget on nothing new, so the next memory comes in instead. What
    is new in a memory counts sentence by sentence, after a speaker's name, and the same at any budget."""
    from memory.excerpts import key_weights, query_keys
    from memory.rendering import BlockBudget
    from memory.retrieval.retrieve import _BudgetWalk, sentences_said

    pasted = "The invoices table has grown to two million rows since the first import of the old data."
    ranked = [(3.0, _walk_row(1, f"Priya: {pasted} My cat Miso sat on the keyboard again this morning, so "
                                 "I lost an hour of work and had to start the migration notes from scratch.")),
              (2.0, _walk_row(2, f"Priya: {pasted} We are moving the office to Porto next spring, which means "
                                 "a lot of boxes, a new lease and a longer commute for everyone on the team.")),
              (1.0, _walk_row(3, "Priya: I added a due_date column to the invoices table and an index on "
                                 "customer_id."))]
    question = "How has the invoices table grown and changed?"
    walk = _BudgetWalk(block=BlockBudget(120), k=10, part_max=30,
                       weights=key_weights(query_keys(question), [r["text"] for _, r in ranked]),
                       nearby=None, parts=lambda row: {})
    walk.run(ranked)
    assert [m.memory_id for m in walk.shown] == ["m1", "m3"]
    assert sum(pasted[:40] in m.text for m in walk.shown) == 1
    assert sentences_said("Priya: The invoices table grew. … Thanks!") == {"the invoices table grew"}


def test_a_turn_that_only_greets_the_people_asked_about_is_never_retrieved(alice):
    """A question that names both people of a conversation pulls their shortest turns by the names alone; a turn that
    only greets, thanks or says goodbye to them answers nothing and is left out, at any budget and without one."""
    from tenants.services import end_user_create

    john = end_user_create(tenant=alice, external_id="john", display_name="John")
    maria = end_user_create(tenant=alice, external_id="maria", display_name="Maria")
    farewell = memory_create(tenant=alice, user=john, kind="event", text="John: Take care, Maria! See ya!")
    thanks = memory_create(tenant=alice, user=maria, kind="event", text="Maria: Thanks so much, John!")
    fact = memory_create(tenant=alice, user=john, kind="event",
                         text="John: Maria, I started kickboxing classes at the gym near my office.")
    for budget in (None, 300):
        found = [m.memory_id for m in memory_retrieve_for_users(
            tenant=alice, users=[john, maria], query="What did John tell Maria about the gym?", k=10,
            token_budget=budget)]
        assert str(fact.pk) in found
        assert not {str(farewell.pk), str(thanks.pk)} & set(found), found


def test_session_note_lines_are_retrieved_only_where_configured(alice, alice_user, settings):
    """MEMORY_RETRIEVE_NOTES off: retrieval returns the turns and leaves the notes' quoted lines out; on, both."""
    settings.MEMORY_RETRIEVE_NOTES = False
    note = memory_create(tenant=alice, user=alice_user, kind="note", text="Ada: The staging database runs Postgres 16.")
    turn = memory_create(tenant=alice, user=alice_user, kind="event",
                         text="Ada: We moved staging to Postgres 16 last week, production follows in June.")
    found = {m.memory_id for m in memory_retrieve(tenant=alice, user=alice_user, query="Which Postgres on staging?")}
    assert str(turn.pk) in found and str(note.pk) not in found
    settings.MEMORY_RETRIEVE_NOTES = True
    found = {m.memory_id for m in memory_retrieve(tenant=alice, user=alice_user, query="Which Postgres on staging?")}
    assert str(note.pk) in found
