"""URL routes: admin, REST v1, OpenAI-compatible v1, schema and docs, health."""
from django.contrib import admin
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView

from ops.health import healthz, readyz
from ops.metrics import metrics

api_v1 = [
    # orchestration first: its fixed routes under users/<id>/memories/ come before memory's detail route
    path("", include("orchestration.urls")),
    path("", include("tenants.urls")),
    path("", include("memory.urls")),
    path("", include("assistant.urls")),
    path("", include("webhooks.urls")),
]

urlpatterns = [
    path("admin/", admin.site.urls),
    path("api/v1/", include(api_v1)),
    path("v1/", include("assistant.openai_urls")),
    path("api/schema/", SpectacularAPIView.as_view(), name="schema"),
    path("api/docs/", SpectacularSwaggerView.as_view(url_name="schema"), name="docs"),
    path("healthz", healthz),
    path("readyz", readyz),
    path("metrics", metrics, name="metrics"),
]
