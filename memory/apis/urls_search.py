"""Routes for memory search."""
urlpatterns = []
