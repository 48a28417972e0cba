from django.urls import path

from apps.findings.api import views

urlpatterns = [
    path("findings/", views.FindingListApi.as_view(), name="findings"),
    path("findings/<int:pk>/", views.FindingDetailApi.as_view(), name="finding-detail"),
    path("idle-allocations/", views.IdleAllocationListApi.as_view(), name="idle-allocations"),
]
