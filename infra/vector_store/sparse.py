"""BM25 sparse vectors from Qdrant Edge's offline Bm25 model, for both backends (fastembed's needs a hub)."""
from __future__ import annotations

import functools

# Memories are one or two sentences: about this many content tokens once English stopwords are gone.
# BM25's length normalisation is relative to it; the default (256) would treat every memory as tiny.
# Documents are embedded with it, so changing it means re-embedding every point (a reindex).
BM25_AVG_LEN = 16.0


@functools.lru_cache(maxsize=1)
def _model():
    from qdrant_edge import Bm25, Bm25Config

    return Bm25(Bm25Config(avg_len=BM25_AVG_LEN, language="english"))


def document_sparse(text: str):
    """The stored sparse vector of a memory's text (a qdrant_edge.SparseVector; may have no indices)."""
    return _model().embed_document(text or "")


def query_sparse(text: str | None):
    """The sparse vector of a query, or None when it has no searchable term (empty, or only stopwords)."""
    if not text or not text.strip():
        return None
    vec = _model().embed_query(text)
    return vec if vec.indices else None
