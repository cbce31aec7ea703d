"""Routes for end-user memory controls."""
urlpatterns = []
