"""ASGI entry point (uvicorn serves this; streaming responses need it)."""
import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.local")
application = get_asgi_application()

from django.conf import settings  # noqa: E402

if settings.DEBUG:
    from django.contrib.staticfiles.handlers import ASGIStaticFilesHandler

    application = ASGIStaticFilesHandler(application)

# Only the process that the run script marks hosts the worker, so a reloader or extra server never doubles it.
if settings.CONTINUUM_EMBEDDED_WORKER and os.environ.get("CONTINUUM_HOST_WORKER") == "1":
    from infra.embedded_worker import start_embedded_worker

    start_embedded_worker()
