"""Routes for end users."""
from django.urls import path

from . import apis

urlpatterns = [
    path("users", apis.UserListCreateApi.as_view(), name="users"),
    path("users/<str:user_id>", apis.UserDetailApi.as_view(), name="user-detail"),
]
