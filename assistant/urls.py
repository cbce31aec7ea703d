"""Routes for assistant mode."""
urlpatterns = []
