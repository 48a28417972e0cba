from django.urls import path

from apps.dashboard import views

app_name = "dashboard"
urlpatterns = [
    path("", views.overview, name="overview"),
    path("healthz", views.healthz, name="healthz"),
]
