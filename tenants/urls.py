"""Routes for end users."""
from django.urls import path

from . import apis

urlpatterns = [
    path("users", apis.UserListCreateApi.as_view(), name="users"),
]
