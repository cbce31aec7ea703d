"""BM25 sparse vectors from Qdrant Edge's offline Bm25 model, for both backends (fastembed's needs a hub).

Keyword terms are kept per tenant: a term's id is its Bm25 id mixed with a key of its tenant, so each tenant has
posting lists of its own. A keyword search then walks only its tenant's points, as the payload filter bounds a dense
search, instead of every tenant's points that use the word (which grows with the shard, not with the tenant); and
the document frequency behind BM25's IDF, which the store counts per term id, is counted in the tenant only, so
another tenant's words do not change how this tenant's terms weigh against each other (the count of points the IDF
divides by is still the shard's, which moves every term alike). Within a tenant the mixing is a bijection: no two
of its terms share an id. Across tenants two terms can meet on one id (ids are 32 bits); the tenant filter still
keeps each search in its tenant.

Points carry the layout they were written with (`SPARSE_LAYOUT` in their payload); the reconcile job rewrites a
point whose mark differs, and `manage.py memory_reindex` rewrites all of them at once.
"""
from __future__ import annotations

import functools
import hashlib

from infra.unspaced import unspaced_terms

# Memories are one or two sentences: about this many content tokens once English stopwords are gone.
# BM25's length normalisation is relative to it; the default (256) would treat every memory as tiny.
# Documents are embedded with it, so changing it means re-embedding every point (a reindex).
BM25_AVG_LEN = 16.0
SPARSE_LAYOUT = "tenant-terms"
_MIX = 0x9E3779B1  # odd: multiplying by it is a bijection on 32-bit ids
_MASK = 0xFFFFFFFF


@functools.lru_cache(maxsize=1)
def _model():
    from qdrant_edge import Bm25, Bm25Config

    return Bm25(Bm25Config(avg_len=BM25_AVG_LEN, language="english"))


@functools.lru_cache(maxsize=4096)
def _tenant_key(tenant_id: str) -> int:
    return int.from_bytes(hashlib.blake2b(tenant_id.encode(), digest_size=4).digest(), "big")


def _in_tenant(vec, tenant_id):
    from qdrant_edge import SparseVector

    key = _tenant_key(str(tenant_id))
    return SparseVector(indices=[((i ^ key) * _MIX) & _MASK for i in vec.indices], values=list(vec.values))


def document_sparse(text: str, *, tenant_id: str):
    """The stored sparse vector of a tenant's memory text (a qdrant_edge.SparseVector; may have no indices)."""
    return _in_tenant(_model().embed_document(unspaced_terms(text or "")), tenant_id)


def query_sparse(text: str | None, *, tenant_id: str | None = None):
    """The sparse vector of a query, or None when it has no searchable term (empty, or only stopwords). With a tenant,
    in that tenant's term ids (what its points hold); without one, the plain term ids (to compare two texts' terms)."""
    if not text or not text.strip():
        return None
    vec = _model().embed_query(unspaced_terms(text))
    if not vec.indices:
        return None
    return _in_tenant(vec, tenant_id) if tenant_id is not None else vec
