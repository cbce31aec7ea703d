"""URL routes: admin, REST v1, OpenAI-compatible v1, schema and docs, health."""
from django.contrib import admin
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView

from backoffice.playground import playground
from ops.health import healthz, readyz
from ops.metrics import metrics

# The admin's "View site" opens the API's documentation: the service has no site of its own at "/".
admin.site.site_url = "/api/docs/"
admin.site.site_header = admin.site.site_title = "Continuum admin"
# A reviewer's lists are wide (text, provenance, user, dates): the app list stays on the index page instead.
admin.site.enable_nav_sidebar = False
admin.site.index_template = "admin/playground/index.html"  # the admin index, with a link to the playground

urlpatterns = [
    path("admin/playground/", playground, name="admin_playground"),  # before admin/, whose catch-all would take it
    path("admin/", admin.site.urls),
    path("api/v1/", include("api.urls")),
    path("v1/", include("api.openai.urls")),
    path("api/schema/", SpectacularAPIView.as_view(), name="schema"),
    path("api/docs/", SpectacularSwaggerView.as_view(url_name="schema"), name="docs"),
    path("healthz", healthz),
    path("readyz", readyz),
    path("metrics", metrics, name="metrics"),
]
