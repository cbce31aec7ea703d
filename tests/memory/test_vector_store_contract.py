"""The vector-store contract: the same tests against Qdrant Edge and qdrant-client's local mode."""
from __future__ import annotations

import time
import uuid

import pytest
from hypothesis import HealthCheck, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st
from qdrant_client import QdrantClient

from infra.vector_store import MemoryPoint, Scope, ScopeMissing
from infra.vector_store.base import VectorStoreError, collection_name, point_id_for
from infra.vector_store.edge import EdgeVectorStore
from infra.vector_store.filters import ScopeFilter
from infra.vector_store.server import ServerVectorStore

DIM = 8
TENANT_A = "0a000000-0000-4000-8000-00000000000a"
TENANT_B = "0b000000-0000-4000-8000-00000000000b"
USER_1 = "01000000-0000-4000-8000-000000000001"
USER_2 = "02000000-0000-4000-8000-000000000002"


def basis(i: int, tilt: float = 0.0) -> list[float]:
    v = [0.0] * DIM
    v[i % DIM] = 1.0
    v[(i + 1) % DIM] = tilt
    return v


def point(tenant: str, user: str, text: str, dense: list[float], memory_id: str | None = None, **payload):
    payload = {"tenant_id": tenant, "user_id": user, "status": "active", "kind": "fact", "text": text, **payload}
    return MemoryPoint(memory_id=memory_id or str(uuid.uuid4()), dense=dense, text=text, payload=payload)


@pytest.fixture(params=["edge", "qdrant_local"])
def store(request, tmp_path):
    if request.param == "edge":
        s = EdgeVectorStore(tmp_path / "contract-edge", dim=DIM)
    else:
        s = ServerVectorStore(QdrantClient(path=str(tmp_path / "contract-local")), collection="contract", dim=DIM)
    s.ensure_collection()
    s.ensure_collection()  # idempotent
    yield s
    s.close()


@pytest.fixture
def world(store):
    """Alice's user 1 owns three memories; canaries with the same texts and vectors belong to another user of the
    same tenant and to the same user id under another tenant. A leak would rank a canary as high as ours."""
    texts = ["I fly to Newark on Friday", "My dog is called Rex", "I prefer aisle seats on long flights"]
    own = [point(TENANT_A, USER_1, t, basis(i)) for i, t in enumerate(texts)]
    other_user = [point(TENANT_A, USER_2, t, basis(i)) for i, t in enumerate(texts)]
    other_tenant = [point(TENANT_B, USER_1, t, basis(i)) for i, t in enumerate(texts)]
    store.upsert(own + other_user + other_tenant)
    ids = lambda pts: {p.memory_id for p in pts}  # noqa: E731
    return {"own": ids(own), "other_user": ids(other_user), "other_tenant": ids(other_tenant), "points": own}


ALICE_1 = Scope(TENANT_A, USER_1)


def test_upsert_then_retrieve_returns_the_payload(store, world):
    first = world["points"][0]
    [hit] = store.retrieve(ALICE_1, [first.memory_id])
    assert hit.memory_id == first.memory_id
    assert hit.payload["text"] == "I fly to Newark on Friday"
    assert hit.payload["tenant_id"] == TENANT_A and hit.payload["user_id"] == USER_1


def test_dense_search_ranks_the_nearest_first(store, world):
    hits = store.search(ALICE_1, dense=basis(1, tilt=0.1), text=None, limit=3)
    assert [h.payload["text"] for h in hits][0] == "My dog is called Rex"
    assert hits[0].score > hits[1].score
    assert len(hits) == 3


def test_sparse_search_finds_keyword_matches(store, world):
    hits = store.search(ALICE_1, dense=None, text="Rex the dog", limit=5)
    assert [h.payload["text"] for h in hits] == ["My dog is called Rex"]


def test_hybrid_search_fuses_dense_and_keyword_hits(store, world):
    # The vector points at the aisle-seat memory, the words at Newark: both come back, the Newark one first
    # because a second memory ("flights") shares no keyword with it and only the flight memories match "Newark".
    hits = store.search(ALICE_1, dense=basis(2), text="Newark", limit=3)
    texts = [h.payload["text"] for h in hits]
    assert "I fly to Newark on Friday" in texts[:2]
    assert "I prefer aisle seats on long flights" in texts[:2]
    both = store.search(ALICE_1, dense=basis(0), text="Newark Friday", limit=3)
    assert both[0].payload["text"] == "I fly to Newark on Friday"


def test_search_with_no_usable_input_returns_nothing(store, world):
    assert store.search(ALICE_1, dense=None, text=None, limit=5) == []
    assert store.search(ALICE_1, dense=None, text="the and of", limit=5) == []  # stopwords only
    assert store.search(ALICE_1, dense=basis(0), text=None, limit=0) == []


@pytest.mark.parametrize("mode", ["dense", "sparse", "hybrid"])
def test_search_never_returns_another_tenant_or_user(store, world, mode):
    dense = basis(0) if mode != "sparse" else None
    text = "Newark dog aisle flights Rex" if mode != "dense" else None
    found = {h.memory_id for h in store.search(ALICE_1, dense=dense, text=text, limit=50)}
    assert found and found <= world["own"]
    tenant_wide = {h.memory_id for h in store.search(Scope(TENANT_A), dense=dense, text=text, limit=50)}
    assert tenant_wide & world["other_user"]
    assert not tenant_wide & world["other_tenant"]


def test_scroll_is_scoped_and_pages_through_everything(store, world):
    seen, offset = [], None
    for _ in range(10):
        page, offset = store.scroll(ALICE_1, limit=2, offset=offset)
        seen += [h.memory_id for h in page]
        if offset is None:
            break
    assert set(seen) == world["own"] and len(seen) == 3


def test_count_is_scoped(store, world):
    assert store.count(ALICE_1) == 3
    assert store.count(Scope(TENANT_A)) == 6
    assert store.count(Scope(TENANT_B)) == 3
    assert store.count(ALICE_1, statuses=["deleted"]) == 0
    assert store.count(ALICE_1, statuses=[]) == 0


def test_delete_of_foreign_ids_deletes_nothing(store, world):
    store.delete(ALICE_1, list(world["other_user"] | world["other_tenant"]))
    assert store.count(Scope(TENANT_A, USER_2)) == 3
    assert store.count(Scope(TENANT_B)) == 3
    own = sorted(world["own"])
    store.delete(ALICE_1, own[:1])
    assert store.count(ALICE_1) == 2


def test_retrieve_is_scoped(store, world):
    asked = list(world["own"] | world["other_user"] | world["other_tenant"])
    assert {h.memory_id for h in store.retrieve(ALICE_1, asked)} == world["own"]
    assert store.retrieve(ALICE_1, []) == []


def test_set_payload_is_scoped(store, world):
    foreign = sorted(world["other_tenant"])[0]
    store.set_payload(ALICE_1, foreign, {"status": "deleted"})
    [canary] = store.retrieve(Scope(TENANT_B, USER_1), [foreign])
    assert canary.payload["status"] == "active"
    own = sorted(world["own"])[0]
    store.set_payload(ALICE_1, own, {"status": "deleted", "importance": 0.1})
    [mine] = store.retrieve(ALICE_1, [own])
    assert mine.payload["status"] == "deleted" and mine.payload["importance"] == 0.1
    assert store.count(ALICE_1, statuses=["active"]) == 2


@pytest.mark.parametrize("key", ["tenant_id", "user_id", "memory_id"])
def test_set_payload_cannot_move_a_point_out_of_its_scope(store, world, key):
    own = sorted(world["own"])[0]
    with pytest.raises(ValueError):
        store.set_payload(ALICE_1, own, {key: TENANT_B})
    [mine] = store.retrieve(ALICE_1, [own])
    assert mine.payload["tenant_id"] == TENANT_A


@pytest.mark.parametrize("tenant", ["", "   ", None])
def test_a_scope_without_tenant_raises(tenant):
    with pytest.raises(ScopeMissing):
        Scope(tenant, USER_1)


@pytest.mark.parametrize("call", [
    lambda s: s.search(None, dense=basis(0), text="x", limit=5),
    lambda s: s.scroll(None),
    lambda s: s.count(None),
    lambda s: s.delete(None, [str(uuid.uuid4())]),
    lambda s: s.delete_scope(None),
    lambda s: s.retrieve(None, [str(uuid.uuid4())]),
    lambda s: s.set_payload(None, str(uuid.uuid4()), {"status": "active"}),
    lambda s: s.search(object.__new__(Scope), dense=basis(0), text=None, limit=5),  # a Scope that skipped its check
], ids=["search", "scroll", "count", "delete", "delete_scope", "retrieve", "set_payload", "bypassed_scope"])
def test_every_call_without_a_tenant_raises(store, world, call):
    with pytest.raises(ScopeMissing):
        call(store)


def test_a_point_without_tenant_or_user_is_refused(store):
    with pytest.raises(ScopeMissing):
        store.upsert([MemoryPoint(str(uuid.uuid4()), basis(0), "x", {"user_id": USER_1})])
    with pytest.raises(ScopeMissing):
        store.upsert([MemoryPoint(str(uuid.uuid4()), basis(0), "x", {"tenant_id": TENANT_A})])
    assert store.health() == 0


def test_a_vector_of_the_wrong_size_is_refused(store):
    with pytest.raises(ValueError):
        store.upsert([point(TENANT_A, USER_1, "x", [1.0, 0.0])])
    with pytest.raises(ValueError):
        store.search(ALICE_1, dense=[1.0, 0.0], text=None, limit=5)


def test_expired_points_are_excluded(store):
    now = time.time()
    expired = point(TENANT_A, USER_1, "old boarding pass for Newark", basis(0), expires_at=now - 60)
    fresh = point(TENANT_A, USER_1, "next boarding pass for Newark", basis(0, 0.1), expires_at=now + 3600)
    forever = point(TENANT_A, USER_1, "home airport is Newark", basis(0, 0.2))
    store.upsert([expired, fresh, forever])
    for dense, text in [(basis(0), None), (None, "Newark"), (basis(0), "Newark")]:
        found = {h.memory_id for h in store.search(ALICE_1, dense=dense, text=text, limit=10, not_expired_at=now)}
        assert found == {fresh.memory_id, forever.memory_id}
    unfiltered = store.search(ALICE_1, dense=basis(0), text=None, limit=10)
    assert expired.memory_id in {h.memory_id for h in unfiltered}


def test_statuses_and_kinds_narrow_the_search(store):
    active = point(TENANT_A, USER_1, "likes tea", basis(0))
    superseded = point(TENANT_A, USER_1, "likes coffee", basis(0, 0.1), status="superseded")
    goal = point(TENANT_A, USER_1, "wants to learn Rust", basis(0, 0.2), kind="goal")
    store.upsert([active, superseded, goal])
    default = {h.memory_id for h in store.search(ALICE_1, dense=basis(0), text=None, limit=10)}
    assert default == {active.memory_id, goal.memory_id}
    any_status = {h.memory_id for h in store.search(ALICE_1, dense=basis(0), text=None, limit=10, statuses=None)}
    assert any_status == {active.memory_id, superseded.memory_id, goal.memory_id}
    goals = store.search(ALICE_1, dense=basis(0), text=None, limit=10, kinds=["goal"])
    assert [h.memory_id for h in goals] == [goal.memory_id]
    assert store.search(ALICE_1, dense=basis(0), text=None, limit=10, kinds=[]) == []


def test_upserting_the_same_memory_twice_keeps_one_point(store):
    memory_id = str(uuid.uuid4())
    store.upsert([point(TENANT_A, USER_1, "my seat is 12A", basis(0), memory_id=memory_id)])
    store.upsert([point(TENANT_A, USER_1, "my seat is 14C", basis(1), memory_id=memory_id)])
    assert store.count(ALICE_1) == 1
    [hit] = store.retrieve(ALICE_1, [memory_id.upper()])
    assert hit.payload["text"] == "my seat is 14C"
    assert store.search(ALICE_1, dense=None, text="12A", limit=5) == []


def test_delete_scope_removes_one_user_and_nothing_else(store, world):
    store.delete_scope(ALICE_1)
    assert store.count(ALICE_1) == 0
    assert store.count(Scope(TENANT_A, USER_2)) == 3
    assert store.count(Scope(TENANT_B, USER_1)) == 3


def test_results_are_post_filtered_even_if_the_backend_filter_leaks(store, world, monkeypatch):
    """The second guard: with the backend filter sabotaged to match everything, nothing foreign comes back."""
    monkeypatch.setattr(ScopeFilter, "to_edge", lambda self: None)
    monkeypatch.setattr(ScopeFilter, "to_client", lambda self: None)
    for dense, text in [(basis(0), None), (None, "Newark dog aisle"), (basis(0), "Newark dog aisle")]:
        found = {h.memory_id for h in store.search(ALICE_1, dense=dense, text=text, limit=50)}
        assert found and found <= world["own"]
    asked = list(world["own"] | world["other_user"] | world["other_tenant"])
    assert {h.memory_id for h in store.retrieve(ALICE_1, asked)} <= world["own"]
    page, _ = store.scroll(ALICE_1, limit=50)
    assert {h.memory_id for h in page} == world["own"]


def test_dense_size_and_health(store, world):
    assert store.dense_size() == DIM
    assert store.health() == 9


def test_point_ids_are_deterministic():
    memory_id = uuid.uuid4()
    assert point_id_for(memory_id) == point_id_for(str(memory_id)) == point_id_for(str(memory_id).upper())
    assert point_id_for(memory_id) != point_id_for(uuid.uuid4())


def test_collection_name_is_per_embedding_model():
    assert collection_name("continuum_memories", "all-MiniLM-L6-v2", 384) == "continuum_memories_all_minilm_l6_v2_384"
    assert collection_name("p", "text-embedding-3-small", 1536) != collection_name("p", "all-MiniLM-L6-v2", 384)


@hsettings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(owners=st.lists(st.tuples(st.integers(0, 2), st.integers(0, 2)), min_size=1, max_size=12),
       asker=st.tuples(st.integers(0, 2), st.integers(0, 2)), axis=st.integers(0, DIM - 1))
def test_no_search_ever_crosses_tenants_or_users(store, owners, asker, axis):
    run = uuid.uuid4().hex[:8]  # each example writes under fresh tenant ids
    tenant = lambda i: f"{run}-tenant-{i}"  # noqa: E731
    points = [point(tenant(t), f"user-{u}", f"note {n} about trains", basis(axis + n)) for n, (t, u) in
              enumerate(owners)]
    store.upsert(points)
    scope = Scope(tenant(asker[0]), f"user-{asker[1]}")
    mine = {p.memory_id for p, o in zip(points, owners) if o == asker}
    for dense, text in [(basis(axis), None), (None, "trains"), (basis(axis), "trains")]:
        found = {h.memory_id for h in store.search(scope, dense=dense, text=text, limit=20)}
        assert found == mine
    assert store.count(scope) == len(mine)


def test_edge_shard_is_held_by_one_opener_and_persists(tmp_path):
    path = tmp_path / "held"
    first = EdgeVectorStore(path, dim=DIM)
    first.ensure_collection()
    first.upsert([point(TENANT_A, USER_1, "persisted", basis(0))])
    with pytest.raises(VectorStoreError):
        EdgeVectorStore(path, dim=DIM)
    first.close()
    first.close()  # idempotent
    with pytest.raises(VectorStoreError):
        first.count(ALICE_1)
    again = EdgeVectorStore(path, dim=DIM)
    try:
        assert again.count(ALICE_1) == 1
        assert again.dense_size() == DIM
    finally:
        again.close()


def _segment_files_holding(path, needle: str) -> list:
    """Files of an Edge shard, outside its write-ahead log, whose bytes contain `needle`."""
    return [f for f in path.rglob("*") if f.is_file() and "wal" not in f.relative_to(path).parts
            and needle.encode() in f.read_bytes()]


def test_a_deleted_memory_leaves_the_edge_segments_once_vacuumed(tmp_path):
    path = tmp_path / "vacuumed"
    store = EdgeVectorStore(path, dim=DIM)
    try:
        store.ensure_collection()
        canary = uuid.uuid4().hex  # random: payloads are stored compressed, and only what never repeats stays literal
        gone = point(TENANT_A, USER_1, f"My locker code belongs to the {canary}", basis(0))
        kept = [point(TENANT_A, USER_1, f"kept memory {i}", basis(i)) for i in range(50)]
        store.upsert([gone, *kept])
        store.close()  # flushed to the segment files
        store = EdgeVectorStore(path, dim=DIM)
        store.delete(ALICE_1, [gone.memory_id])
        store.close()
        assert _segment_files_holding(path, canary)  # deleted, and still on disk until a vacuum rewrites its segment
        store = EdgeVectorStore(path, dim=DIM)
        assert store.vacuum() is True  # one deleted point of 51 is enough to rewrite its segment
        assert store.vacuum() is False  # nothing deleted since
        store.close()
        assert _segment_files_holding(path, canary) == []
        store = EdgeVectorStore(path, dim=DIM)
        assert store.count(ALICE_1) == 50
        axis_3 = {kept[i].memory_id for i in range(3, 50, DIM)}
        assert {h.memory_id for h in store.search(ALICE_1, dense=basis(3), limit=len(axis_3))} == axis_3
    finally:
        store.close()


def test_a_shard_written_with_an_older_config_takes_todays_when_opened(tmp_path):
    import json

    from qdrant_edge import Distance, EdgeConfig, EdgeShard, EdgeSparseVectorParams, EdgeVectorParams, Modifier

    path = tmp_path / "older"
    path.mkdir()
    # What earlier versions created: the same vectors, Qdrant's default optimizer settings.
    EdgeShard.create(str(path), EdgeConfig(vectors={"dense": EdgeVectorParams(size=DIM, distance=Distance.Cosine)},
                                           sparse_vectors={"bm25": EdgeSparseVectorParams(modifier=Modifier.Idf)}))\
        .close()
    store = EdgeVectorStore(path, dim=DIM)
    store.close()
    optimizers = json.loads((path / "edge_config.json").read_text())["optimizers"]
    assert (optimizers["deleted_threshold"], optimizers["vacuum_min_vector_number"]) == (0.0, 0)
    assert EdgeVectorStore(path, dim=DIM + 1).dense_size() == DIM  # another size is loaded as it is, and reported


def test_the_registry_opens_one_edge_shard_per_embedding_model(settings):
    from infra.vector_store import get_vector_store, reset_vector_store

    store = get_vector_store()
    assert store is get_vector_store()
    assert store.backend_name == "edge"
    assert store.path == settings.QDRANT_EDGE_PATH / collection_name(
        settings.QDRANT_COLLECTION_PREFIX, settings.EMBEDDING_MODEL, settings.EMBEDDING_DIM)
    assert store.dense_size() == settings.EMBEDDING_DIM
    reset_vector_store()
    reopened = get_vector_store()  # close released the shard's lock
    assert reopened is not store and reopened.health() == 0


@pytest.mark.parametrize("threads, expected", [(1, 1), (3, 3), (0, None)])
def test_the_edge_search_pool_takes_its_size_from_the_settings(settings, tmp_path, threads, expected):
    settings.QDRANT_EDGE_PATH = tmp_path / "edge"
    settings.QDRANT_EDGE_SEARCH_THREADS = threads  # 0: one thread per CPU, Qdrant's own default
    settings.EMBEDDING_DIM = DIM
    store = EdgeVectorStore.from_settings()
    try:
        assert store._config().max_search_threads == expected
        store.upsert([point(TENANT_A, USER_1, "I fly to Newark on Friday", basis(0))])
        assert [h.payload["text"] for h in store.search(Scope(TENANT_A, USER_1), dense=basis(0), limit=1)] == [
            "I fly to Newark on Friday"]
    finally:
        store.close()


def test_a_forked_process_does_not_reuse_the_parents_edge_shard(monkeypatch):
    import infra.vector_store.registry as registry

    parent = registry.get_vector_store()
    monkeypatch.setattr(registry.os, "getpid", lambda: -1)
    with pytest.raises(VectorStoreError):  # the parent still holds the shard: the child fails loudly
        registry.get_vector_store()
    monkeypatch.undo()
    registry.set_vector_store(parent)


def test_a_dead_qdrant_server_is_reported_as_unavailable_not_crashed(settings):
    from infra.vector_store import get_vector_store, reset_vector_store

    store = ServerVectorStore(QdrantClient(url="http://127.0.0.1:1", timeout=1, check_compatibility=False),
                              collection="dead", dim=DIM)
    with pytest.raises(VectorStoreError):
        store.ensure_collection()
    with pytest.raises(VectorStoreError):
        store.search(ALICE_1, dense=basis(0), text="x", limit=5)
    store.close()
    settings.QDRANT_URL = "http://127.0.0.1:1"
    reset_vector_store()
    with pytest.raises(VectorStoreError) as err:
        get_vector_store()
    assert err.value.status == 503 and err.value.retryable


def test_payload_keys_narrow_the_payload_but_keep_the_scope_keys(store, world):
    full = store.search(ALICE_1, dense=basis(1), text="Rex dog", limit=3)
    slim = store.search(ALICE_1, dense=basis(1), text="Rex dog", limit=3, payload_keys=("kind",))
    assert [(h.memory_id, h.score) for h in slim] == [(h.memory_id, h.score) for h in full]
    assert "text" in full[0].payload and "text" not in slim[0].payload
    assert slim[0].payload["tenant_id"] == TENANT_A and slim[0].payload["user_id"] == USER_1
    assert slim[0].payload["kind"] == "fact" and slim[0].payload["memory_id"] == slim[0].memory_id


def test_search_batch_answers_each_search_as_search_would(store, world):
    from infra.vector_store.base import Search

    searches = [Search(ALICE_1, dense=basis(0), limit=3), Search(ALICE_1, text="Rex the dog", limit=5),
                Search(ALICE_1, text="the and of", limit=5),  # nothing to search for: an empty answer in its place
                Search(Scope(TENANT_A, USER_2), dense=basis(2), text="aisle", limit=2, payload_keys=())]
    answers = store.search_batch(searches)
    assert len(answers) == 4 and answers[2] == []
    for search, hits in zip(searches, answers):
        alone = store.search(search.scope, dense=search.dense, text=search.text, limit=search.limit,
                             payload_keys=search.payload_keys)
        assert [(h.memory_id, round(h.score, 6), h.payload) for h in hits] == \
            [(h.memory_id, round(h.score, 6), h.payload) for h in alone]
    assert {h.memory_id for h in answers[3]} <= world["other_user"] and answers[3]
    assert "text" not in answers[3][0].payload
    with pytest.raises(ScopeMissing):
        store.search_batch([Search(None, dense=basis(0), limit=3)])


def test_another_tenants_words_do_not_change_how_a_tenants_terms_weigh(store):
    """Keyword terms are kept per tenant, so a term's document frequency is counted in its tenant only: another
    tenant writing "dog" a hundred times leaves "dog" and "Newark" weighing alike here, as they did (and this
    tenant's search walks none of those postings). On the code that shared term ids across tenants, the other
    tenant's points lowered "dog"'s IDF here and the Newark memory outranked the dog one."""
    store.upsert([point(TENANT_A, USER_1, t, basis(i)) for i, t in enumerate(
        ["My dog is called Rex", "I fly to Newark on Friday", "I prefer aisle seats on long flights"])])

    def weights() -> dict[str, float]:
        return {h.payload["text"]: h.score for h in store.search(ALICE_1, text="dog Newark", limit=3)}

    before = weights()
    store.upsert([point(TENANT_B, USER_1, f"The dog number {i} sleeps", basis(i)) for i in range(100)])
    after = weights()
    assert set(before) == set(after) == {"My dog is called Rex", "I fly to Newark on Friday"}
    ratio = lambda w: w["My dog is called Rex"] / w["I fly to Newark on Friday"]  # noqa: E731
    assert ratio(after) == pytest.approx(ratio(before), rel=1e-6)
