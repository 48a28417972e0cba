from django.urls import path
from drf_spectacular.views import SpectacularAPIView, SpectacularRedocView, SpectacularSwaggerView
from rest_framework.permissions import IsAuthenticated

from apps.inventory.api import views

urlpatterns = [
    path("teams/", views.TeamListApi.as_view(), name="teams"),
    path("teams/<str:name>/", views.TeamDetailApi.as_view(), name="team-detail"),
    path("clusters/", views.ClusterListApi.as_view(), name="clusters"),
    path("clusters/<str:name>/", views.ClusterDetailApi.as_view(), name="cluster-detail"),
    # The OpenAPI document and its browsable renderings; like every /api/v1/ route, they need a login.
    path("schema/", SpectacularAPIView.as_view(permission_classes=[IsAuthenticated]), name="schema"),
    path(
        "docs/",
        SpectacularSwaggerView.as_view(url_name="schema", permission_classes=[IsAuthenticated]),
        name="api-docs",
    ),
    path(
        "redoc/",
        SpectacularRedocView.as_view(url_name="schema", permission_classes=[IsAuthenticated]),
        name="api-redoc",
    ),
]
