"""Production settings: secrets have no defaults; PostgreSQL and a Qdrant server are required."""
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
