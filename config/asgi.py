"""ASGI entry point (uvicorn serves this; streaming responses and /mcp need it)."""
import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.local")
application = get_asgi_application()

from django.conf import settings  # noqa: E402

if settings.DEBUG:
    from django.contrib.staticfiles.handlers import ASGIStaticFilesHandler

    application = ASGIStaticFilesHandler(application)

# /mcp (the MCP server, Streamable HTTP) is an ASGI app of the MCP SDK served beside Django: mcp_server/asgi.py says
# why. It also takes the lifespan events, which start its session manager.
from mcp_server.asgi import mcp_mount  # noqa: E402

application = mcp_mount(application)

from infra.request_id import RequestIdMiddleware  # noqa: E402

application = RequestIdMiddleware(application)  # Django's and /mcp's responses and logs alike

from infra.request_threads import RequestThreadPool  # noqa: E402

application = RequestThreadPool(application, size=settings.ASGI_REQUEST_THREADS)

if settings.EMBEDDING_WARM_AT_START:
    # Loaded before the first request (a few seconds): /readyz answers only once the process can embed a query.
    from infra.embedder import get_embedder

    get_embedder().embed(["warm-up"])

# Only the process that the run script marks hosts the worker, so a reloader or extra server never doubles it.
if settings.CONTINUUM_EMBEDDED_WORKER and os.environ.get("CONTINUUM_HOST_WORKER") == "1":
    from config.embedded_worker import start_embedded_worker

    start_embedded_worker()
