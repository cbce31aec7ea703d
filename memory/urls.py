"""Routes for memories: search, and the end user's own controls."""
from .apis.urls_controls import urlpatterns as controls_urls
from .apis.urls_search import urlpatterns as search_urls

urlpatterns = [*search_urls, *controls_urls]
