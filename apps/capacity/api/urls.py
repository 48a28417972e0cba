from django.urls import path

from apps.capacity.api import views

urlpatterns = [
    path("fragmentation/", views.FragmentationApi.as_view(), name="fragmentation"),
    path("pending/", views.PendingListApi.as_view(), name="pending"),
    path("pending/counts/", views.PendingCountsApi.as_view(), name="pending-counts"),
]
