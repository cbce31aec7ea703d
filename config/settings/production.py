"""Production settings: secrets have no defaults; PostgreSQL and a Qdrant server are required."""
from django.core.exceptions import ImproperlyConfigured

from .base import *  # noqa: F401,F403
from .base import env

SECRET_KEY = env("DJANGO_SECRET_KEY")
DATABASES = {"default": env.db("DATABASE_URL")}
DATABASES["default"]["ATOMIC_REQUESTS"] = False
DATABASES["default"]["CONN_MAX_AGE"] = env.int("DB_CONN_MAX_AGE", default=60)
QDRANT_URL = env("QDRANT_URL")
ALLOWED_HOSTS = env.list("DJANGO_ALLOWED_HOSTS")
CONTINUUM_EMBEDDED_WORKER = False
SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
SESSION_COOKIE_SECURE = True
CSRF_COOKIE_SECURE = True

# /metrics (every tenant's counts) and /readyz's component detail are for operators only. The service has one
# listener and cannot tell a private scrape network from the internet, so production needs the token and has no
# switch that serves them open; a scraper sends it as "Authorization: Bearer <token>".
METRICS_TOKEN = env("METRICS_TOKEN")
if len(METRICS_TOKEN) < 16:
    raise ImproperlyConfigured("METRICS_TOKEN must be at least 16 characters: it guards /metrics and /readyz detail.")
