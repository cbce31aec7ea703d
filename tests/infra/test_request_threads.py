"""Requests' sync code runs on a few long-lived threads (so per-thread connections survive), never blocking."""
from __future__ import annotations

import asyncio
import threading

from asgiref.sync import ThreadSensitiveContext, sync_to_async

from infra.request_threads import RequestThreadPool


class DjangoLikeApp:
    """What Django's ASGIHandler does with a request: its own thread-sensitive context, sync code inside it."""

    def __init__(self, hold: asyncio.Event | None = None):
        self.hold = hold
        self.threads: list[int] = []

    async def __call__(self, scope, receive, send):
        async with ThreadSensitiveContext():
            ident = await sync_to_async(threading.get_ident)()
            if self.hold is not None:
                await self.hold.wait()
            # A second sync call of the same request runs on the same thread (Django relies on it for the ORM).
            assert await sync_to_async(threading.get_ident)() == ident
            self.threads.append(ident)


def _http():
    return {"type": "http", "method": "GET", "path": "/"}


def test_sequential_requests_reuse_one_pooled_thread():
    inner = DjangoLikeApp()
    app = RequestThreadPool(inner, size=4)

    async def run():
        for _ in range(10):
            await app(_http(), None, None)

    asyncio.run(run())
    assert len(inner.threads) == 10 and len(set(inner.threads)) == 1
    assert inner.threads[0] != threading.get_ident()


def test_more_concurrent_requests_than_threads_all_complete_on_fresh_threads_beyond_the_pool():
    async def run():
        hold = asyncio.Event()
        inner = DjangoLikeApp(hold)
        app = RequestThreadPool(inner, size=3)
        tasks = [asyncio.create_task(app(_http(), None, None)) for _ in range(8)]
        await asyncio.sleep(0.2)
        assert app._free == []  # the three pooled threads are all held by requests in flight
        hold.set()
        await asyncio.wait_for(asyncio.gather(*tasks), timeout=10)
        return inner, app

    inner, app = asyncio.run(run())
    assert len(inner.threads) == 8 and len(set(inner.threads)) == 8  # concurrent requests never share a thread
    assert len(app._free) == 3  # every pooled thread came back


def test_non_http_scopes_pass_through_untouched():
    seen = []

    async def inner(scope, receive, send):
        seen.append(scope["type"])

    asyncio.run(RequestThreadPool(inner, size=2)({"type": "lifespan"}, None, None))
    assert seen == ["lifespan"]
