"""The local embedder and the token counter work offline (HF_HUB_OFFLINE=1, no tiktoken download)."""
from __future__ import annotations

import math
import os

import pytest

from infra.embedder import LocalEmbedder, get_embedder
from infra.tokens import count_message_tokens, count_tokens, truncate_to_tokens


def _cos(a, b):
    return sum(x * y for x, y in zip(a, b))


@pytest.fixture(scope="module")
def embedder():
    assert os.environ.get("HF_HUB_OFFLINE") == "1"
    return get_embedder()


def test_local_embedder_loads_offline_and_gives_384_d_unit_vectors(embedder):
    assert isinstance(embedder, LocalEmbedder)
    vectors = embedder.embed(["I fly to Newark on Friday.", "My dog is called Rex."])
    assert len(vectors) == 2
    for v in vectors:
        assert len(v) == 384 == embedder.dim
        assert math.isclose(math.sqrt(sum(x * x for x in v)), 1.0, abs_tol=1e-4)
    assert embedder.embed([]) == []


def test_similar_sentences_are_closer_than_unrelated_ones(embedder):
    hiking, trekking, invoice = embedder.embed([
        "I love hiking in the mountains.",
        "Mountain trekking is my favourite hobby.",
        "The invoice total came to 42 dollars.",
    ])
    assert _cos(hiking, trekking) > _cos(hiking, invoice) + 0.3


def test_embedding_is_deterministic(embedder):
    embedder.recent.clear()
    a = embedder.embed(["same text"])[0]
    embedder.recent.clear()  # computed again, not served from the embedder's memory of recent texts
    b = embedder.embed(["same text"])[0]
    assert max(abs(x - y) for x, y in zip(a, b)) < 1e-5


def test_onnx_float_export_matches_torch_vector_for_vector():
    """The float ONNX export is the same model: its vectors are the torch ones."""
    texts = ["I moved to Lisbon in May 2023.", "What did I say about the hotel budget?", "ok"]
    onnx = LocalEmbedder(runtime="onnx")
    assert onnx.runtime == "onnx"
    for a, b in zip(onnx.embed(texts), LocalEmbedder(runtime="torch").embed(texts), strict=True):
        assert _cos(a, b) > 0.9999


def test_default_runtime_is_the_int8_export_close_to_the_float_model(embedder, settings):
    """Quantized weights move each vector a little (cosine ~0.99 for a sentence; a lone word moves most), never to
    another text's place: points written by the float model stay searchable."""
    assert embedder.runtime == "onnx-int8" == settings.EMBEDDING_RUNTIME
    texts = ["I moved to Lisbon in May 2023.", "What did I say about the hotel budget?", "I prefer aisle seats.",
             "My sister Ana is joining me for the last three days."]
    quantized = embedder._compute(texts)
    exact = LocalEmbedder(runtime="torch").embed(texts)
    for a, b in zip(quantized, exact, strict=True):
        assert 0.98 < _cos(a, b) < 0.99999  # close, and really computed by another model
    for i, q in enumerate(quantized):
        assert max(range(len(exact)), key=lambda j: _cos(q, exact[j])) == i


@pytest.mark.parametrize("runtime", ["onnx-int8", "onnx"])
def test_a_texts_vector_does_not_depend_on_the_texts_embedded_with_it(embedder, runtime):
    """A memory embedded in the outbox's batch, its duplicate check and a query for it must meet the same vector."""
    local = embedder if runtime == embedder.runtime else LocalEmbedder(runtime=runtime)
    texts = ["Caroline: I went to a LGBTQ support group yesterday and it was so powerful.", "ok",
             "Melanie: Wow, that's cool! What inspired you to paint a sunset over the lake last weekend?",
             "I fly to Newark on Friday."]
    batched = local._compute(texts)
    for text, vector in zip(texts, batched, strict=True):
        alone = local._compute([text])[0]
        assert max(abs(x - y) for x, y in zip(alone, vector)) < 1e-5


def test_onnx_vectors_skip_the_modules_but_equal_what_they_compute(embedder, settings):
    """The session is fed straight from the tokenizer: same padding, truncation, mean pooling and normalisation."""
    from infra.embedder_export import local_model_path, onnx_model, onnx_model_dir

    assert embedder._direct is not None and embedder._model is None
    texts = ["ok", "A much longer sentence, with many more tokens, so that the short ones are padded in the batch.",
             "word " * 400]  # past the model's 256-token window: truncated the same way
    modules = onnx_model(onnx_model_dir(local_model_path(), embedder.runtime), embedder.runtime)
    for text in texts:  # one at a time: the int8 model's vector depends on its batch
        direct = embedder._compute([text])[0]
        through_modules = modules.encode([text], normalize_embeddings=True)[0]
        assert max(abs(x - y) for x, y in zip(direct, through_modules)) < 1e-5


def test_a_pipeline_other_than_mean_pooling_keeps_the_modules(tmp_path):
    import json

    from infra.embedder import _OnnxDirect

    kinds = ["Transformer", "Pooling", "Normalize"]
    (tmp_path / "modules.json").write_text(json.dumps(
        [{"path": p, "type": f"sentence_transformers.models.{k}"} for p, k in zip(["", "1_Pooling", "2"], kinds)]))
    (tmp_path / "1_Pooling").mkdir()
    (tmp_path / "1_Pooling" / "config.json").write_text(json.dumps(
        {"pooling_mode_cls_token": True, "pooling_mode_mean_tokens": False, "word_embedding_dimension": 384}))
    with pytest.raises(ValueError):
        _OnnxDirect(str(tmp_path), "onnx")


def test_the_export_cache_is_shared_by_every_checkout_and_data_folder(settings):
    """Each checkout, test run and benchmark has its own data folder: an export kept there was made again by each."""
    from pathlib import Path

    from django.conf import settings as django_settings

    cache = Path(django_settings.EMBEDDING_CACHE_DIR).resolve()
    for folder in (settings.BASE_DIR, settings.VAR_DIR):
        assert not cache.is_relative_to(Path(folder).resolve())


def test_loading_the_cached_export_imports_neither_torch_nor_sentence_transformers(embedder):
    """Start-up reads the ONNX file and the tokenizer: torch's import alone costs seconds and hundreds of MB."""
    import subprocess
    import sys

    assert embedder.runtime == "onnx-int8"  # the export exists now; a fresh process only loads it
    code = ("import sys, django; django.setup(); from infra.embedder import get_embedder; "
            "e = get_embedder(); assert len(e.embed(['hello'])[0]) == 384, e; "
            "print(e.runtime, 'torch' in sys.modules, 'sentence_transformers' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=240,
                         env={**os.environ, "DJANGO_SETTINGS_MODULE": "config.settings.test"})
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["onnx-int8", "False", "False"]
    assert out.stderr == ""  # nothing printed: no library chatter


@pytest.mark.slow
def test_onnx_export_is_made_once_quietly_verified_and_made_again_when_altered(settings, tmp_path, capfd, caplog):
    from infra.embedder_export import MANIFEST, ONNX_FILES

    runtime = "onnx"  # the float export: the int8 one adds a quantization pass to the same code path
    settings.EMBEDDING_CACHE_DIR = tmp_path / "models"
    capfd.readouterr()
    with caplog.at_level("DEBUG"):
        first = LocalEmbedder(runtime=runtime)
    assert first.runtime == runtime and first._direct is not None
    # Start-up prints Continuum's own lines only: the exporters' warnings and notes are kept out.
    # (other threads of the test process, such as an HTTP client's connection pool, may log meanwhile)
    exporters = {"optimum", "transformers", "torch", "onnx", "onnxruntime", "sentence_transformers", "huggingface_hub"}
    names = {r.name for r in caplog.records}
    assert "infra.embedder_export" in names and not {n for n in names if n.split(".")[0] in exporters}, names
    assert capfd.readouterr().err == ""
    (exported,) = [p for p in (tmp_path / "models").iterdir()]
    assert (exported / MANIFEST).is_file()
    model_file = exported / ONNX_FILES[runtime]
    stamp = model_file.stat().st_mtime_ns
    second = LocalEmbedder(runtime=runtime)
    assert model_file.stat().st_mtime_ns == stamp  # read, not exported again
    assert [p.name for p in (tmp_path / "models").iterdir()] == [exported.name]  # no scratch folder left behind
    vector = first.embed(["same text"])[0]
    assert _cos(vector, second.embed(["same text"])[0]) > 0.99999

    with open(model_file, "r+b") as f:  # a bit flipped on disk: the model would still load, with other weights
        f.seek(model_file.stat().st_size // 2)
        byte = f.read(1)
        f.seek(-1, 1)
        f.write(bytes([byte[0] ^ 0x01]))
    third = LocalEmbedder(runtime=runtime)
    assert third.runtime == runtime
    assert model_file.stat().st_mtime_ns != stamp  # made again
    assert _cos(vector, third.embed(["same text"])[0]) > 0.99999
    assert [p.name for p in (tmp_path / "models").iterdir()] == [exported.name]


def test_a_text_embedded_again_moments_later_is_not_computed_twice():
    from infra.embedder import RecentVectors

    computed = []

    def compute(texts):
        computed.extend(texts)
        return [[float(len(t)), 1.0] for t in texts]

    recent = RecentVectors(size=2)
    assert recent.embed(["a", "bb", "a"], compute) == [[1.0, 1.0], [2.0, 1.0], [1.0, 1.0]]
    assert recent.embed(["bb", "ccc"], compute) == [[2.0, 1.0], [3.0, 1.0]]
    assert computed == ["a", "bb", "ccc"]  # duplicates within a call and across calls computed once
    recent.embed(["a"], compute)  # "a" was evicted (size 2: "bb" and "ccc" were used after it)
    assert computed == ["a", "bb", "ccc", "a"]
    recent.clear()
    recent.embed(["bb"], compute)
    assert computed[-1] == "bb"


def test_an_onnx_runtime_that_cannot_load_falls_back_to_torch(settings, tmp_path):
    target = tmp_path / "models"
    target.write_text("not a folder")  # the export cannot be written here
    settings.EMBEDDING_CACHE_DIR = target
    embedder = LocalEmbedder(runtime="onnx")
    assert embedder.runtime == "torch"
    assert len(embedder.embed(["still works"])[0]) == 384


def test_a_vector_handed_out_is_a_copy(embedder):
    first = embedder.embed(["copy me"])[0]
    first[0] = 42.0
    assert embedder.embed(["copy me"])[0][0] != 42.0


def test_unknown_runtime_is_a_configuration_error():
    from django.core.exceptions import ImproperlyConfigured

    with pytest.raises(ImproperlyConfigured, match="EMBEDDING_RUNTIME"):
        LocalEmbedder(runtime="tensorflow")


def test_token_counter_works_offline():
    assert count_tokens("") == 0
    assert count_tokens("hello world") == 2
    long = "word " * 500
    assert 450 <= count_tokens(long) <= 550
    cut = truncate_to_tokens(long, 20)
    assert count_tokens(cut) <= 20 and cut.endswith("…")
    assert truncate_to_tokens("short", 20) == "short"
    assert truncate_to_tokens("anything", 0) == ""


def test_message_tokens_include_framing():
    messages = [{"role": "user", "content": "hello world"}, {"role": "assistant", "content": "hi"}]
    assert count_message_tokens(messages) == 3 + (4 + 2) + (4 + 1)


def test_embed_soon_returns_once_its_worker_is_inside_the_model_and_not_before(monkeypatch):
    """The caller's next Python work must not keep the worker from starting: embed_soon hands over first."""
    import threading
    import time

    from infra import embedder as module

    monkeypatch.setattr(module, "HANDOFF_TIMEOUT_SECONDS", 5.0)
    inside, release = threading.Event(), threading.Event()

    class Slow:
        model_name, dim = "slow", 2

        def embed(self, texts):
            time.sleep(0.05)  # what comes before the model (a tokenizer, say)
            inside.set()
            module.entering_model()
            release.wait(5)
            return [[1.0, 0.0] for _ in texts]

    module.set_embedder(Slow())
    try:
        pending = module.embed_soon(["a query"])
        assert inside.is_set() and not pending.done()  # in the model, still working: the caller went on meanwhile
        release.set()
        assert pending.result(timeout=5) == [[1.0, 0.0]]
    finally:
        module.set_embedder(None)


def test_embed_soon_with_a_silent_embedder_waits_no_longer_than_its_handoff_timeout(monkeypatch):
    import threading

    from infra import embedder as module

    monkeypatch.setattr(module, "HANDOFF_TIMEOUT_SECONDS", 0.05)
    release = threading.Event()

    class Silent:  # never signals that it entered its model
        model_name, dim = "silent", 2

        def embed(self, texts):
            release.wait(5)
            return [[0.0, 1.0] for _ in texts]

    module.set_embedder(Silent())
    try:
        pending = module.embed_soon(["a query"])
        assert not pending.done()  # embed_soon came back while the embedding was still running
        release.set()
        assert pending.result(timeout=5) == [[0.0, 1.0]]
    finally:
        module.set_embedder(None)


@pytest.mark.parametrize("one_per_forward", [True, False])
def test_an_embedder_that_runs_one_forward_per_text_gets_a_querys_texts_side_by_side(monkeypatch, one_per_forward):
    """A query and its parts are embedded at once, each on its own worker, when the embedder runs a forward per text
    anyway; their vectors come back in order, and a failure of either fails the whole. Others get one call."""
    import threading

    from infra import embedder as module

    monkeypatch.setattr(module, "HANDOFF_TIMEOUT_SECONDS", 0.01)
    both_inside = threading.Barrier(2, timeout=2)
    calls = []

    class PerText:
        model_name, dim = "per-text", 1

        def embed(self, texts):
            calls.append(list(texts))
            if one_per_forward and texts != ["alone"]:
                both_inside.wait()  # passes only while the other text is being embedded at the same time
            if "boom" in texts:
                raise RuntimeError("model failed")
            return [[float(len(t))] for t in texts]

    embedder = PerText()
    embedder.one_per_forward = one_per_forward
    module.set_embedder(embedder)
    try:
        assert module.embed_soon(["one", "three"]).result(timeout=5) == [[3.0], [5.0]]
        assert sorted(map(tuple, calls)) == ([("one",), ("three",)] if one_per_forward else [("one", "three")])
        if one_per_forward:
            with pytest.raises(RuntimeError):
                module.embed_soon(["fine", "boom"]).result(timeout=5)
        assert module.embed_soon(["alone"]).result(timeout=5) == [[5.0]]
    finally:
        module.set_embedder(None)


def test_the_local_embedder_signals_as_it_enters_its_model(embedder):
    from infra import embedder as module

    embedder.recent.clear()
    pending = module.embed_soon(["a fresh text that is not in the recent vectors"])
    assert len(pending.result(timeout=30)[0]) == 384
    signalled = []
    module._worker.started = type("E", (), {"set": lambda self: signalled.append(True)})()
    try:
        embedder._compute(["another fresh text"])
    finally:
        module._worker.started = None
    assert signalled == [True]


@pytest.mark.parametrize("configured, expected", [(None, 1), ("2", 2)])
def test_numpys_blas_runs_on_the_configured_threads_in_a_service_process(configured, expected):
    """A process that loads the settings before numpy (every entry point does) gets BLAS_THREADS BLAS threads."""
    import json
    import subprocess
    import sys
    from pathlib import Path

    env = {k: v for k, v in os.environ.items() if k not in ("OPENBLAS_NUM_THREADS", "BLAS_THREADS")}
    if configured:
        env["BLAS_THREADS"] = configured
    code = ("import django; django.setup(); import numpy; from threadpoolctl import threadpool_info; import json; "
            "print(json.dumps([i['num_threads'] for i in threadpool_info() if i['user_api'] == 'blas']))")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120,
                         cwd=Path(__file__).resolve().parents[2], check=True)
    assert json.loads(out.stdout.strip().splitlines()[-1]) == [expected]


def test_the_default_embedder_is_built_once_when_many_threads_ask_first(monkeypatch):
    import threading
    import time

    from infra import embedder as module

    built = []

    class SlowToLoad:
        def __init__(self):
            built.append(self)
            time.sleep(0.1)  # a model load: long enough for every other thread to arrive meanwhile

    monkeypatch.setattr(module, "LocalEmbedder", SlowToLoad)
    monkeypatch.setattr(module, "_default_instance", None)
    got = []
    gate = threading.Barrier(8)
    threads = [threading.Thread(target=lambda: (gate.wait(), got.append(module.get_embedder()))) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(built) == 1 and len(got) == 8 and all(e is built[0] for e in got)


@pytest.fixture
def fresh_counts():
    from infra.tokens import token_counts_clear

    token_counts_clear()
    yield
    token_counts_clear()  # the made-up counts below never reach another test


def test_a_count_known_from_storage_is_used_without_tokenizing(fresh_counts):
    from infra.tokens import count_tokens_known, token_counts_clear

    text = "a stored message whose count came with it"
    count_tokens_known(text, 999)  # not its real count: only the remembered one can answer 999
    assert count_tokens(text) == 999
    token_counts_clear()
    assert count_tokens(text) < 20


def test_a_long_text_is_counted_each_time(fresh_counts):
    from infra.tokens import _COUNTED_TEXT_MAX_CHARS, count_tokens_known

    long = "word " * (_COUNTED_TEXT_MAX_CHARS // 5 + 1)
    count_tokens_known(long, 1)
    assert count_tokens(long) > 1


def test_remembered_counts_are_bounded_by_characters_least_recently_used_out(fresh_counts):
    from infra.tokens import _COUNTED_TEXT_MAX_CHARS, _COUNTS_MAX_CHARS, count_tokens_known

    first, used = "the first text", "a text read again and again"
    count_tokens_known(first, 999)
    count_tokens_known(used, 999)
    for i in range(_COUNTS_MAX_CHARS // _COUNTED_TEXT_MAX_CHARS):
        count_tokens_known(f"{i:08d}".ljust(_COUNTED_TEXT_MAX_CHARS, "x"), 1)
        if i % 512 == 0:
            assert count_tokens(used) == 999  # read: it stays
    assert count_tokens(used) == 999
    assert count_tokens(first) != 999  # pushed out, so tokenized again


def test_counts_from_many_threads_agree_with_the_tokenizer(fresh_counts):
    from concurrent.futures import ThreadPoolExecutor

    from infra.tokens import encoding

    texts = [f"message number {i} about flights to city {i % 7}" for i in range(400)] * 3
    with ThreadPoolExecutor(8) as pool:
        counted = list(pool.map(count_tokens, texts))
    assert counted == [len(encoding().encode(t)) for t in texts]
