"""/api/v1/: each domain app owns its routes in apps/<app>/api/urls.py."""

from django.urls import include, path

urlpatterns = [
    path("", include("apps.usage.api.urls")),
    path("", include("apps.inventory.api.urls")),
    path("", include("apps.capacity.api.urls")),
    path("", include("apps.queues.api.urls")),
]
