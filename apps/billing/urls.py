from django.urls import path

from apps.billing import views

app_name = "billing"
urlpatterns = [
    path("reconciliation/", views.reconciliation_page, name="reconciliation"),
]
