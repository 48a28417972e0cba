from django.urls import path

from apps.monitoring import views

app_name = "monitoring"
urlpatterns = [
    path("metrics", views.metrics, name="metrics"),
    path("livez", views.livez, name="livez"),
]
