"""Routes for end-user memory controls (export and bulk-delete before the detail route, which would take them as
ids)."""
from django.urls import path

from . import controls
from .profile import UserProfileApi

urlpatterns = [
    path("users/<str:user_id>/memories", controls.UserMemoryListApi.as_view(), name="user-memories"),
    path("users/<str:user_id>/memories/export", controls.UserMemoryExportApi.as_view(), name="user-memories-export"),
    path("users/<str:user_id>/memories/bulk-delete", controls.UserMemoryBulkDeleteApi.as_view(),
         name="user-memories-bulk-delete"),
    path("users/<str:user_id>/memories/<str:memory_id>", controls.UserMemoryDetailApi.as_view(),
         name="user-memory-detail"),
    path("users/<str:user_id>/profile", UserProfileApi.as_view(), name="user-profile"),
    path("users/<str:user_id>/erase", controls.UserEraseApi.as_view(), name="user-erase"),
]
