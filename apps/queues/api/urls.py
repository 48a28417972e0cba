from django.urls import path

from apps.queues.api import views

urlpatterns = [
    path("queues/", views.QueueListApi.as_view(), name="queues"),
    path("queues/admission-wait/", views.AdmissionWaitApi.as_view(), name="queues-admission-wait"),
    path("queues/usage/", views.QueueUsageApi.as_view(), name="queues-usage"),
]
