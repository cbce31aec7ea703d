"""Long-lived threads for the synchronous part of each HTTP request under ASGI.

Django's ASGI handler runs a request's sync code (middleware, DRF views, the ORM) in a thread-sensitive context of
its own, and asgiref gives each such context a brand-new thread. Everything Django and its libraries keep per
thread then starts cold on every request: a new PostgreSQL connection (CONN_MAX_AGE cannot help), Celery's
result-backend lookup (an entry-points scan), and so on. Measured under bench/load.py that was tens of
milliseconds a turn.

This wrapper hands each HTTP request one thread from a fixed set for its whole lifetime (asgiref's
ThreadSensitiveContext with a caller-owned executor, which Django's own context then joins), so per-thread state is
reused. When every pooled thread is busy (e.g. many long streams), a request falls back to Django's default, a
fresh thread: never a queue, never a deadlock.
"""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from asgiref.sync import ThreadSensitiveContext


class RequestThreadPool:
    def __init__(self, app, size: int):
        self.app = app
        self.size = max(0, size)
        self._free: list[ThreadPoolExecutor] = [
            ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"request-{n}") for n in range(self.size)]

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or not self._free:
            return await self.app(scope, receive, send)
        # One event loop serves this object, and list pop/append do not await: no lock is needed between them.
        executor = self._free.pop()
        try:
            async with ThreadSensitiveContext(executor=executor):
                await self.app(scope, receive, send)
        finally:
            self._free.append(executor)
