"""Routes for end-user memory controls (the root URL conf puts orchestration's export and bulk-delete routes first:
this detail route would take them as ids). The list of a user's memories is routed by orchestration, whose DELETE of
them all takes their words out of what was derived from them."""
from django.urls import path

from . import controls
from .profile import UserProfileApi

urlpatterns = [
    path("users/<str:user_id>/memories/<str:memory_id>", controls.UserMemoryDetailApi.as_view(),
         name="user-memory-detail"),
    path("users/<str:user_id>/profile", UserProfileApi.as_view(), name="user-profile"),
]
