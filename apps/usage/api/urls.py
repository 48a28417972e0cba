from django.urls import path

from apps.usage.api import views

urlpatterns = [
    path("usage/", views.UsageApi.as_view(), name="usage"),
    path("rankings/", views.RankingApi.as_view(), name="rankings"),
    path("teams/", views.TeamListApi.as_view(), name="teams"),
    path("teams/<str:name>/", views.TeamDetailApi.as_view(), name="team-detail"),
    path("clusters/", views.ClusterListApi.as_view(), name="clusters"),
    path("clusters/<str:name>/", views.ClusterDetailApi.as_view(), name="cluster-detail"),
    path("data-status/", views.DataStatusApi.as_view(), name="data-status"),
]
