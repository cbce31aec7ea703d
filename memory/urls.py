"""Routes for memories."""
urlpatterns = []
