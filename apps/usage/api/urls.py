from django.urls import path

from apps.usage.api import views

urlpatterns = [
    path("usage/", views.UsageApi.as_view(), name="usage"),
    path("idle-allocations/", views.IdleAllocationListApi.as_view(), name="idle-allocations"),
]
